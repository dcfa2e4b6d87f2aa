// The files of a checkpoint folder that are neither its config nor its tensors: tokenizer,
// generation config, chat template, remote code, README, and every sub-folder (a
// sentence-transformers model's 1_Pooling/config.json, a remote-code package). quantize and
// dequantize copy them into their output as they are, as llm-compressor's model_free_ptq does,
// through their CheckpointWriter (which copies them when it finishes, into its temporary folder, so
// a failed copy leaves nothing behind). The walk happens before Finish writes anything, so a file
// that cannot be copied fails the run at once.
//
// Links: a link is followed (a file's bytes are copied, a folder is walked, under the link's own
// name) when it resolves inside the source folder, or, for a snapshot of the Hugging Face cache
// (`models--org--name/snapshots/<commit>`), inside the model's cache folder, where every file links
// to `../../blobs/`. A link that resolves anywhere else is refused: copying it would put a file
// from outside the checkpoint (a home folder, /etc) into an output that is made to be shared.
// Every look at the source goes through `fs`: links are seen, read and resolved with
// FileSystem::IsLink/ReadLink/RealPath, folders listed with ListDirectory; copies are made by the
// writer through its own FileSystem.
//
// Ownership: nothing is kept; the writer must outlive the call. Thread safety: call from the
// writer's thread. Errors: InvalidInput naming the link and where it leads (outside the source,
// nowhere, or back into a folder being walked); the file system's listing or resolving error
// (NotFound, IoError) naming the folder or link; copy errors come from CheckpointWriter::Finish,
// naming the file.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "io/file.h"
#include "safetensors/checkpoint_writer.h"

namespace spk {

// Declares to `out` a copy of every file of `src_dir`, sub-folders included, in name order, except
// what the writers produce (the top-level config.json, shard index and *.safetensors), what
// model_free_ptq skips too (the top-level .cache/ that `huggingface-cli download --local-dir`
// leaves, and .gitattributes), and the top-level files that describe the source's quantization
// beside config.json (kQuantizationSideFiles: hf_quant_config.json, quantize_config.json,
// quant_config.json; vLLM, TensorRT-LLM, GPTQModel and AutoAWQ would read them as the output's).
// Entries that are neither files nor folders (sockets, pipes) are reported in `warnings`. Returns
// the names to be copied, relative to `src_dir` ("1_Pooling/config.json").
Result<std::vector<std::string>> CopyOtherFiles(FileSystem* fs, const std::string& src_dir,
                                                CheckpointWriter* out,
                                                std::vector<std::string>* warnings);

}  // namespace spk
