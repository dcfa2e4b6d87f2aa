// The files of a checkpoint folder that are neither its config nor its tensors: tokenizer,
// generation config, chat template, remote code, README. quantize and dequantize copy them into
// their output as they are.
//
// Ownership: callers own both folders; nothing is kept. Thread safety: call from one thread per
// destination. Errors: the file system's (NotFound, IoError) naming the file; the copy stops at the
// first error and leaves what it copied for the caller's atomic folder to discard.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace spk {

// Copies every file of `src_dir` other than config.json, the shard index and *.safetensors
// into `dst_dir`; sub-folders are reported in `warnings`, not copied. Returns the copied names.
Result<std::vector<std::string>> CopyOtherFiles(const std::string& src_dir,
                                                const std::string& dst_dir,
                                                std::vector<std::string>* warnings);

}  // namespace spk
