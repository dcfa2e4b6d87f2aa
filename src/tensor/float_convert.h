// Conversions between float32 and the 16-bit float formats sparkulator quantizes from (BF16, F16),
// rounding exactly like torch's `.to(dtype)` on CPU: round to nearest, ties to even, with
// subnormals kept (no flush-to-zero) and overflow to infinity.
//
// The quantizer's reference arithmetic (quant/rtn.h) computes every step in float32 and rounds the
// result to the weight dtype with RoundToDType; that is how torch evaluates BF16/F16 tensor ops on
// CPU. Pure functions over values and caller-owned buffers: thread-safe. Preconditions are asserts.
#pragma once

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace spk {

// BF16 bits -> float32 (exact). Inline, like FloatToBF16 and RoundToDType: the search calls them
// per candidate scale of every group.
inline float BF16ToFloat(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

// float32 -> BF16 bits, round to nearest even. NaN becomes the quiet NaN 0x7FC0 (torch's scalar
// path); +-Inf stays +-Inf; values past the largest BF16 round to +-Inf.
inline uint16_t FloatToBF16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;  // NaN: must not round into Inf.
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest even; a carry into the exponent is the
  // correct result (including overflow to Inf).
  const uint32_t rounding_bias = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

// F16 (IEEE binary16) bits -> float32 (exact, subnormals included).
float F16ToFloat(uint16_t bits);
// float32 -> F16 bits, round to nearest even with correct subnormals; values that round past 65504
// become +-Inf; NaN becomes a quiet NaN (0x7E00 with the input's sign).
uint16_t FloatToF16(float value);

// Rounds x to the nearest value representable in `dtype` and returns it as float32:
// BF16/F16 convert and back, F32 is the identity. REQUIRES: IsQuantizableFloat(dtype).
inline float RoundToDType(float x, DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return BF16ToFloat(FloatToBF16(x));
    case DType::kF16:
      return F16ToFloat(FloatToF16(x));
    case DType::kF32:
      return x;
    default:
      assert(false && "RoundToDType needs BF16, F16 or F32");
      return x;
  }
}

// Decodes n little-endian elements of `src` (BF16, F16 or F32) into float32 (exact).
// REQUIRES: IsQuantizableFloat(src); src_bytes holds n * DTypeBits(src) / 8 bytes.
void ConvertToFloat(DType src, const uint8_t* src_bytes, float* out, size_t n);
// Encodes n floats as little-endian `dst` elements, rounding to nearest even.
// REQUIRES: IsQuantizableFloat(dst); out holds n * DTypeBits(dst) / 8 bytes.
void ConvertFromFloat(DType dst, const float* in, uint8_t* out, size_t n);

}  // namespace spk
