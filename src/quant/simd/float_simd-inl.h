// Per-target Highway kernels of the fast byte-format quantizer (see float_simd.h for the contract).
// Included once per CPU target by float_simd.cc through hwy/foreach_target.h, hence the toggled
// include guard. Each kernel mirrors one scalar step of quant/float_rows.h or
// quant/float_formats.h (the comments name it); the conversions and dtype roundings are
// rtn_simd-inl.h's own helpers.
//
// Kernels work on caller-owned buffers, keep no state and are thread-safe. The row kernels return
// false when a weight is not finite or an MX scale overflows; the caller then asks the reference.

#if defined(SPK_QUANT_SIMD_FLOAT_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SPK_QUANT_SIMD_FLOAT_SIMD_INL_H_
#undef SPK_QUANT_SIMD_FLOAT_SIMD_INL_H_
#else
#define SPK_QUANT_SIMD_FLOAT_SIMD_INL_H_
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "hwy/highway.h"
#include "quant/float_formats.h"
#include "quant/float_rows.h"
#include "quant/rtn.h"
#include "tensor/dtype.h"
#include "tensor/float_convert.h"

// Only rtn_simd-inl.h's inline helpers (SymmetricRowFromStored, PackNibblePairs, and through it
// weights_simd-inl.h's loads, roundings, stored magnitudes and quotients) are used here;
// its exported entry points belong to rtn_simd.cc.
#define SPK_RTN_SIMD_HELPERS_ONLY
#include "quant/simd/rtn_simd-inl.h"
#undef SPK_RTN_SIMD_HELPERS_ONLY

HWY_BEFORE_NAMESPACE();
namespace spk {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using VI = hn::Vec<DI>;

// FloatToE4M3 on lanes that are not NaN, as int32 codes 0..255: round to nearest even on the bits
// (normals) or on the 2^-9 grid (subnormals), saturation to 0x7E (Inf included), the sign of zero
// kept.
HWY_INLINE VI NonNaNE4M3Codes(VF x) {
  const DF df;
  const DI di;
  const auto bits = hn::BitCast(di, x);
  const auto sign = hn::And(hn::ShiftRight<24>(bits), hn::Set(di, 0x80));
  const auto abs_bits = hn::And(bits, hn::Set(di, 0x7FFFFFFF));
  const VF a = hn::BitCast(df, abs_bits);
  const auto lsb = hn::And(hn::ShiftRight<20>(abs_bits), hn::Set(di, 1));
  // Round half to even at bit 20 and rebias the exponent in one add: (abs + 0x7FFFF + lsb) >> 20
  // minus (127 - 7) << 3 is (abs + 0x7FFFF + lsb - (960 << 20)) >> 20 (an arithmetic shift
  // floors either way). Past 448 (and Inf) the code saturates; below 2^-6 the subnormal grid wins.
  constexpr int32_t kRoundAndRebias = 0x7FFFF - (((127 - 7) << 3) << 20);
  const auto rounded =
      hn::ShiftRight<20>(hn::Add(abs_bits, hn::Add(hn::Set(di, kRoundAndRebias), lsb)));
  const auto normal = hn::Min(rounded, hn::Set(di, 0x7E));
  // Subnormals: a * 2^9 (exact, below 8 in the lanes that keep it) plus 2^23 makes the FPU round
  // it to an integer, half to even, which is then the low bits of the sum (cheaper than Round +
  // ConvertTo). The other lanes' sums are finite or Inf and are not selected.
  const VF magic = hn::Set(df, 0x1p23f);
  const VF grid = hn::Add(hn::Mul(a, hn::Set(df, 0x1p9f)), magic);
  const auto code = hn::IfThenElse(hn::RebindMask(di, hn::Lt(a, hn::Set(df, 0x1p-6f))),
                                   hn::Sub(hn::BitCast(di, grid), hn::BitCast(di, magic)), normal);
  return hn::Or(code, sign);
}

// FloatToE4M3 on lanes, as int32 codes 0..255: NaN (of either sign) to 0x7F.
HWY_INLINE VI E4M3Codes(VF x) {
  const DI di;
  return hn::IfThenElse(hn::RebindMask(di, hn::IsNaN(x)), hn::Set(di, 0x7F), NonNaNE4M3Codes(x));
}

// E4M3ToFloat(FloatToE4M3(a)) for lanes a in [0, 448]: the E4M3 value a rounds to.
HWY_INLINE VF RoundToE4M3Value(VF a) {
  const DF df;
  const DI di;
  const auto bits = hn::BitCast(di, a);
  const auto lsb = hn::And(hn::ShiftRight<20>(bits), hn::Set(di, 1));
  const auto normal = hn::And(hn::Add(bits, hn::Add(hn::Set(di, 0x7FFFF), lsb)),
                              hn::Set(di, static_cast<int32_t>(0xFFF00000u)));
  const VF grid = hn::Mul(hn::Round(hn::Mul(a, hn::Set(df, 0x1p9f))), hn::Set(df, 0x1p-9f));
  return hn::IfThenElse(hn::Lt(a, hn::Set(df, 0x1p-6f)), grid, hn::BitCast(df, normal));
}

// FloatToE2M1 on lanes, as int32 nibbles: 7 minus the thresholds |x| stays under (so NaN, under
// none, gives 7 as the reference's else branch does), bit 3 set for x < 0 (not for -0.0).
HWY_INLINE VI E2M1Codes(VF x) {
  const DF df;
  const DI di;
  const VF a = hn::Abs(x);
  auto index = hn::Set(di, 7);
  const auto down_if = [&](auto mask) {
    index = hn::Add(index, hn::VecFromMask(di, hn::RebindMask(di, mask)));
  };
  down_if(hn::Le(a, hn::Set(df, 5.0f)));
  down_if(hn::Lt(a, hn::Set(df, 3.5f)));
  down_if(hn::Le(a, hn::Set(df, 2.5f)));
  down_if(hn::Lt(a, hn::Set(df, 1.75f)));
  down_if(hn::Le(a, hn::Set(df, 1.25f)));
  down_if(hn::Lt(a, hn::Set(df, 0.75f)));
  down_if(hn::Le(a, hn::Set(df, 0.25f)));
  const auto negative = hn::RebindMask(di, hn::Lt(x, hn::Zero(df)));
  return hn::Or(index, hn::IfThenElseZero(negative, hn::Set(di, 8)));
}

// Stores the low byte of each int32 lane (codes 0..255): a byte shuffle, cheaper than the
// saturating DemoteTo, which the range makes unnecessary.
HWY_INLINE void StoreCodes(VI codes, uint8_t* out) {
  const hn::Rebind<uint8_t, DI> d8;
  hn::StoreU(hn::U8FromU32(hn::BitCast(DU(), codes)), d8, out);
}

// MxScaleExponent on lanes of group maxima (non-negative finite values of kType): the exponent
// field E of round_to_power_2's result (the mantissa rounded up from 0.75), then 127 + log2 -
// offset clamped to 0..255, 0 for a zero power and 255 for an infinite one.
template <DType kType>
HWY_INLINE VI MxExponentCodes(VF absmax, int32_t offset) {
  const DF df;
  const DI di;
  // The power of two's float32 exponent field; exact for BF16/F32 values (their rounding bit is
  // float32's bit 21) and for F16 normals (F16's bit 8 is float32's bit 21).
  auto e = hn::ShiftRight<23>(hn::Add(hn::BitCast(di, absmax), hn::Set(di, 1 << 21)));
  auto code = hn::Sub(e, hn::Set(di, offset));  // 127 + (E - 127) - offset
  auto zero = hn::Eq(e, hn::Zero(di));
  auto inf = hn::Eq(e, hn::Set(di, 255));
  if constexpr (kType == DType::kF16) {
    // F16 subnormals round to 2^-14 from 0.75 x 2^-14 up, else to 0; F16 overflows past 2^15.
    const auto e16 = hn::Sub(e, hn::Set(di, 112));
    const auto subnormal = hn::RebindMask(di, hn::Lt(absmax, hn::Set(df, 0x1p-14f)));
    const auto to_min = hn::RebindMask(di, hn::Ge(absmax, hn::Set(df, 0.75f * 0x1p-14f)));
    zero = hn::Or(hn::AndNot(to_min, subnormal), hn::Eq(e, hn::Zero(di)));
    code = hn::IfThenElse(subnormal, hn::Set(di, 1 + 112 - offset), code);
    inf = hn::AndNot(subnormal, hn::Gt(e16, hn::Set(di, 30)));
  }
  code = hn::Min(hn::Max(code, hn::Zero(di)), hn::Set(di, 255));
  return hn::IfThenElse(inf, hn::Set(di, 255), hn::IfThenZeroElse(zero, code));
}

// MxScaleValue and MxStoredExponent of lanes of exponents: 2^(e - 127) rounded to kType (1 where
// it underflows, stored as 127 then). Returns false when a scale overflows kType.
template <DType kType>
HWY_INLINE bool MxScaleValues(VI codes, VF* scales, VI* stored) {
  const DF df;
  const DI di;
  // 2^(e - 127): the exponent field e, or the float32 subnormal 2^-127 for e = 0; Inf for 255.
  const auto bits = hn::IfThenElse(hn::Eq(codes, hn::Zero(di)), hn::Set(di, 0x00400000),
                                   hn::ShiftLeft<23>(codes));
  const VF value = RoundTo<kType>(hn::BitCast(df, bits));
  const auto underflow = hn::Eq(value, hn::Zero(df));
  *scales = hn::IfThenElse(underflow, hn::Set(df, 1.0f), value);
  *stored = hn::IfThenElse(hn::RebindMask(di, underflow), hn::Set(di, 127), codes);
  return hn::AllFalse(df, hn::IsInf(value));
}

// The MX scales of n groups from their maxima; the tail runs the reference.
template <DType kType>
HWY_INLINE bool MxScales(int element_bits, const float* absmax, size_t n, float* scales,
                         uint8_t* stored) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const int32_t offset = element_bits == 4 ? 2 : 8;  // floor(log2(element max))
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    VF s;
    VI e;
    if (!MxScaleValues<kType>(MxExponentCodes<kType>(hn::LoadU(df, absmax + i), offset), &s, &e)) {
      return false;
    }
    hn::StoreU(s, df, scales + i);
    StoreCodes(e, stored + i);
  }
  for (; i < n; ++i) {
    scales[i] = MxScaleValue(MxScaleExponent(absmax[i], kType, element_bits), kType);
    if (!std::isfinite(scales[i])) return false;
    stored[i] = MxStoredExponent(scales[i]);
  }
  return true;
}

// NvGroupDivisor for n groups: E4M3 scales under the global scale `gs` (finite, positive) and the
// divisors s / gs of their values; the tail runs the reference.
template <DType kType>
HWY_INLINE void NvDivisors(float gs, const float* absmax, size_t n, float* divisors,
                           uint8_t* stored) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const VF six = hn::Set(df, RoundToDType(kFp4E2M1Max, kType));
  const VF vgs = hn::Set(df, gs);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const VF local = RoundTo<kType>(hn::Div(hn::LoadU(df, absmax + i), six));
    // local >= 0 and gs > 0: only the upper clamp can bite (Inf included).
    const VF scaled = hn::Min(hn::Mul(vgs, local), hn::Set(df, kFp8E4M3Max));
    VF scale = RoundToE4M3Value(scaled);
    scale = hn::IfThenElse(hn::Eq(scale, hn::Zero(df)), hn::Set(df, kFp8E4M3Eps), scale);
    StoreCodes(E4M3Codes(scale), stored + i);
    hn::StoreU(hn::Div(scale, vgs), df, divisors + i);
  }
  for (; i < n; ++i) divisors[i] = NvGroupDivisor(absmax[i], kType, gs, stored + i);
}

// One group of E4M3 values, cast(clamp(R(w / scale), +-448)), of n stored kType weights converted
// in registers. REQUIRES: finite weights, a positive scale, and kBy's condition on the scale.
template <DType kType, QuotientBy kBy>
HWY_INLINE void E4M3Group(const uint8_t* w, size_t n, float scale, uint8_t* out) {
  const DF df;
  const size_t lanes = hn::Lanes(df), elem = DTypeBits(kType) / 8;
  const Quotient<kBy> quotient(scale);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    // No clamp to +-448 first: the codes saturate to the same code (+-Inf included), and the
    // quotient of a finite weight by a positive scale is never NaN.
    const VF x = quotient(LoadAsFloat<kType>(w + i * elem));
    StoreCodes(NonNaNE4M3Codes(RoundNonNaNTo<kType>(x)), out + i);
  }
  for (; i < n; ++i) {
    float x;
    spk::ConvertToFloat(kType, w + i * elem, &x, 1);
    out[i] = QuantizeToE4M3(x, scale, kType);
  }
}

// One group of E2M1 nibbles (one per byte): NVFP4 divides in float32 (w / divisor), MXFP4 rounds
// the quotient to kType first (and its divisor is a power of two).
template <DType kType, bool kMx>
HWY_INLINE void E2M1Group(const float* w, size_t n, float divisor, uint8_t* out) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const Quotient<kMx ? QuotientBy::kPowerOfTwo : QuotientBy::kDivide> quotient(divisor);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    VF x = quotient(hn::LoadU(df, w + i));
    if constexpr (kMx) x = RoundNonNaNTo<kType>(x);
    StoreCodes(E2M1Codes(x), out + i);
  }
  for (; i < n; ++i) {
    out[i] = kMx ? QuantizeMxToE2M1(w[i], divisor, kType) : FloatToE2M1(w[i] / divisor);
  }
}

// Two nibbles per byte, the even one low (pack_fp4_to_uint8).
HWY_INLINE void PackNibbles(const uint8_t* nibbles, size_t n, uint8_t* out) {
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR  // one-lane vectors cannot pair bytes
  const hn::ScalableTag<uint8_t> d8;
  const size_t lanes = hn::Lanes(d8);
  const hn::Rebind<uint8_t, hn::Repartition<int16_t, decltype(d8)>> d8_half;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(PackNibblePairs(hn::LoadU(d8, nibbles + i)), d8_half, out + i / 2);
  }
#endif
  for (; i < n; i += 2) out[i / 2] = static_cast<uint8_t>(nibbles[i] | (nibbles[i + 1] << 4));
}

// float-quantized, mxfp8-quantized (E4M3 values) and int-quantized (I8) rows. The scales of an
// FP8 block see all rows of its band of block_rows rows, so a band is converted twice: once for
// its group maxima, once to quantize (cheaper than holding block_rows float rows).
template <DType kType>
HWY_INLINE bool UnpackedRowsTyped(const ByteRowsLayout& l, const QuantParams& p,
                                  const uint8_t* weight, int64_t rows, int64_t cols,
                                  const ByteRowsOutput& out) {
  const size_t width = static_cast<size_t>(ByteGroupWidth(p, cols));
  const size_t groups = static_cast<size_t>(ByteGroups(p, cols));
  const size_t n = static_cast<size_t>(cols), elem = DTypeBits(kType) / 8;
  const size_t scale_bytes = l.format == ByteFormat::kMxfp8 ? 1 : elem;
  std::vector<float> absmax(groups), mins(groups), maxs(groups), scales(groups);
  std::vector<int32_t> zero_points(groups);
  const auto group_width = [&](size_t j) { return std::min(width, n - j * width); };
  const auto stored = [&](int64_t r, size_t j) {
    return weight + (static_cast<size_t>(r) * n + j * width) * elem;
  };
  for (int64_t r0 = 0; r0 < rows; r0 += l.block_rows) {
    const int64_t band = std::min(l.block_rows, rows - r0);
    uint8_t* scale_row = out.scales + static_cast<size_t>(r0 / l.block_rows) * groups * scale_bytes;
    if (l.format == ByteFormat::kInt) {  // symmetric, block_rows 1: rtn_simd's row from the bits
      if (!SymmetricRowFromStored<kType>(p, stored(r0, 0), width, groups, mins.data(), maxs.data(),
                                         scales.data(), zero_points.data(),
                                         reinterpret_cast<int8_t*>(out.values + r0 * cols))) {
        return false;
      }
      spk::ConvertFromFloat(kType, scales.data(), scale_row, groups);
      continue;
    }
    // E4M3 values: maxima and codes straight from the stored weights (no float row).
    std::fill(absmax.begin(), absmax.end(), 0.0f);
    for (int64_t r = r0; r < r0 + band; ++r) {
      for (size_t j = 0; j < groups; ++j) {
        const auto m = MaxStoredMagnitude<kType, false>(stored(r, j), group_width(j));
        if (m >= StoredBits<kType>::kInf) return false;
        absmax[j] = std::max(absmax[j], StoredBits<kType>::ToFloat(m));
      }
    }
    if (l.format == ByteFormat::kMxfp8) {
      if (!MxScales<kType>(8, absmax.data(), groups, scales.data(), scale_row)) return false;
    } else {
      for (size_t j = 0; j < groups; ++j) scales[j] = Fp8Scale(absmax[j], kType);
      spk::ConvertFromFloat(kType, scales.data(), scale_row, groups);
    }
    for (int64_t r = r0; r < r0 + band; ++r) {
      for (size_t j = 0; j < groups; ++j) {
        uint8_t* codes = out.values + r * cols + j * width;
        if (l.format == ByteFormat::kMxfp8) {
          E4M3Group<kType, QuotientBy::kPowerOfTwo>(stored(r, j), group_width(j), scales[j], codes);
        } else {
          E4M3Group<kType, QuotientBy::kDivide>(stored(r, j), group_width(j), scales[j], codes);
        }
      }
    }
  }
  return true;
}

// nvfp4- and mxfp4-pack-quantized rows: group maxima, the scales of the whole row at once, then
// nibbles packed two per byte.
template <DType kType>
HWY_INLINE bool Fp4RowsTyped(ByteFormat f, const QuantParams& p, const uint8_t* weight,
                             int64_t rows, int64_t cols, float global_scale,
                             const ByteRowsOutput& out) {
  const size_t g = static_cast<size_t>(p.group_size), n = static_cast<size_t>(cols);
  const size_t groups = n / g, elem = DTypeBits(kType) / 8;
  std::vector<float> row(n), absmax(groups), divisors(groups);
  std::vector<uint8_t> nibbles(n);
  for (int64_t r = 0; r < rows; ++r) {
    ToFloat<kType>(weight + static_cast<size_t>(r) * n * elem, row.data(), n);
    for (size_t j = 0; j < groups; ++j) {
      const auto m =
          MaxStoredMagnitude<kType, false>(weight + (static_cast<size_t>(r) * n + j * g) * elem, g);
      if (m >= StoredBits<kType>::kInf) return false;
      absmax[j] = StoredBits<kType>::ToFloat(m);
    }
    uint8_t* scales = out.scales + static_cast<size_t>(r) * groups;
    if (f == ByteFormat::kNvfp4) {
      NvDivisors<kType>(global_scale, absmax.data(), groups, divisors.data(), scales);
      for (size_t j = 0; j < groups; ++j) {
        E2M1Group<kType, false>(row.data() + j * g, g, divisors[j], nibbles.data() + j * g);
      }
    } else {
      if (!MxScales<kType>(4, absmax.data(), groups, divisors.data(), scales)) return false;
      for (size_t j = 0; j < groups; ++j) {
        E2M1Group<kType, true>(row.data() + j * g, g, divisors[j], nibbles.data() + j * g);
      }
    }
    PackNibbles(nibbles.data(), n, out.values + static_cast<size_t>(r) * (n / 2));
  }
  return true;
}

template <DType kType>
HWY_INLINE bool ByteRowsTyped(const ByteRowsLayout& l, const QuantParams& p, const uint8_t* weight,
                              int64_t rows, int64_t cols, float global_scale,
                              const ByteRowsOutput& out) {
  if (IsFp4(l.format))
    return Fp4RowsTyped<kType>(l.format, p, weight, rows, cols, global_scale, out);
  return UnpackedRowsTyped<kType>(l, p, weight, rows, cols, out);
}

// ---- The per-target entry points exported to float_simd.cc (identical signatures on every
// target).

bool ByteRowsKernel(const ByteRowsLayout& l, const QuantParams& p, DType dtype,
                    const uint8_t* weight, int64_t rows, int64_t cols, float global_scale,
                    const ByteRowsOutput& out) {
  return WithDType(dtype, [&]<DType kType>() {
    return ByteRowsTyped<kType>(l, p, weight, rows, cols, global_scale, out);
  });
}

float AbsMaxKernel(DType dtype, const uint8_t* values, size_t n) {
  return WithDType(dtype, [&]<DType kType>() {
    return StoredBits<kType>::ToFloat(MaxStoredMagnitude<kType, true>(values, n));
  });
}

// The codes of n floats: vector_codes on whole vectors, the reference scalar_code on the tail.
template <class VectorCodes, class ScalarCode>
HWY_INLINE void FloatCodes(const float* x, size_t n, uint8_t* out, VectorCodes vector_codes,
                           ScalarCode scalar_code) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) StoreCodes(vector_codes(hn::LoadU(df, x + i)), out + i);
  for (; i < n; ++i) out[i] = scalar_code(x[i]);
}

void E4M3CodesKernel(const float* x, size_t n, uint8_t* out) {
  FloatCodes(
      x, n, out, [](VF v) { return E4M3Codes(v); }, FloatToE4M3);
}

void E2M1CodesKernel(const float* x, size_t n, uint8_t* out) {
  FloatCodes(
      x, n, out, [](VF v) { return E2M1Codes(v); }, FloatToE2M1);
}

bool MxScalesKernel(DType dtype, int element_bits, const float* absmax, size_t n, float* scales,
                    uint8_t* stored) {
  return WithDType(dtype, [&]<DType kType>() {
    return MxScales<kType>(element_bits, absmax, n, scales, stored);
  });
}

void NvDivisorsKernel(DType dtype, float global_scale, const float* absmax, size_t n,
                      float* divisors, uint8_t* stored) {
  return WithDType(dtype, [&]<DType kType>() {
    return NvDivisors<kType>(global_scale, absmax, n, divisors, stored);
  });
}

const char* FloatTargetNameKernel() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace spk
HWY_AFTER_NAMESPACE();

#endif  // include guard
