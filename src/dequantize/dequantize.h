// `sparkulator dequantize`: a compressed-tensors checkpoint of any format sparkulator writes back
// to a dense one, each module in the dtype compressed-tensors' decompression gives it (the dtype of
// weight_scale for pack-, int- and float-quantized; BF16 for NVFP4, MXFP4 and MXFP8), with
// config.json minus quantization_config. A source of another format DecodeQuantizedSource reads
// (FP8 blocks, GPTQ/AWQ, ModelOpt; source/source_decode.h) is written as quantize reads it: its
// weights decoded, its scales left out.
//
// QuantizedModuleReader (source/module_reader.h) streams the dequantized rows of one quantized
// module, exactly compressed-tensors' decompress; `compare` reads through it too.
// DequantizeCheckpoint writes through the same CheckpointWriter as `quantize`
// (safetensors/checkpoint_writer.h): headers planned up front, modules dequantized in row blocks on
// the worker pool and written at their final offsets (memory bounded by the block size), fsynced
// unless --no-fsync, into a temporary folder renamed at the end. Output is deterministic and does
// not depend on the thread count.
// Thread safety: DequantizeCheckpoint runs its own workers; call it from one thread. Errors:
// InvalidInput naming the file and tensor for inconsistent tensors or an unsupported scheme,
// NotFound/AlreadyExists for paths, IoError for the file system.
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/file.h"
#include "io/run_context.h"

namespace spk {

struct DequantizeOptions {
  std::string source;       // quantized checkpoint: folder or org/name in the HF cache
  std::string destination;  // must not exist (or be empty) unless force
  bool force = false;
  // kPageCache (--no-fsync) skips every fsync; the rename stays atomic.
  Durability durability = Durability::kSynced;
};

struct DequantizeSummary {
  std::string source_dir;
  std::string destination;
  size_t dequantized_modules = 0;
  size_t copied_tensors = 0;
  size_t shards = 0;
  std::vector<std::string> copied_files;
  std::vector<std::string> warnings;
};

// Cancelled (run.cancel) between row blocks: Status::Cancelled, the temporary folder removed.
Result<DequantizeSummary> DequantizeCheckpoint(const RunContext& run,
                                               const DequantizeOptions& options);

// What `dequantize --json` prints (and the Python module's DequantizeSummary holds).
nlohmann::ordered_json DequantizeSummaryToJson(const DequantizeSummary& summary);

}  // namespace spk
