// Per-target Highway helpers shared by the quantizer kernels (rtn_simd-inl.h, float_simd-inl.h,
// search_simd-inl.h): loading stored BF16/F16/F32 weights as float lanes, rounding lanes to a
// weight dtype as the reference does, the largest stored magnitude of a run of weights, and the
// quotient of weights by a scale (division, or a cheaper multiply where that is exact). Included
// once per CPU target through the kernels' own -inl.h files, hence the toggled include guard.
//
// Everything here is inline, stateless and thread-safe, and reports no errors: callers check
// finiteness where a helper says it requires it.

#if defined(SPK_QUANT_SIMD_WEIGHTS_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SPK_QUANT_SIMD_WEIGHTS_SIMD_INL_H_
#undef SPK_QUANT_SIMD_WEIGHTS_SIMD_INL_H_
#else
#define SPK_QUANT_SIMD_WEIGHTS_SIMD_INL_H_
#endif

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hwy/highway.h"
#include "tensor/dtype.h"
#include "tensor/float_convert.h"

HWY_BEFORE_NAMESPACE();
namespace spk {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;

// RoundToDType for BF16 (float_convert.cc FloatToBF16 then back) of lanes that are not NaN: add
// 0x7FFF plus the lowest kept bit and drop the low half; a carry into the exponent is the correct
// result, and Inf stays Inf.
HWY_INLINE VF RoundNonNaNToBF16(VF x) {
  const DF df;
  const DU du;
  const auto bits = hn::BitCast(du, x);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto biased = hn::Add(bits, hn::Add(hn::Set(du, 0x7FFFu), lsb));
  return hn::BitCast(df, hn::And(biased, hn::Set(du, 0xFFFF0000u)));
}

// RoundToDType for F16 (FloatToF16 then F16ToFloat) of lanes that are not NaN. Normal range: round
// the mantissa to 10 bits on the integer bits (ties to even), past 65504 + half an ulp the result
// is Inf. Below 2^-14 the F16 result is a multiple of 2^-24: adding and subtracting 0.5 (whose
// float32 ulp is 2^-24) makes the FPU round to exactly that grid, ties to even, with subnormal
// inputs kept (no DAZ/FTZ).
HWY_INLINE VF RoundNonNaNToF16(VF x) {
  const DF df;
  const DI di;
  const auto sign_mask = hn::Set(di, static_cast<int32_t>(0x80000000u));
  const auto bits = hn::BitCast(di, x);
  const auto magnitude = hn::AndNot(sign_mask, bits);  // < 2^31: signed compares are safe
  const auto lsb = hn::And(hn::ShiftRight<13>(magnitude), hn::Set(di, 1));
  auto normal = hn::And(hn::Add(magnitude, hn::Add(hn::Set(di, 0xFFF), lsb)),
                        hn::Set(di, static_cast<int32_t>(~0x1FFFu)));
  // normal is a multiple of 0x2000, so > 0x477FFFFF means >= 65536 (1.0.3 has no signed Ge).
  normal = hn::IfThenElse(hn::Gt(normal, hn::Set(di, 0x477FFFFF)), hn::Set(di, 0x7F800000), normal);
  const VF abs = hn::BitCast(df, magnitude);
  const VF half = hn::Set(df, 0.5f);
  const VF subnormal = hn::Sub(hn::Add(abs, half), half);
  const VF rounded =
      hn::IfThenElse(hn::Lt(abs, hn::Set(df, 0x1p-14f)), subnormal, hn::BitCast(df, normal));
  return hn::Or(rounded, hn::BitCast(df, hn::And(bits, sign_mask)));
}

// RoundToDType(x, kType) for lanes that are not NaN (a quotient of finite weights by a positive
// scale, say): the kernels' inner loops skip the NaN test that RoundTo pays for.
template <DType kType>
HWY_INLINE VF RoundNonNaNTo(VF x) {
  if constexpr (kType == DType::kBF16) return RoundNonNaNToBF16(x);
  if constexpr (kType == DType::kF16) return RoundNonNaNToF16(x);
  return x;
}

// RoundToDType(x, kType) on lanes: NaN stays NaN.
template <DType kType>
HWY_INLINE VF RoundTo(VF x) {
  if constexpr (kType == DType::kF32) return x;
  return hn::IfThenElse(hn::IsNaN(x), x, RoundNonNaNTo<kType>(x));
}

// The one switch from a run-time weight dtype to the templated kernels of every -inl.h file:
// calls body.template operator()<kType>() with the compile-time dtype (F32 for anything but
// BF16/F16; the entry points' callers checked IsQuantizableFloat) and returns what it returns.
template <typename Body>
HWY_INLINE auto WithDType(DType dtype, Body body) {
  switch (dtype) {
    case DType::kBF16:
      return body.template operator()<DType::kBF16>();
    case DType::kF16:
      return body.template operator()<DType::kF16>();
    default:
      return body.template operator()<DType::kF32>();
  }
}

// F16ToFloat on u32 lanes that hold F16 bits: normals rebias the exponent, subnormals are
// mantissa * 2^-24 (exact), exponent 31 is Inf/NaN.
HWY_INLINE VF F16BitsToFloat(hn::Vec<DU> h) {
  const DF df;
  const DU du;
  const DI di;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto exponent = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1Fu));
  const auto mantissa = hn::And(h, hn::Set(du, 0x3FFu));
  const auto normal =
      hn::Or(hn::ShiftLeft<23>(hn::Add(exponent, hn::Set(du, 112u))), hn::ShiftLeft<13>(mantissa));
  const auto inf_nan = hn::Or(hn::Set(du, 0x7F800000u), hn::ShiftLeft<13>(mantissa));
  const auto subnormal =
      hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, mantissa)), hn::Set(df, 0x1p-24f)));
  const auto magnitude =
      hn::IfThenElse(hn::Eq(exponent, hn::Zero(du)), subnormal,
                     hn::IfThenElse(hn::Eq(exponent, hn::Set(du, 0x1Fu)), inf_nan, normal));
  return hn::BitCast(df, hn::Or(magnitude, sign));
}

// ConvertToFloat of one vector: Lanes(DF) little-endian kType elements at `src` as float32, so
// that a kernel can convert in registers instead of through a float row.
template <DType kType>
HWY_INLINE VF LoadAsFloat(const uint8_t* src) {
  const DF df;
  if constexpr (kType == DType::kF32) {
    float chunk[hn::MaxLanes(df)];
    std::memcpy(chunk, src, hn::Lanes(df) * sizeof(float));  // alignment- and aliasing-safe
    return hn::LoadU(df, chunk);
  } else {
    const DU du;
    const hn::Rebind<uint16_t, DF> d16;
    uint16_t chunk[hn::MaxLanes(d16)];
    std::memcpy(chunk, src, hn::Lanes(df) * 2);
    const auto h = hn::PromoteTo(du, hn::LoadU(d16, chunk));
    if constexpr (kType == DType::kBF16) return hn::BitCast(df, hn::ShiftLeft<16>(h));
    return F16BitsToFloat(h);
  }
}

// ConvertToFloat: little-endian BF16/F16/F32 elements to float32.
template <DType kType>
HWY_INLINE void ToFloat(const uint8_t* src, float* out, size_t n) {
  if constexpr (kType == DType::kF32) {
    if (n != 0) std::memcpy(out, src, n * sizeof(float));
    return;
  } else {
    const DF df;
    const size_t lanes = hn::Lanes(df);
    size_t i = 0;
    for (; i + lanes <= n; i += lanes) hn::StoreU(LoadAsFloat<kType>(src + 2 * i), df, out + i);
    if (i < n) spk::ConvertToFloat(kType, src + 2 * i, out + i, n - i);
  }
}

// float32 bits of the first value that is not finite: |bits| at or past it is Inf or NaN.
constexpr int32_t kInfBits = 0x7F800000;

// A stored element of kType as an integer: with the sign cleared its bits order like |x| for
// finite values, and at or past kInf it is Inf or NaN. 16-bit types as int16 (every magnitude is
// below 0x8000, so signed compares are safe), F32 as int32.
template <DType kType>
struct StoredBits {
  using T = std::conditional_t<kType == DType::kF32, int32_t, int16_t>;
  static constexpr size_t kBytes = sizeof(T);  // bytes per stored weight
  static constexpr T kAbsMask = static_cast<T>(kType == DType::kF32 ? 0x7FFFFFFF : 0x7FFF);
  static constexpr T kInf = static_cast<T>(kType == DType::kBF16  ? 0x7F80
                                           : kType == DType::kF16 ? 0x7C00
                                                                  : kInfBits);
  // The value of a magnitude (exact).
  static float ToFloat(T magnitude) {
    if constexpr (kType == DType::kBF16) {
      return BF16ToFloat(static_cast<uint16_t>(magnitude));
    } else if constexpr (kType == DType::kF16) {
      return F16ToFloat(static_cast<uint16_t>(magnitude));
    } else {
      return std::bit_cast<float>(magnitude);
    }
  }
};

// The largest |bits| of n stored kType values, read as they are stored (no float row). With
// kSkipNaN, NaN patterns (past kInf) are skipped: AbsMaxOf (float_formats.h) on the bits; without,
// a result at or past kInf says that a value is Inf or NaN.
template <DType kType, bool kSkipNaN>
HWY_INLINE typename StoredBits<kType>::T MaxStoredMagnitude(const uint8_t* bytes, size_t n) {
  using Bits = StoredBits<kType>;
  using T = typename Bits::T;
  const hn::ScalableTag<T> d;
  const size_t lanes = hn::Lanes(d);
  const T* v = reinterpret_cast<const T*>(bytes);
  auto acc = hn::Zero(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto m = hn::And(hn::LoadU(d, v + i), hn::Set(d, Bits::kAbsMask));
    acc = hn::Max(acc, kSkipNaN ? hn::IfThenZeroElse(hn::Gt(m, hn::Set(d, Bits::kInf)), m) : m);
  }
  T out = hn::GetLane(hn::MaxOfLanes(d, acc));
  for (; i < n; ++i) {
    T m;
    std::memcpy(&m, bytes + i * sizeof(T), sizeof(T));
    m &= Bits::kAbsMask;
    if (!kSkipNaN || m <= Bits::kInf) out = std::max(out, m);
  }
  return out;
}

// How a group kernel computes the float32 quotient w / scale that the reference divides for,
// cheaper than a division where that is exact:
//   kDivide               IEEE division.
//   kPowerOfTwo           the scale is a power of two in [2^-127, 2^127] (the MX scales): its
//                         reciprocal is exact, and w * (1 / scale) rounds once, to the float
//                         w / scale rounds to.
//   kCorrectedReciprocal  Markstein's correction: q0 = w * y with y = 1 / scale rounded, then
//                         q0 + (w - q0 * scale) * y with two FMAs. REQUIRES
//                         ReciprocalQuotientIsExact: then it is w / scale bit for bit
//                         (RtnSimdTest.QuotientsAreTheDivisionsBitForBit checks it for every
//                         weight and scale it admits). The RTN rows use it; FP8's rows did not
//                         get faster with it (their E4M3 rounding bounds them), so they divide.
enum class QuotientBy { kDivide, kPowerOfTwo, kCorrectedReciprocal };

// Whether kCorrectedReciprocal gives the division's float for every finite kType weight w with
// |w / scale| <= 512 (every quotient a quantizer divides for: the codes' range): true for BF16
// and F16 weights and scales in [2^-40, 2^40], where it was checked exhaustively. A quotient
// below 2^-60 (a subnormal weight) may differ in its last bit, and both stay below 2^-50, far
// from any code. Not claimed for F32 weights, nor on targets whose MulAdd is a multiply and an
// add (SSSE3, SSE4, SCALAR): the correction needs the FMA's single rounding.
template <DType kType>
HWY_INLINE bool ReciprocalQuotientIsExact(float scale) {
  return HWY_NATIVE_FMA && kType != DType::kF32 && scale >= 0x1p-40f && scale <= 0x1p40f;
}

// The quotient of lanes of weights by one positive scale, as kBy says.
template <QuotientBy kBy>
class Quotient {
 public:
  // Holds the scale to divide by, and the reciprocal to multiply with.
  explicit Quotient(float scale)
      : scale_(hn::Set(DF(), scale)),
        reciprocal_(hn::Set(DF(), kBy == QuotientBy::kDivide ? 0.0f : 1.0f / scale)) {}
  VF operator()(VF w) const {
    if constexpr (kBy == QuotientBy::kDivide) return hn::Div(w, scale_);
    const VF q0 = hn::Mul(w, reciprocal_);
    if constexpr (kBy == QuotientBy::kPowerOfTwo) return q0;
    // w - q0 * scale is exact (q0 is within an ulp of w / scale), and the FMA rounds once. The
    // sign is the weight's, as the division's is: for w = -0.0 the sums give +0.0 (E4M3 keeps
    // the sign of a zero).
    return hn::CopySign(hn::MulAdd(hn::NegMulAdd(q0, scale_, w), reciprocal_, q0), w);
  }

 private:
  VF scale_;
  VF reciprocal_;
};

}  // namespace HWY_NAMESPACE
}  // namespace spk
HWY_AFTER_NAMESPACE();

#endif  // include guard
