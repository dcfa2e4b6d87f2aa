// `sparkulator quantize`: a safetensors checkpoint in, a compressed-tensors pack-quantized
// checkpoint out.
//
// One tensor's path through this file: the plan (plan/plan.h) says quantize or keep; the
// tensor is declared to the CheckpointWriter (safetensors/checkpoint_writer.h) as the scheme's
// stored tensors with a producer that reads the source in row blocks and quantizes them with
// quant/rtn.h, or as a copy; the writer computes every header up front, runs the producers on the
// worker pool and writes each block at its final offset. Memory stays bounded by the block size
// times the worker count, whatever the checkpoint's size. The output is written into a temporary
// folder beside DST and renamed at the end, so a failed or interrupted run leaves nothing that
// looks like a checkpoint. Output bytes do not depend on the thread count.
//
// Thread safety: QuantizeCheckpoint runs its own workers; call it from one thread.
// Errors: InvalidInput/NotFound/AlreadyExists/Usage for bad input (exit 2), IoError for the file
// system (exit 3); messages name the file and the tensor.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "io/file.h"
#include "io/run_context.h"
#include "model/target_precision.h"
#include "plan/plan.h"

namespace spk {

struct QuantizeOptions {
  std::string source;                      // folder or "org/name" in the local Hugging Face cache
  std::string destination;                 // must not exist, or be empty, unless force
  QuantMethod method = QuantMethod::kRtn;  // min-max RTN (bit-exact) or the search (quant/search.h)
  // For drafts: the precision of the target the draft was trained against, recorded in config.json
  // (its Name(): "unquantized", "fp8", "int4") so that `check --target` catches a cross-pairing.
  TargetPrecision target_precision;
  PlanOptions plan;  // the scheme row and group size (quant/scheme.h SelectScheme) among them
  // --target: the model the draft is served with (folder or org/name), read into plan.target
  // (vllm/target_model.h); "" for none.
  std::string target;
  bool force = false;
  bool dry_run = false;  // plan and report, write nothing
  // Continue an interrupted run of the same job (--resume): the shards it finished, verified by
  // their content hash, are taken over; the rest are written (safetensors/checkpoint_writer.h).
  bool resume = false;
  // kPageCache (--no-fsync) skips every fsync: as fast as cp, durable only once the kernel has
  // written the pages back. The rename stays atomic either way.
  Durability durability = Durability::kSynced;
  // One part of the job split across machines (--part I/N): the output shards of the source
  // shards assigned to part `index` of `count` (PartOfShards), for `sparkulator merge`.
  struct Part {
    int index = 0;  // 1-based
    int count = 0;
  };
  std::optional<Part> part;
};

// "I/N" (1 <= I <= N) as a Part; Usage otherwise.
Result<QuantizeOptions::Part> ParsePart(std::string_view text);

// The shards (by number) part `index` of `count` writes: whole shards, spread so that each part's
// bytes are as even as the shard sizes allow (largest first onto the lightest part, ties to the
// lower part), the same on every machine.
std::vector<size_t> PartOfShards(const std::vector<uint64_t>& shard_bytes, int index, int count);

struct QuantizeSummary {
  std::string source_dir;
  std::string destination;
  std::string scheme;               // e.g. "w4a16"
  std::vector<TensorMeta> tensors;  // the source's tensors, parallel to plan.tensors
  std::string family_target;        // for drafts: the target named in config.json, if any
  QuantPlan plan;
  uint64_t source_tensor_bytes = 0;
  uint64_t output_tensor_bytes = 0;
  size_t shards = 0;
  size_t reused_shards = 0;              // --resume: shards taken over from the interrupted run
  std::vector<std::string> part_shards;  // --part I/N: the shards this part wrote
  std::vector<std::string> copied_files;
  std::vector<std::string> warnings;
  double seconds = 0;
  // A pre-quantized source's quantization_config (JSON text), which it was decoded from
  // (source/source_decode.h); "" for a dense source.
  std::string decoded_from;
};

// Cancelled (run.cancel, Ctrl-C) between row blocks, the run stops with Status::Cancelled and the
// temporary output folder is removed.
Result<QuantizeSummary> QuantizeCheckpoint(const RunContext& run, const QuantizeOptions& options);

}  // namespace spk
