// The scalar reference row quantizers of the formats that store one byte or one nibble per weight:
// float-quantized (FP8 E4M3 per channel or per 128 x 128 block), int-quantized (I8 values per
// channel or group), mxfp8-quantized, and the packed FP4 formats nvfp4- and mxfp4-pack-quantized.
// Each copies compressed-tensors 0.19's arithmetic step for step (the formulas are in the codec
// headers quant/float_quantized.h and quant/fp4_packed.h; the small-float conversions in
// quant/float_formats.h). These are what the SIMD kernels (quant/simd/float_simd.h) are tested
// against, bit for bit: keep them plain. The per-element and per-group steps are inline here so
// that the kernels' scalar tails run the very same code.
//
// Kernel vocabulary (below quant/scheme.h): knows no scheme names or checkpoints. Buffers are
// caller-owned; thread-safe for distinct outputs. Errors: InvalidInput naming the row (relative to
// the block) and column of a NaN/Inf weight, or the group whose MX scale overflows the dtype; the
// caller adds the file and tensor. On error the outputs are partly written.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "base/status.h"
#include "quant/float_formats.h"
#include "quant/params.h"
#include "quant/rtn.h"
#include "tensor/dtype.h"
#include "tensor/float_convert.h"

namespace spk {

// What one weight byte (or nibble) holds and how its group scale is derived.
enum class ByteFormat {
  kFp8,    // E4M3 values, scale R(absmax / 448) in the weight dtype
  kInt,    // I8 values, quant/rtn.h's ComputeGroupScale in the weight dtype
  kMxfp8,  // E4M3 values, E8M0 exponent per group
  kNvfp4,  // E2M1 nibbles, E4M3 scale per group under a per-tensor global scale
  kMxfp4,  // E2M1 nibbles, E8M0 exponent per group
};

struct ByteRowsLayout {
  ByteFormat format;
  int64_t block_rows = 1;  // rows one scale covers: 128 for FP8 blocks, 1 otherwise
};

// Where a row block goes: `values` holds rows x cols bytes (rows x cols/2 for the FP4 formats, the
// even column in the low nibble); `scales` holds ceil(rows / block_rows) x groups scales, each
// in the weight dtype (kFp8, kInt) or one byte (E8M0, or E4M3 for kNvfp4).
struct ByteRowsOutput {
  uint8_t* values = nullptr;
  uint8_t* scales = nullptr;
};

// True for the formats that pack two E2M1 nibbles per byte.
inline bool IsFp4(ByteFormat f) { return f == ByteFormat::kNvfp4 || f == ByteFormat::kMxfp4; }

// Quantizes `rows` rows of a row-major `cols`-column weight stored little-endian in `dtype`.
// `global_scale` is the tensor's NVFP4 weight_global_scale (ignored by the other formats).
// REQUIRES: the codec's Validate passed (IsQuantizableFloat(dtype), ValidateParams(p), groups that
// divide `cols` unless blocks may be partial); rows a multiple of block_rows unless this block
// ends the tensor.
Status QuantizeByteRows(const ByteRowsLayout& layout, const QuantParams& p, DType dtype,
                        const uint8_t* weight, int64_t rows, int64_t cols, float global_scale,
                        const ByteRowsOutput& out);

// Ok when every value of `row` (row `r` of a block) is finite; otherwise InvalidInput naming the
// row and column, worded as the int kernels word it (quant/rtn.h).
Status RequireFiniteRow(std::span<const float> row, int64_t r);

// InvalidInput for the group of row `r` at columns [c0, c0 + width) whose MX scale overflows
// `dtype`.
Status MxScaleOverflow(int64_t r, int64_t c0, int64_t width, float absmax, DType dtype);

// ---- The per-element and per-group steps, shared by the reference and the SIMD tails.

// Columns one scale covers, and scales per row (partial last group allowed).
inline int64_t ByteGroupWidth(const QuantParams& p, int64_t cols) {
  return p.group_size == kChannelWise ? cols : p.group_size;
}
inline int64_t ByteGroups(const QuantParams& p, int64_t cols) {
  const int64_t w = ByteGroupWidth(p, cols);
  return (cols + w - 1) / w;
}

// FP8 per-channel/block scale (calculate_qparams): R(absmax / 448) in the dtype, eps for 0.
inline float Fp8Scale(float absmax, DType dtype) {
  const float scale = RoundToDType(absmax / kFp8E4M3Max, dtype);
  return scale == 0.0f ? DTypeEps(dtype) : scale;
}

// One E4M3 value: cast(clamp(R(w / scale), +-448)).
inline uint8_t QuantizeToE4M3(float w, float scale, DType dtype) {
  return FloatToE4M3(std::clamp(RoundToDType(w / scale, dtype), -kFp8E4M3Max, kFp8E4M3Max));
}

// The NVFP4 group scale (calculate_qparams with the global scale): s = E4M3(clamp(gs * R(absmax /
// 6), +-448)), 0.125 for 0, stored as its E4M3 byte; returns the divisor of the values, s / gs.
inline float NvGroupDivisor(float absmax, DType dtype, float global_scale, uint8_t* stored) {
  const float local = RoundToDType(absmax / RoundToDType(kFp4E2M1Max, dtype), dtype);
  const float scaled = std::clamp(global_scale * local, -kFp8E4M3Max, kFp8E4M3Max);
  float scale = E4M3ToFloat(FloatToE4M3(scaled));
  if (scale == 0.0f) scale = kFp8E4M3Eps;
  *stored = FloatToE4M3(scale);
  return scale / global_scale;
}

// One MXFP4 nibble: E2M1(R(w / scale)) with the scale in the dtype.
inline uint8_t QuantizeMxToE2M1(float w, float scale, DType dtype) {
  return FloatToE2M1(RoundToDType(w / scale, dtype));
}

}  // namespace spk
