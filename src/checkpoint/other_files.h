// The files of a checkpoint folder that are neither its config nor its tensors: tokenizer,
// generation config, chat template, remote code, README. quantize and dequantize copy them into
// their output as they are, through their CheckpointWriter (which copies them when it finishes,
// into its temporary folder, so a failed copy leaves nothing behind).
//
// Ownership: nothing is kept; the writer must outlive the call. Thread safety: call from the
// writer's thread. Errors: the file system's listing error (NotFound, IoError) naming the folder;
// copy errors come from CheckpointWriter::Finish, naming the file.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "io/file.h"
#include "safetensors/checkpoint_writer.h"

namespace spk {

// Declares to `out` a copy of every file of `src_dir` other than config.json, the shard index and
// *.safetensors; sub-folders are reported in `warnings`, not copied. Returns the names to be
// copied.
Result<std::vector<std::string>> CopyOtherFiles(FileSystem* fs, const std::string& src_dir,
                                                CheckpointWriter* out,
                                                std::vector<std::string>* warnings);

}  // namespace spk
