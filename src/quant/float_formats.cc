#include "quant/float_formats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "tensor/float_convert.h"

namespace spk {
namespace {

// The mantissa bits of a quantizable dtype, for round_to_power_2.
int MantissaBits(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return 7;
    case DType::kF16:
      return 10;
    default:
      return 23;
  }
}

// round_to_power_2 (mxfp_utils.py) of a non-negative value of `dtype`: on the dtype's bits, add
// 1 << (mantissa - 2) (a quarter of the leading binade) and keep sign and exponent. Returns the
// power of two as float32 (0 for values below the smallest normal's rounding, +Inf on overflow).
float RoundToPowerOfTwo(float x, DType dtype) {
  const int m = MantissaBits(dtype);
  switch (dtype) {
    case DType::kBF16: {
      const uint32_t bits = FloatToBF16(x);
      return BF16ToFloat(static_cast<uint16_t>((bits + (1u << (m - 2))) & 0xFF80u));
    }
    case DType::kF16: {
      const uint32_t bits = FloatToF16(x);
      return F16ToFloat(static_cast<uint16_t>((bits + (1u << (m - 2))) & 0xFC00u));
    }
    default: {
      const uint32_t bits = std::bit_cast<uint32_t>(x);
      return std::bit_cast<float>((bits + (1u << (m - 2))) & 0xFF800000u);
    }
  }
}

// floor(log2(element max)): 2 for E2M1 (max 6), 8 for E4M3 (max 448).
int MxElementOffset(int element_bits) { return element_bits == 4 ? 2 : 8; }

}  // namespace

uint8_t FloatToE4M3(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  if (std::isnan(x)) return 0x7F;
  const float a = std::fabs(x);
  if (a >= kFp8E4M3Max) return sign | 0x7E;
  if (a < 0x1p-6f) {
    // Subnormal range: multiples of 2^-9; the scaling is exact, nearbyint rounds half to even.
    // 8 * 2^-9 = 2^-6 is the smallest normal, whose code is 0x08: the same integer.
    return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9f));
  }
  // Normal: keep 3 of float32's 23 mantissa bits, round to nearest even (a carry into the
  // exponent is the correct result), then rebias the exponent from 127 to 7.
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  const uint32_t rounded = (abs_bits + 0x7FFFFu + ((abs_bits >> 20) & 1u)) >> 20;
  const uint32_t code = rounded - ((127u - 7u) << 3);
  return sign | static_cast<uint8_t>(code > 0x7Eu ? 0x7Eu : code);
}

float E4M3ToFloat(uint8_t bits) {
  const float sign = (bits & 0x80) ? -1.0f : 1.0f;
  const int exponent = (bits >> 3) & 0xF;
  const int mantissa = bits & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
}

uint8_t FloatToE2M1(float x) {
  const float a = std::fabs(x);
  uint8_t index;
  if (a <= 0.25f) {
    index = 0;
  } else if (a < 0.75f) {
    index = 1;
  } else if (a <= 1.25f) {
    index = 2;
  } else if (a < 1.75f) {
    index = 3;
  } else if (a <= 2.5f) {
    index = 4;
  } else if (a < 3.5f) {
    index = 5;
  } else if (a <= 5.0f) {
    index = 6;
  } else {
    index = 7;
  }
  // torch.sign(x) * rounded: -0.0 has sign 0 (a +0 result); any other negative keeps its sign,
  // also when it rounds to 0.
  const bool negative = x < 0.0f;
  return static_cast<uint8_t>(index | (negative ? 0x8 : 0));
}

float E2M1ToFloat(uint8_t nibble) {
  static constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = kValues[nibble & 0x7];
  return (nibble & 0x8) ? -v : v;
}

uint8_t MxScaleExponent(float absmax, DType dtype, int element_bits) {
  const float p2 = RoundToPowerOfTwo(absmax, dtype);
  if (p2 == 0.0f) return 0;                                  // log2(0) = -inf, clamped to 0
  if (std::isinf(p2)) return 255;                            // +inf, clamped to 255
  const int e = std::ilogb(p2);                              // exact: p2 is a power of two
  const int code = 127 + e - MxElementOffset(element_bits);  // small integers: exact in any dtype
  return static_cast<uint8_t>(code < 0 ? 0 : (code > 255 ? 255 : code));
}

float MxScaleValue(uint8_t exponent, DType dtype) {
  const float scale = RoundToDType(std::ldexp(1.0f, int{exponent} - 127), dtype);
  return scale == 0.0f ? 1.0f : scale;
}

uint8_t MxStoredExponent(float scale) { return static_cast<uint8_t>(127 + std::ilogb(scale)); }

float MxDecompressedScale(uint8_t exponent) {
  return RoundToDType(std::ldexp(1.0f, int{exponent} - 127), DType::kBF16);
}

float AbsMaxOf(DType dtype, const uint8_t* values, size_t n) {
  constexpr size_t kChunk = 1024;
  float buf[kChunk];
  float absmax = 0.0f;
  for (size_t i = 0; i < n; i += kChunk) {
    const size_t m = std::min(kChunk, n - i);
    ConvertToFloat(dtype, values + i * (DTypeBits(dtype) / 8), buf, m);
    for (size_t k = 0; k < m; ++k) {
      const float a = std::fabs(buf[k]);
      absmax = a > absmax ? a : absmax;  // false for NaN: skipped
    }
  }
  return absmax;
}

float NvFp4GlobalScale(float absmax, DType dtype) {
  const float tiny = dtype == DType::kF16 ? 0x1p-14f : 0x1p-126f;  // torch.finfo(dtype).tiny
  const float clamped = absmax < tiny ? tiny : absmax;
  // `2688.0 / tensor` is Tensor.__rtruediv__, which torch evaluates as reciprocal(t) * 2688: two
  // roundings to the dtype, not one division.
  const float reciprocal = RoundToDType(1.0f / clamped, dtype);
  const float scale = RoundToDType(reciprocal * (kFp8E4M3Max * kFp4E2M1Max), dtype);
  return std::isfinite(scale) ? scale : 1.0f;
}

}  // namespace spk
