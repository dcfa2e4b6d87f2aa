// The scalar reference quantizer: min-max round-to-nearest (RTN) into compressed-tensors'
// `pack-quantized` layout, bit-exact with compressed-tensors 0.20 on CPU (calculate_qparams on the
// per-group min/max as llm-compressor's "minmax" observer feeds it, then forward.py's quantize and
// pack_to_int32; DequantizeRows matches the compressor's decompress).
//
// The arithmetic copies torch's evaluation in the weight dtype: every step is computed in float32
// and rounded to the dtype (RoundToDType), in the reference's order:
//   mn = min(0, min w), mx = max(0, max w)
//   symmetric:  s = R(max(|mn|, |mx|) / R(R(qmax - qmin) / 2)),  zp = 0
//   asymmetric: s = R(R(mx - mn) / R(qmax - qmin)),  zp = RNE(clamp(R(qmin - R(mn / s)), qmin,
//   qmax))
//               (zp is computed before the eps fix below; 0/0 = NaN becomes zp 0, as torch's cast
//               does)
//   s == 0  ->  s = eps of the dtype (BF16 2^-7, F16 2^-10, F32 2^-23)
//   q = RNE(clamp(R(R(w / s) + zp), qmin, qmax))        (clamp first, then round half to even)
//   dequantized w' = R(R(q - zp) * s)
// These are the kernels the SIMD code (quant/simd/) is tested against: keep them plain.
//
// Buffers are caller-owned; nothing is retained. All functions are thread-safe for distinct
// outputs. Errors: bad data (NaN/Inf weights, a scale that overflows the dtype) is InvalidInput
// naming the row and column; the caller adds the tensor name. Null or undersized buffers are caller
// bugs (asserts).
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "quant/params.h"
#include "tensor/dtype.h"

namespace spk {

// The scale and zero point of one group. `scale` is exactly representable in the weight dtype;
// `zero_point` is 0 for symmetric schemes and in [QMin(bits), QMax(bits)] otherwise.
struct GroupQuantParams {
  float scale = 0.0f;
  int32_t zero_point = 0;
};

// torch.finfo(dtype).eps of BF16, F16 or F32: the scale that replaces 0 so that all-zero groups do
// not divide by zero.
float DTypeEps(DType dtype);

// Smallest and largest value of a group (exact; no clamping to include 0).
struct GroupRange {
  float min = 0.0f;
  float max = 0.0f;
};
// REQUIRES: values is non-empty and holds no NaN.
GroupRange GroupMinMax(std::span<const float> values);

// The min-max scale and zero point of a group whose observed range is `range`, computed in `dtype`
// exactly as compressed-tensors' calculate_qparams does. The scale may be +Inf when the group's
// range overflows F16 (callers reject that). REQUIRES: IsQuantizableFloat(dtype),
// ValidateParams(p).ok().
GroupQuantParams ComputeGroupScale(const QuantParams& p, DType dtype, GroupRange range);

// Quantizes `w` (values of `dtype`, as float32) with a given scale and zero point:
// q[i] = RNE(clamp(R(R(w[i] / scale) + zero_point), qmin, qmax)). Scale searches reuse this step.
// REQUIRES: q.size() == w.size(), scale > 0.
void QuantizeGroupWithScale(const QuantParams& p, DType dtype, std::span<const float> w,
                            GroupQuantParams gq, std::span<int8_t> q);

// The dequantized values of a group, as float32 values of `dtype`: out[i] = R(R(q[i] - zp) *
// scale). REQUIRES: out.size() == q.size().
void DequantizeGroup(DType dtype, std::span<const int8_t> q, GroupQuantParams gq,
                     std::span<float> out);

// Where QuantizeRowsRtn writes a block of `rows` rows; every array is row-major with `rows` rows.
struct RowBlockQuantOutput {
  int32_t* packed = nullptr;       // rows x PackedWords(cols, bits) words
  uint8_t* scales = nullptr;       // rows x groups scales, little-endian in the weight dtype
  int32_t* zero_points = nullptr;  // rows x groups, UNPACKED; nullptr for symmetric schemes
};

// Quantizes `rows` rows of a row-major weight of `cols` columns stored little-endian in `dtype`
// (BF16, F16 or F32). Rows are independent, so a tensor may be split into row blocks and the blocks
// quantized in any order or in parallel. When the params are asymmetric, out.zero_points must be
// set; pack it with PackZeroPoints once all rows of the tensor are done (zero points pack across
// rows). Errors: InvalidInput for an unsupported dtype, bits or group size that does not divide
// `cols`, a NaN/Inf weight ("row R column C ...", row relative to this block), or a scale that
// overflows the dtype. On error the outputs are partly written.
Status QuantizeRowsRtn(const QuantParams& p, DType dtype, const uint8_t* weight, int64_t rows,
                       int64_t cols, const RowBlockQuantOutput& out);

// Dequantizes a block of rows back to the weight dtype (little-endian), exactly as
// compressed-tensors' PackedQuantizationCompressor.decompress does. zero_points is the UNPACKED
// rows x groups array, or nullptr for symmetric schemes (zero point 0). Errors: InvalidInput for an
// unsupported dtype, bits or group size, or a packed value/zero point outside the range (cannot
// happen for our own output).
Status DequantizeRows(const QuantParams& p, DType dtype, const int32_t* packed,
                      const uint8_t* scales, const int32_t* zero_points, int64_t rows, int64_t cols,
                      uint8_t* out);

// Packing, as compressed-tensors' pack_to_int32 (works for 1..8 bits; sparkulator writes 2..8):
// value k is stored as the unsigned u = q + 2^(bits-1) at bit k*bits of the little-endian bit
// stream of int32 words (lowest bits first; a value may straddle two words; unused high bits are
// 0). Worked vector: q = [-8,-1,0,1,7,3,-3,2] at 4 bits packs to the word 0xA5BF9870. REQUIRES:
// words.size() == PackedWords(q.size(), bits); every q in [QMin(bits), QMax(bits)].
void PackRow(int bits, std::span<const int8_t> q, std::span<int32_t> words);
// The inverse of PackRow. REQUIRES: words.size() == PackedWords(q.size(), bits).
void UnpackRow(int bits, std::span<const int32_t> words, std::span<int8_t> q);

// Packs an unpacked rows x groups zero-point array along dim 0 (the rows), as compressed-tensors'
// pack_to_int32(zero_point, bits, packed_dim=0): zp[n][j] goes to word [n*bits/32][j] at bit offset
// (n*bits)%32, with the same +2^(bits-1) offset. packed_out holds PackedWords(rows, bits) x groups.
void PackZeroPoints(int bits, const int32_t* zero_points, int64_t rows, int64_t groups,
                    int32_t* packed_out);
// The inverse of PackZeroPoints: zero_points_out holds rows x groups values.
void UnpackZeroPoints(int bits, const int32_t* packed, int64_t rows, int64_t groups,
                      int32_t* zero_points_out);

}  // namespace spk
