// `sparkulator dequantize`: a compressed-tensors pack-quantized checkpoint back to a dense one, in
// the source's dtype (the dtype of weight_scale), with config.json minus quantization_config.
//
// PackedModuleReader streams the dequantized rows of one quantized module (quant/rtn.h
// DequantizeRows: exactly compressed-tensors' decompress); `compare` reads through it too.
// DequantizeCheckpoint writes through the same CheckpointWriter as `quantize`
// (safetensors/checkpoint_writer.h): headers planned up front, modules dequantized in row blocks on
// the worker pool and written at their final offsets (memory bounded by the block size), fsynced
// unless --no-fsync, into a temporary folder renamed at the end. Output is deterministic and does
// not depend on the thread count.
// Ownership: a PackedModuleReader points into the SourceCheckpoint it was opened on, which must
// outlive it. Thread safety: ReadRows may be called from several threads at once, each with its own
// RowBlock; DequantizeCheckpoint runs its own workers, call it from one thread. Errors:
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
#include "checkpoint/quant_config.h"
#include "checkpoint/source.h"
#include "io/file.h"
#include "quant/scheme.h"

namespace spk {

class PackedModuleReader {
 public:
  // `module` without suffix ("model.layers.0.mlp.up_proj"); every tensor the scheme's codec
  // stores for it (weight_packed, weight_scale, weight_shape, and weight_zero_point for asymmetric
  // schemes) must be in `ckpt` with the codec's dtype and shape.
  static Result<PackedModuleReader> Open(const SourceCheckpoint& ckpt, const std::string& module,
                                         const CheckpointScheme& scheme);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  DType dtype() const { return dtype_; }  // the dtype of weight_scale = of the source weight
  int64_t groups() const { return groups_; }
  const QuantParams& params() const { return params_; }

  struct RowBlock {
    std::vector<uint8_t> bytes;        // n x cols dequantized values, little-endian in dtype()
    std::vector<float> scales;         // n x groups()
    std::vector<int32_t> zero_points;  // n x groups() unpacked; empty for symmetric schemes
  };
  // Dequantizes rows [r0, r0 + n). REQUIRES: 0 <= r0, n > 0, r0 + n <= rows().
  Status ReadRows(int64_t r0, int64_t n, RowBlock* block) const;

 private:
  PackedModuleReader() = default;
  std::string module_;
  const SafetensorsReader* packed_reader_ = nullptr;
  const SafetensorsReader* scale_reader_ = nullptr;
  const TensorEntry* packed_ = nullptr;
  const TensorEntry* scale_ = nullptr;
  std::vector<int32_t> zero_points_;  // rows x groups, unpacked (asymmetric only)
  QuantParams params_;
  const WeightCodec* codec_ = nullptr;
  DType dtype_ = DType::kBF16;
  int64_t rows_ = 0, cols_ = 0, groups_ = 0, words_ = 0;
};

// Rows per block that keep a block of `cols` columns near 4 MiB.
int64_t RowsPerBlock(int64_t cols);

struct DequantizeOptions {
  std::string source;       // quantized checkpoint: folder or org/name in the HF cache
  std::string destination;  // must not exist (or be empty) unless force
  bool force = false;
  int threads = 0;  // 0: all cores
  // kPageCache (--no-fsync) skips every fsync; the rename stays atomic.
  Durability durability = Durability::kSynced;
  // Polled between row blocks (Ctrl-C in Python): Status::Cancelled, the temporary folder removed.
  const std::atomic<bool>* cancel = nullptr;
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

Result<DequantizeSummary> DequantizeCheckpoint(const DequantizeOptions& options, FileSystem* fs);

// What `dequantize --json` prints (and the Python module's DequantizeSummary holds).
nlohmann::ordered_json DequantizeSummaryToJson(const DequantizeSummary& summary);

}  // namespace spk
