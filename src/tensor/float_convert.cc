#include "tensor/float_convert.h"

#include <bit>
#include <cassert>
#include <cstring>

#include "base/endian.h"

namespace spk {
namespace {

// Rounds `value >> shift` to nearest, ties to even, looking at the bits shifted out.
// REQUIRES: 1 <= shift <= 31.
uint32_t ShiftRightRoundEven(uint32_t value, unsigned shift) {
  const uint32_t kept = value >> shift;
  const uint32_t dropped = value & ((uint32_t{1} << shift) - 1);
  const uint32_t half = uint32_t{1} << (shift - 1);
  const bool round_up = dropped > half || (dropped == half && (kept & 1) != 0);
  return kept + (round_up ? 1 : 0);
}

}  // namespace

float F16ToFloat(uint16_t bits) {
  const uint32_t sign = uint32_t{bits & 0x8000u} << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t FloatToF16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u;  // NaN stays a (quiet) NaN.
  // 65520 = 65504 + half an ulp: from there on the value rounds (ties to even) to Inf.
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;
  const uint32_t exponent = magnitude >> 23;  // biased float32 exponent
  if (exponent < 113) {
    // Below 2^-14 the result is an F16 subnormal: round(value / 2^-24). Values under 2^-25 round to
    // 0.
    if (exponent < 102) return sign;
    const uint32_t significand =
        (magnitude & 0x7FFFFFu) | 0x800000u;  // value = significand*2^(e-150)
    // A carry out of the subnormal range yields 0x0400, the smallest normal: still correct.
    return sign | static_cast<uint16_t>(ShiftRightRoundEven(significand, 126 - exponent));
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa from 23 to 10 bits; a carry from
  // the mantissa into the exponent is the correct next binade.
  const uint32_t rebased = ((exponent - 112u) << 23) | (magnitude & 0x7FFFFFu);
  return sign | static_cast<uint16_t>(ShiftRightRoundEven(rebased, 13));
}

void ConvertToFloat(DType src, const uint8_t* src_bytes, float* out, size_t n) {
  assert(IsQuantizableFloat(src));
  switch (src) {
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) out[i] = BF16ToFloat(LoadLE16(src_bytes + 2 * i));
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) out[i] = F16ToFloat(LoadLE16(src_bytes + 2 * i));
      return;
    default:  // F32
      if (n != 0) std::memcpy(out, src_bytes, n * sizeof(float));
      return;
  }
}

void ConvertFromFloat(DType dst, const float* in, uint8_t* out, size_t n) {
  assert(IsQuantizableFloat(dst));
  switch (dst) {
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) StoreLE16(out + 2 * i, FloatToBF16(in[i]));
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) StoreLE16(out + 2 * i, FloatToF16(in[i]));
      return;
    default:  // F32
      if (n != 0) std::memcpy(out, in, n * sizeof(float));
      return;
  }
}

}  // namespace spk
