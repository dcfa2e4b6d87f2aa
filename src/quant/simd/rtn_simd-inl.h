// Per-target Highway kernels of the fast RTN quantizer (see rtn_simd.h for the contract). This file
// is included once per CPU target by rtn_simd.cc through hwy/foreach_target.h, hence the toggled
// include guard. Each kernel mirrors one scalar function of quant/rtn.cc or
// tensor/float_convert.cc step for step; the comments name the step they mirror. The weight
// loads, dtype roundings and quotients they share with the other kernels are weights_simd-inl.h.
//
// Kernels work on caller-owned buffers, keep no state and are thread-safe. They never report
// errors themselves: the row kernel returns false when the data is not finite or a scale
// overflows, and the caller reruns the reference to get its exact Status.

#if defined(SPK_QUANT_SIMD_RTN_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SPK_QUANT_SIMD_RTN_SIMD_INL_H_
#undef SPK_QUANT_SIMD_RTN_SIMD_INL_H_
#else
#define SPK_QUANT_SIMD_RTN_SIMD_INL_H_
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "hwy/highway.h"
#include "quant/params.h"
#include "quant/rtn.h"
#include "quant/simd/weights_simd-inl.h"
#include "tensor/dtype.h"
#include "tensor/float_convert.h"

HWY_BEFORE_NAMESPACE();
namespace spk {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

static_assert(std::endian::native == std::endian::little,
              "the packed words and scales are written in host order");

// GroupMinMax, plus whether every value is finite (largest |bits| below the Inf pattern).
HWY_INLINE GroupRange MinMaxAndFinite(const float* v, size_t n, bool* finite) {
  const DF df;
  const DI di;
  const size_t lanes = hn::Lanes(df);
  GroupRange range{v[0], v[0]};
  int32_t max_magnitude = 0;
  size_t i = 0;
  if (n >= lanes) {
    const auto abs_mask = hn::Set(di, 0x7FFFFFFF);
    VF lo = hn::LoadU(df, v);
    VF hi = lo;
    auto magnitude = hn::And(hn::BitCast(di, lo), abs_mask);
    for (i = lanes; i + lanes <= n; i += lanes) {
      const VF x = hn::LoadU(df, v + i);
      lo = hn::Min(lo, x);
      hi = hn::Max(hi, x);
      magnitude = hn::Max(magnitude, hn::And(hn::BitCast(di, x), abs_mask));
    }
    range.min = hn::GetLane(hn::MinOfLanes(df, lo));
    range.max = hn::GetLane(hn::MaxOfLanes(df, hi));
    max_magnitude = hn::GetLane(hn::MaxOfLanes(di, magnitude));
  }
  for (; i < n; ++i) {
    range.min = std::min(range.min, v[i]);
    range.max = std::max(range.max, v[i]);
    max_magnitude =
        std::max(max_magnitude, static_cast<int32_t>(std::bit_cast<uint32_t>(v[i]) & 0x7FFFFFFFu));
  }
  *finite = max_magnitude < 0x7F800000;
  return range;
}

// torch.finfo(dtype).eps, as quant/rtn.cc.
template <DType kType>
constexpr float Eps() {
  if constexpr (kType == DType::kBF16) return 0x1p-7f;
  if constexpr (kType == DType::kF16) return 0x1p-10f;
  return 0x1p-23f;
}

// ComputeGroupScale on `lanes` groups at a time; the tail uses the reference itself.
template <DType kType>
HWY_INLINE void Scales(const QuantParams& p, const float* mins, const float* maxs, size_t n,
                       float* scales, int32_t* zero_points) {
  const DF df;
  const DI di;
  const size_t lanes = hn::Lanes(df);
  const float qmin = static_cast<float>(QMin(p.bits));
  const float qmax = static_cast<float>(QMax(p.bits));
  const float bit_range = RoundToDType(qmax - qmin, kType);
  const float half_range = RoundToDType(bit_range / 2.0f, kType);
  const VF zero = hn::Zero(df);
  const VF eps = hn::Set(df, Eps<kType>());
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const VF mn = hn::Min(hn::LoadU(df, mins + i), zero);
    const VF mx = hn::Max(hn::LoadU(df, maxs + i), zero);
    VF scale;
    auto zp = hn::Zero(di);
    if (p.symmetric) {
      const VF absmax = hn::Max(hn::Abs(mn), hn::Abs(mx));
      scale = RoundTo<kType>(hn::Div(absmax, hn::Set(df, half_range)));
    } else {
      scale = RoundTo<kType>(hn::Div(RoundTo<kType>(hn::Sub(mx, mn)), hn::Set(df, bit_range)));
      // Before the eps fix, like the reference: 0/0 = NaN becomes zero point 0.
      const VF shifted =
          RoundTo<kType>(hn::Sub(hn::Set(df, qmin), RoundTo<kType>(hn::Div(mn, scale))));
      const auto is_nan = hn::RebindMask(di, hn::IsNaN(shifted));
      const VF clamped = hn::Min(hn::Max(shifted, hn::Set(df, qmin)), hn::Set(df, qmax));
      zp = hn::IfThenZeroElse(is_nan, hn::ConvertTo(di, hn::Round(clamped)));
    }
    scale = hn::IfThenElse(hn::Eq(scale, zero), eps, scale);
    hn::StoreU(scale, df, scales + i);
    hn::StoreU(zp, di, zero_points + i);
  }
  for (; i < n; ++i) {
    const GroupQuantParams gq = ComputeGroupScale(p, kType, GroupRange{mins[i], maxs[i]});
    scales[i] = gq.scale;
    zero_points[i] = gq.zero_point;
  }
}

// ConvertTo(Round(x)) for lanes already clamped to a code range (|x| <= 128): adding 1.5 * 2^23
// puts every such x in the binade whose ulp is 1, so the FPU rounds it to an integer, ties to
// even, and the integer is the difference of the bit patterns. Two instructions where Round and
// ConvertTo (with its overflow fix-up) take five: the row kernels 15-17% faster.
HWY_INLINE hn::Vec<DI> RoundClampedToInt(VF x) {
  const DF df;
  const DI di;
  const VF magic = hn::Set(df, 0x1.8p23f);
  return hn::Sub(hn::BitCast(di, hn::Add(x, magic)), hn::BitCast(di, magic));
}

// Stores four vectors of int32 codes, each within int8, as 4 * Lanes(DF) int8 in order. On
// AVX-512 two rounds of saturating packs and one dword permute do what four DemoteTo (packs,
// permute, packs each) did: the codes' stores were a third of the row kernel's samples.
HWY_INLINE void StoreFourCodeVectors(hn::Vec<DI> a, hn::Vec<DI> b, hn::Vec<DI> c, hn::Vec<DI> d,
                                     int8_t* out) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  // The packs work within 128-bit blocks: block k of the result holds dwords a_k, b_k, c_k, d_k
  // (4 codes each); the permute puts a_0..a_3, b_0..b_3, ... back in order.
  const __m512i ab = _mm512_packs_epi32(a.raw, b.raw);
  const __m512i cd = _mm512_packs_epi32(c.raw, d.raw);
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  _mm512_storeu_si512(out, _mm512_permutexvar_epi32(order, _mm512_packs_epi16(ab, cd)));
#else
  const hn::Rebind<int8_t, DF> d8;
  const size_t lanes = hn::Lanes(d8);
  hn::StoreU(hn::DemoteTo(d8, a), d8, out);
  hn::StoreU(hn::DemoteTo(d8, b), d8, out + lanes);
  hn::StoreU(hn::DemoteTo(d8, c), d8, out + 2 * lanes);
  hn::StoreU(hn::DemoteTo(d8, d), d8, out + 3 * lanes);
#endif
}

// QuantizeGroupWithScale's vector loop: q = RNE(clamp(R(R(w / s) + zp), qmin, qmax)), the
// quotient as kBy says, for lanes `load(i)` of the group's weights as float. kFinite: the caller
// checked that the weights are finite (and the scale is finite and positive), so no quotient is
// NaN and the dtype rounding skips its NaN test. Returns how many weights it quantized (a whole
// number of vectors); the caller finishes the tail with the reference.
template <DType kType, bool kFinite, QuotientBy kBy, class Load>
HWY_INLINE size_t QuantizeLanesBy(const QuantParams& p, Load load, size_t n, float scale,
                                  int32_t zero_point, int8_t* q) {
  const DF df;
  const hn::Rebind<int8_t, DF> d8;
  const size_t lanes = hn::Lanes(df);
  const Quotient<kBy> quotient(scale);
  const VF vzp = hn::Set(df, static_cast<float>(zero_point));
  const VF qmin = hn::Set(df, static_cast<float>(QMin(p.bits)));
  const VF qmax = hn::Set(df, static_cast<float>(QMax(p.bits)));
  const auto round = [](VF x) { return kFinite ? RoundNonNaNTo<kType>(x) : RoundTo<kType>(x); };
  const auto code = [&](size_t at) {
    VF x = round(quotient(load(at)));
    // Symmetric schemes add zero point 0, which changes at most the sign of a zero.
    if (!p.symmetric) x = round(hn::Add(x, vzp));
    return RoundClampedToInt(hn::Min(hn::Max(x, qmin), qmax));
  };
  size_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    StoreFourCodeVectors(code(i), code(i + lanes), code(i + 2 * lanes), code(i + 3 * lanes), q + i);
  }
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::DemoteTo(d8, code(i)), d8, q + i);
  return i;
}

// QuantizeLanesBy with IEEE division, or the corrected reciprocal (a fifth faster: the division
// was a quarter of the row kernel) where the weights are finite and it is exact.
template <DType kType, bool kFinite, class Load>
HWY_INLINE size_t QuantizeLanes(const QuantParams& p, Load load, size_t n, float scale,
                                int32_t zero_point, int8_t* q) {
  if (kFinite && ReciprocalQuotientIsExact<kType>(scale)) {
    return QuantizeLanesBy<kType, kFinite, QuotientBy::kCorrectedReciprocal>(p, load, n, scale,
                                                                             zero_point, q);
  }
  return QuantizeLanesBy<kType, kFinite, QuotientBy::kDivide>(p, load, n, scale, zero_point, q);
}

// QuantizeGroupWithScale of n float weights.
template <DType kType>
HWY_INLINE void QuantizeGroup(const QuantParams& p, const float* w, size_t n, float scale,
                              int32_t zero_point, int8_t* q) {
  const auto load = [w](size_t i) { return hn::LoadU(DF(), w + i); };
  const size_t i = QuantizeLanes<kType, false>(p, load, n, scale, zero_point, q);
  if (i < n) {
    spk::QuantizeGroupWithScale(p, kType, std::span(w + i, n - i), {scale, zero_point},
                                std::span(q + i, n - i));
  }
}

// QuantizeGroupWithScale of n weights as stored (kType bytes), converted in registers. REQUIRES:
// finite weights and a finite, positive scale (the row kernel checked both).
template <DType kType>
HWY_INLINE void QuantizeStoredGroup(const QuantParams& p, const uint8_t* w, size_t n, float scale,
                                    int32_t zero_point, int8_t* q) {
  constexpr size_t kElem = StoredBits<kType>::kBytes;
  const auto load = [=](size_t i) { return LoadAsFloat<kType>(w + i * kElem); };
  const size_t i = QuantizeLanes<kType, true>(p, load, n, scale, zero_point, q);
  if (i < n) {  // fewer than one vector of weights is left
    float tail[hn::MaxLanes(DF())];
    spk::ConvertToFloat(kType, w + i * kElem, tail, n - i);
    spk::QuantizeGroupWithScale(p, kType, std::span(tail, n - i), {scale, zero_point},
                                std::span(q + i, n - i));
  }
}

#if HWY_TARGET != HWY_SCALAR
// Bytes below 16, two per output byte with the even one low: each byte pair seen as a 16-bit lane
// u[2k] | u[2k+1] << 8 becomes u[2k] | u[2k+1] << 4. Returns half as many bytes.
template <class V>
HWY_INLINE auto PackNibblePairs(V u) {
  const hn::DFromV<V> d8;
  const hn::Repartition<int16_t, decltype(d8)> d16;
  const hn::Rebind<uint8_t, decltype(d16)> d8_half;
  const auto pairs = hn::BitCast(d16, u);
  return hn::DemoteTo(d8_half,
                      hn::Or(hn::And(pairs, hn::Set(d16, 0x0F)), hn::ShiftRight<4>(pairs)));
}
#endif

// PackRow for the widths without a vector packer (2, 3, 5, 6, 7 bits) and for rows whose values do
// not fill whole words: the values u = q + 2^(bits-1) go through a 64-bit accumulator, lowest bits
// first, and leave it a word at a time: the reference's bit stream (a value straddling two words
// lands in both) without its per-value word and offset arithmetic. Zero-padded last word.
HWY_INLINE void PackBitStream(int bits, const int8_t* q, size_t n, int32_t* words) {
  const int32_t offset = int32_t{1} << (bits - 1);
  uint64_t acc = 0;
  int filled = 0;  // bits of acc in use, < 32 between values
  for (size_t k = 0; k < n; ++k) {
    acc |= static_cast<uint64_t>(static_cast<uint32_t>(q[k] + offset)) << filled;
    filled += bits;
    if (filled >= 32) {
      *words++ = static_cast<int32_t>(static_cast<uint32_t>(acc));
      acc >>= 32;
      filled -= 32;
    }
  }
  if (filled > 0) *words = static_cast<int32_t>(static_cast<uint32_t>(acc));
}

// PackRow for 8 bits (4 values per word, u = q + 128 = q ^ 0x80 byte by byte) and 4 bits (8 values
// per word; byte k of the little-endian word stream is u[2k] | u[2k+1] << 4); other widths and
// rows whose values do not fill whole words: PackBitStream.
HWY_INLINE void Pack(int bits, const int8_t* q, size_t n, int32_t* words) {
  const size_t per_word = 32 / static_cast<size_t>(bits);
  if ((bits != 4 && bits != 8) || n % per_word != 0) {
    PackBitStream(bits, q, n, words);
    return;
  }
  uint8_t* out = reinterpret_cast<uint8_t*>(words);
  const hn::ScalableTag<uint8_t> d8;
  const size_t lanes = hn::Lanes(d8);
  size_t i = 0;
  if (bits == 8) {
    const auto flip = hn::Set(d8, 0x80);
    for (; i + lanes <= n; i += lanes) {
      const auto u = hn::Xor(hn::LoadU(d8, reinterpret_cast<const uint8_t*>(q) + i), flip);
      hn::StoreU(u, d8, out + i);
    }
    for (; i < n; ++i) out[i] = static_cast<uint8_t>(q[i]) ^ 0x80u;
    return;
  }
#if HWY_TARGET != HWY_SCALAR  // one-lane vectors cannot pair bytes
  const hn::Rebind<uint8_t, hn::Repartition<int16_t, decltype(d8)>> d8_half;
  const auto offset = hn::Set(d8, 8);
  for (; i + lanes <= n; i += lanes) {
    const auto u = hn::Add(hn::LoadU(d8, reinterpret_cast<const uint8_t*>(q) + i), offset);
    hn::StoreU(PackNibblePairs(u), d8_half, out + i / 2);
  }
#endif
  for (; i < n; i += 2) {
    out[i / 2] = static_cast<uint8_t>((q[i] + 8) | ((q[i + 1] + 8) << 4));
  }
}

// The min/max of each of a row's `groups` groups of `width` values, then their scales and zero
// points (ComputeGroupScale). False when a weight is not finite or a scale overflows.
template <DType kType>
HWY_INLINE bool RowGroupScales(const QuantParams& p, const float* row, size_t width, size_t groups,
                               float* mins, float* maxs, float* scales, int32_t* zero_points) {
  for (size_t j = 0; j < groups; ++j) {
    bool finite = true;
    const GroupRange range = MinMaxAndFinite(row + j * width, width, &finite);
    if (!finite) return false;
    mins[j] = range.min;
    maxs[j] = range.max;
  }
  Scales<kType>(p, mins, maxs, groups, scales, zero_points);
  for (size_t j = 0; j < groups; ++j) {
    if (!std::isfinite(scales[j])) return false;
  }
  return true;
}

// Symmetric RTN of one row read as it is stored, with no float row: a symmetric scale needs only
// the largest |w| of its group, which is the largest magnitude of the stored bits (mins are 0),
// and the codes come from weights converted in registers. One pass over the source for the
// maxima and one for the codes, where the float row took four. Fills the row's `groups` scales
// and `width`-wide groups of codes; false when a weight is not finite or a scale overflows.
template <DType kType>
HWY_INLINE bool SymmetricRowFromStored(const QuantParams& p, const uint8_t* row, size_t width,
                                       size_t groups, float* mins, float* maxs, float* scales,
                                       int32_t* zero_points, int8_t* q) {
  using Bits = StoredBits<kType>;
  constexpr size_t kElem = Bits::kBytes;
  for (size_t j = 0; j < groups; ++j) {
    const auto magnitude = MaxStoredMagnitude<kType, false>(row + j * width * kElem, width);
    if (magnitude >= Bits::kInf) return false;
    mins[j] = 0.0f;
    maxs[j] = Bits::ToFloat(magnitude);
  }
  Scales<kType>(p, mins, maxs, groups, scales, zero_points);
  for (size_t j = 0; j < groups; ++j) {
    if (!std::isfinite(scales[j])) return false;
    QuantizeStoredGroup<kType>(p, row + j * width * kElem, width, scales[j], 0, q + j * width);
  }
  return true;
}

// The per-group hook of plain RTN: keeps RTN's codes, scale and zero point.
struct KeepRtnGroup {
  void operator()(std::span<const float>, std::span<int8_t>, GroupRange, float&, int32_t&) const {}
};

// QuantizeRowsRtn for one dtype, after the caller checked dtype, params and shape. After RTN has
// quantized a group, `after_group(weights, codes, range, scale, zero_point)` may improve it in
// place (the scale search of search_simd-inl.h does). Returns false (outputs partly written) when a
// weight is not finite or a scale overflows; the caller then asks the reference for the error.
template <DType kType, class GroupHook = KeepRtnGroup>
HWY_INLINE bool QuantizeRowsTyped(const QuantParams& p, const uint8_t* weight, int64_t rows,
                                  int64_t cols, const RowBlockQuantOutput& out,
                                  GroupHook after_group = {}) {
  const size_t width = static_cast<size_t>(GroupWidth(cols, p.group_size));
  const size_t groups = static_cast<size_t>(GroupsPerRow(cols, p.group_size));
  const int64_t words = PackedWords(cols, p.bits);
  const size_t elem = DTypeBits(kType) / 8;
  const size_t n = static_cast<size_t>(cols);
  std::vector<float> row;  // the float row, for the paths that need one
  std::vector<int8_t> q(n);
  std::vector<float> mins(groups), maxs(groups), scales(groups);
  std::vector<int32_t> zero_points(groups);
  // Plain symmetric RTN reads the stored row directly; a hook needs the float row it improves.
  constexpr bool kPlainRtn = std::is_same_v<GroupHook, KeepRtnGroup>;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* stored = weight + static_cast<size_t>(r) * n * elem;
    if (kPlainRtn && p.symmetric) {
      if (!SymmetricRowFromStored<kType>(p, stored, width, groups, mins.data(), maxs.data(),
                                         scales.data(), zero_points.data(), q.data())) {
        return false;
      }
    } else {
      if (row.empty()) row.resize(n);
      ToFloat<kType>(stored, row.data(), n);
      if (!RowGroupScales<kType>(p, row.data(), width, groups, mins.data(), maxs.data(),
                                 scales.data(), zero_points.data())) {
        return false;
      }
      for (size_t j = 0; j < groups; ++j) {
        const std::span<const float> w(row.data() + j * width, width);
        const std::span<int8_t> gq(q.data() + j * width, width);
        QuantizeGroup<kType>(p, w.data(), width, scales[j], zero_points[j], gq.data());
        after_group(w, gq, GroupRange{mins[j], maxs[j]}, scales[j], zero_points[j]);
      }
    }
    Pack(p.bits, q.data(), n, out.packed + r * words);
    spk::ConvertFromFloat(kType, scales.data(), out.scales + static_cast<size_t>(r) * groups * elem,
                          groups);
    if (out.zero_points != nullptr) {
      std::copy(zero_points.begin(), zero_points.end(), out.zero_points + r * groups);
    }
  }
  return true;
}

// ---- The per-target entry points exported to rtn_simd.cc (identical signatures on every target).
// A file that includes this one for its helpers alone (search_simd-inl.h) defines
// SPK_RTN_SIMD_HELPERS_ONLY first, so that the entry points are defined once, here for rtn_simd.cc.
#ifndef SPK_RTN_SIMD_HELPERS_ONLY

bool QuantizeRowsKernel(const QuantParams& p, DType dtype, const uint8_t* weight, int64_t rows,
                        int64_t cols, const RowBlockQuantOutput& out) {
  return WithDType(
      dtype, [&]<DType kType>() { return QuantizeRowsTyped<kType>(p, weight, rows, cols, out); });
}

void ConvertToFloatKernel(DType src, const uint8_t* src_bytes, float* out, size_t n) {
  return WithDType(src, [&]<DType kType>() { return ToFloat<kType>(src_bytes, out, n); });
}

GroupRange GroupMinMaxKernel(const float* values, size_t n) {
  bool finite = true;
  return MinMaxAndFinite(values, n, &finite);
}

void ComputeGroupScalesKernel(const QuantParams& p, DType dtype, const float* mins,
                              const float* maxs, size_t n, float* scales, int32_t* zero_points) {
  return WithDType(
      dtype, [&]<DType kType>() { return Scales<kType>(p, mins, maxs, n, scales, zero_points); });
}

void QuantizeGroupKernel(const QuantParams& p, DType dtype, const float* w, size_t n, float scale,
                         int32_t zero_point, int8_t* q) {
  return WithDType(
      dtype, [&]<DType kType>() { return QuantizeGroup<kType>(p, w, n, scale, zero_point, q); });
}

void QuotientKernel(DType dtype, float scale, const float* w, size_t n, float* out) {
  return WithDType(dtype, [&]<DType kType>() {
    const auto divide = [&]<QuotientBy kBy>() {
      const Quotient<kBy> quotient(scale);
      const size_t lanes = hn::Lanes(DF());
      size_t i = 0;
      for (; i + lanes <= n; i += lanes)
        hn::StoreU(quotient(hn::LoadU(DF(), w + i)), DF(), out + i);
      for (; i < n; ++i) out[i] = w[i] / scale;
    };
    if (ReciprocalQuotientIsExact<kType>(scale)) {
      return divide.template operator()<QuotientBy::kCorrectedReciprocal>();
    }
    return divide.template operator()<QuotientBy::kDivide>();
  });
}

void PackRowKernel(int bits, const int8_t* q, size_t n, int32_t* words) { Pack(bits, q, n, words); }

const char* TargetNameKernel() { return hwy::TargetName(HWY_TARGET); }

#endif  // SPK_RTN_SIMD_HELPERS_ONLY

}  // namespace HWY_NAMESPACE
}  // namespace spk
HWY_AFTER_NAMESPACE();

#endif  // include guard
