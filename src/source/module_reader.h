// QuantizedModuleReader: the dequantized rows of one quantized module of a compressed-tensors
// checkpoint, in any format of the scheme registry (quant/scheme.h), read in row blocks so that
// memory stays bounded. The codec (quant/codec.h) says which tensors the module stores and
// dequantizes them exactly as compressed-tensors 0.19's decompressor does, into the dtype that
// decompressor returns (WeightCodec::DequantizedDType: the scale dtype for pack-, int- and
// float-quantized, BF16 for the FP4 and MXFP8 formats). `dequantize` writes these rows,
// `compare` measures them, and `quantize` requantizes them from a compressed-tensors source
// (source/source_decode.h).
//
// Ownership: a reader points into the SourceCheckpoint it was opened on, which must outlive it.
// Thread safety: ReadRows may be called from several threads at once, each with its own RowBlock.
// Errors: InvalidInput naming the folder, module and tensor for a missing or misshapen tensor (and
// what to run: `sparkulator check`); read errors as the safetensors reader returns them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/quant_config.h"
#include "source/source.h"

namespace spk {

class QuantizedModuleReader {
 public:
  // `module` without suffix ("model.layers.0.mlp.up_proj"); every tensor the scheme's codec
  // stores for it must be in `ckpt` with the codec's dtype and shape.
  static Result<QuantizedModuleReader> Open(const SourceCheckpoint& ckpt, const std::string& module,
                                            const CheckpointScheme& scheme);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  DType dtype() const { return out_dtype_; }  // the dtype the rows are dequantized to
  int64_t groups() const { return groups_; }  // scale columns: groups, blocks, or 1 per channel
  const QuantParams& params() const { return params_; }
  // A block start ReadRows accepts is a multiple of this (128 for FP8 blocks).
  int64_t row_alignment() const { return codec_->RowAlignment(); }

  struct RowBlock {
    std::vector<uint8_t> bytes;        // n x cols dequantized values, little-endian in dtype()
    std::vector<float> scales;         // n x groups(): each row's effective scale per group
    std::vector<int32_t> zero_points;  // n x groups() unpacked; empty for symmetric schemes
  };
  // Dequantizes rows [r0, r0 + n). REQUIRES: r0 a multiple of row_alignment(), n > 0,
  // r0 + n <= rows().
  Status ReadRows(int64_t r0, int64_t n, RowBlock* block) const;

 private:
  // One stored tensor that has rows (values, scales).
  struct RowTensor {
    const SafetensorsReader* reader = nullptr;
    const TensorEntry* entry = nullptr;
    int64_t weight_rows_per_row = 1;
    uint64_t row_bytes = 0;
  };
  QuantizedModuleReader() = default;
  Status ReadStored(const RowTensor& t, int64_t r0, int64_t n, std::vector<uint8_t>* out) const;
  float EffectiveScale(const uint8_t* stored) const;

  std::string module_;
  RowTensor values_, scales_;
  std::vector<int32_t> zero_points_;  // rows x groups, unpacked (asymmetric only)
  float global_scale_ = 0.0f;         // weight_global_scale (NVFP4), else 0
  QuantParams params_;
  const WeightCodec* codec_ = nullptr;
  DType weight_dtype_ = DType::kBF16;  // the dtype the codec was given (of the scales, or BF16)
  DType scale_dtype_ = DType::kBF16;   // the stored scales' dtype
  DType out_dtype_ = DType::kBF16;
  int64_t rows_ = 0, cols_ = 0, groups_ = 0;
};

// Rows per block that keep a block of `cols` columns near 4 MiB, a multiple of `alignment`.
int64_t RowsPerBlock(int64_t cols, int64_t alignment);

}  // namespace spk
