// Per-target Highway kernels of the fast scale search (see search_simd.h for the contract). This
// file is included once per CPU target by search_simd.cc through hwy/foreach_target.h, hence the
// toggled include guard. Each kernel mirrors one scalar kernel of quant/search.cc (the comments
// name it); the RTN steps of the row pass are rtn_simd-inl.h's own helpers.
//
// Kernels work on caller-owned buffers, keep no state and are thread-safe. The row kernel returns
// false when the data is not finite or a scale overflows; the caller then asks the reference.

#if defined(SPK_QUANT_SIMD_SEARCH_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SPK_QUANT_SIMD_SEARCH_SIMD_INL_H_
#undef SPK_QUANT_SIMD_SEARCH_SIMD_INL_H_
#else
#define SPK_QUANT_SIMD_SEARCH_SIMD_INL_H_
#endif

#include <cmath>
#include <span>
#include <vector>

#include "hwy/highway.h"
#include "quant/rtn.h"
#include "quant/search.h"
#include "tensor/dtype.h"
#include "tensor/float_convert.h"

// Only rtn_simd-inl.h's inline helpers (ToFloat, MinMaxAndFinite, Scales, QuantizeGroup, Pack,
// RoundTo, QuantizeRowsTyped) are used here; its exported entry points belong to rtn_simd.cc.
#define SPK_RTN_SIMD_HELPERS_ONLY
#include "quant/simd/rtn_simd-inl.h"
#undef SPK_RTN_SIMD_HELPERS_ONLY

HWY_BEFORE_NAMESPACE();
namespace spk {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Fully unrolls a loop with a compile-time trip count, so that arrays of accumulator vectors
// indexed by it live in registers.
#ifndef SPK_UNROLL_ALL
#define SPK_UNROLL_ALL _Pragma("GCC unroll 16")
#endif

// The 16 stripes of a sum live in kStripeVecs vectors: stripe v * lanes + l is lane l of vector v.
constexpr size_t kLanes = hn::MaxLanes(DF());
static_assert(kSearchStripes % kLanes == 0, "the stripes must fill whole vectors");
constexpr size_t kStripeVecs = kSearchStripes / kLanes;

struct Stripes {
  VF v[kStripeVecs];
  Stripes() {
    for (VF& x : v) x = hn::Zero(DF());
  }
};

// Lane k += lane k + lanes/2 down to one lane: the last steps of SumStripes' tree.
template <class D>
HWY_INLINE float HalvingSum(D d, hn::Vec<D> v) {
#if HWY_TARGET == HWY_SCALAR  // one lane: nothing to halve
  return hn::GetLane(v);
#else
  if constexpr (hn::MaxLanes(D()) == 1) {
    return hn::GetLane(v);
  } else {
    const hn::Half<D> dh;
    return HalvingSum(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
#endif
}

// SumStripes of the stripes plus the scalar tail terms of elements [full, n) (full is a multiple
// of 16): the same tree, first across vectors, then inside the last one.
template <typename Term>
HWY_INLINE float Total(Stripes& s, size_t full, size_t n, Term term) {
  if (full == n) {
    for (size_t h = kStripeVecs / 2; h >= 1; h /= 2) {
      for (size_t k = 0; k < h; ++k) s.v[k] = hn::Add(s.v[k], s.v[k + h]);
    }
    return HalvingSum(DF(), s.v[0]);
  }
  float stripes[kSearchStripes];
  for (size_t k = 0; k < kStripeVecs; ++k) hn::StoreU(s.v[k], DF(), stripes + k * kLanes);
  for (size_t i = full; i < n; ++i) stripes[i - full] += term(i);
  return SumStripes(stripes);
}

HWY_INLINE VF Codes(VF x, VF inv, VF lo, VF hi) {  // NearestCode
  return hn::Round(hn::Min(hn::Max(hn::Mul(x, inv), lo), hi));
}

// ScalarImportance.
void ImportanceKernel(const float* w, size_t n, float inv_peak, float* imp) {
  const DF df;
  const VF vinv = hn::Set(df, inv_peak), one = hn::Set(df, 1.0f), weight = hn::Set(df, kPeakWeight);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const VF r = hn::Mul(hn::LoadU(df, w + i), vinv);
    const VF r2 = hn::Mul(r, r);
    hn::StoreU(hn::Add(one, hn::Mul(weight, hn::Mul(r2, r2))), df, imp + i);
  }
  for (; i < n; ++i) imp[i] = PeakImportance(w[i], inv_peak);
}

// Calls body.template operator()<K>() with the compile-time K == count (1 <= count <=
// kMaxSearchBatch), so that each batch size gets its own fully unrolled loop.
template <typename Body>
HWY_INLINE void WithBatchSize(size_t count, Body body) {
  static_assert(kMaxSearchBatch == 4);
  switch (count) {
    case 1:
      return body.template operator()<1>();
    case 2:
      return body.template operator()<2>();
    case 3:
      return body.template operator()<3>();
    default:
      return body.template operator()<4>();
  }
}

// ScalarFitSums for K candidates in one pass.
template <size_t K>
HWY_INLINE void FitSums(const float* w, const float* imp, size_t n, const float* inv,
                        const float* lo, const float* hi, float* cw, float* cc) {
  const DF df;
  VF vinv[K], vlo[K], vhi[K];
  for (size_t k = 0; k < K; ++k) {
    vinv[k] = hn::Set(df, inv[k]), vlo[k] = hn::Set(df, lo[k]), vhi[k] = hn::Set(df, hi[k]);
  }
  Stripes scw[K], scc[K];
  const size_t full = n / kSearchStripes * kSearchStripes;
  for (size_t i = 0; i < full; i += kSearchStripes) {
    SPK_UNROLL_ALL
    for (size_t v = 0; v < kStripeVecs; ++v) {
      const VF x = hn::LoadU(df, w + i + v * kLanes);
      const VF importance = hn::LoadU(df, imp + i + v * kLanes);
      SPK_UNROLL_ALL
      for (size_t k = 0; k < K; ++k) {
        const VF c = Codes(x, vinv[k], vlo[k], vhi[k]);
        const VF t = hn::Mul(c, importance);
        scw[k].v[v] = hn::Add(scw[k].v[v], hn::Mul(t, x));
        scc[k].v[v] = hn::Add(scc[k].v[v], hn::Mul(t, c));
      }
    }
  }
  for (size_t k = 0; k < K; ++k) {
    cw[k] = Total(scw[k], full, n, [&](size_t i) {
      return (NearestCode(w[i], inv[k], lo[k], hi[k]) * imp[i]) * w[i];
    });
    cc[k] = Total(scc[k], full, n, [&](size_t i) {
      const float c = NearestCode(w[i], inv[k], lo[k], hi[k]);
      return (c * imp[i]) * c;
    });
  }
}

void FitSumsKernel(const float* w, const float* imp, size_t n, const float* inv, const float* lo,
                   const float* hi, size_t count, float* cw, float* cc) {
  WithBatchSize(count, [&]<size_t K>() { FitSums<K>(w, imp, n, inv, lo, hi, cw, cc); });
}

// ScalarNearestErrors for K candidates in one pass.
template <DType kType, size_t K>
HWY_INLINE void NearestErrors(const float* w, const float* imp, size_t n, const float* inv,
                              const float* scale, const float* lo, const float* hi, float* err) {
  const DF df;
  VF vinv[K], vscale[K], vlo[K], vhi[K];
  for (size_t k = 0; k < K; ++k) {
    vinv[k] = hn::Set(df, inv[k]), vscale[k] = hn::Set(df, scale[k]);
    vlo[k] = hn::Set(df, lo[k]), vhi[k] = hn::Set(df, hi[k]);
  }
  Stripes sums[K];
  const size_t full = n / kSearchStripes * kSearchStripes;
  for (size_t i = 0; i < full; i += kSearchStripes) {
    SPK_UNROLL_ALL
    for (size_t v = 0; v < kStripeVecs; ++v) {
      const VF x = hn::LoadU(df, w + i + v * kLanes);
      const VF importance = hn::LoadU(df, imp + i + v * kLanes);
      SPK_UNROLL_ALL
      for (size_t k = 0; k < K; ++k) {
        const VF c = Codes(x, vinv[k], vlo[k], vhi[k]);
        const VF e = hn::Sub(x, RoundTo<kType>(hn::Mul(c, vscale[k])));
        sums[k].v[v] = hn::Add(sums[k].v[v], hn::Mul(hn::Mul(e, e), importance));
      }
    }
  }
  for (size_t k = 0; k < K; ++k) {
    err[k] = Total(sums[k], full, n, [&](size_t i) {
      const float c = NearestCode(w[i], inv[k], lo[k], hi[k]);
      const float e = w[i] - RoundToDType(c * scale[k], kType);
      return (e * e) * imp[i];
    });
  }
}

// ScalarCodesError.
template <DType kType>
HWY_INLINE float CodesError(const float* w, const float* imp, const int8_t* q, size_t n,
                            float scale, int32_t zero_point) {
  const DF df;
  const DI di;
  const hn::Rebind<int8_t, DF> d8;
  const VF vscale = hn::Set(df, scale);
  const auto vzp = hn::Set(di, zero_point);
  Stripes err;
  const size_t full = n / kSearchStripes * kSearchStripes;
  for (size_t i = 0; i < full; i += kSearchStripes) {
    SPK_UNROLL_ALL
    for (size_t k = 0; k < kStripeVecs; ++k) {
      const VF c =
          hn::ConvertTo(df, hn::Sub(hn::PromoteTo(di, hn::LoadU(d8, q + i + k * kLanes)), vzp));
      const VF e = hn::Sub(hn::LoadU(df, w + i + k * kLanes), RoundTo<kType>(hn::Mul(c, vscale)));
      err.v[k] = hn::Add(err.v[k], hn::Mul(hn::Mul(e, e), hn::LoadU(df, imp + i + k * kLanes)));
    }
  }
  return Total(err, full, n, [&](size_t i) {
    const float c = static_cast<float>(static_cast<int32_t>(q[i]) - zero_point);
    const float e = w[i] - RoundToDType(c * scale, kType);
    return (e * e) * imp[i];
  });
}

// ScalarNearestCodes.
void NearestCodesKernel(const float* w, size_t n, float inv, float lo, float hi, int32_t zero_point,
                        int8_t* q) {
  const DF df;
  const DI di;
  const hn::Rebind<int8_t, DF> d8;
  const VF vinv = hn::Set(df, inv), vlo = hn::Set(df, lo), vhi = hn::Set(df, hi);
  const auto vzp = hn::Set(di, zero_point);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const VF c = Codes(hn::LoadU(df, w + i), vinv, vlo, vhi);
    hn::StoreU(hn::DemoteTo(d8, hn::Add(hn::ConvertTo(di, c), vzp)), d8, q + i);
  }
  for (; i < n; ++i) {
    q[i] = static_cast<int8_t>(static_cast<int32_t>(NearestCode(w[i], inv, lo, hi)) + zero_point);
  }
}

void NearestErrorsKernel(DType dtype, const float* w, const float* imp, size_t n, const float* inv,
                         const float* scale, const float* lo, const float* hi, size_t count,
                         float* err) {
  WithDType(dtype, [&]<DType kType>() {
    WithBatchSize(count,
                  [&]<size_t K>() { NearestErrors<kType, K>(w, imp, n, inv, scale, lo, hi, err); });
  });
}

float CodesErrorKernel(DType dtype, const float* w, const float* imp, const int8_t* q, size_t n,
                       float scale, int32_t zero_point) {
  return WithDType(
      dtype, [&]<DType kType>() { return CodesError<kType>(w, imp, q, n, scale, zero_point); });
}

constexpr SearchKernels kTargetKernels{ImportanceKernel, FitSumsKernel, NearestErrorsKernel,
                                       CodesErrorKernel, NearestCodesKernel};

// QuantizeRowsSearch for one dtype in one pass (after the caller checked dtype, params and shape):
// rtn_simd-inl.h's row pass, with the search of every group run on its RTN codes still in memory,
// then one pack. Returns false (outputs partly written) when a weight is not finite or a scale
// overflows.
template <DType kType>
HWY_INLINE bool SearchRowsTyped(const QuantParams& p, const uint8_t* weight, int64_t rows,
                                int64_t cols, const RowBlockQuantOutput& out) {
  auto search_group = [&p](std::span<const float> w, std::span<int8_t> q, GroupRange range,
                           float& scale, int32_t& zero_point) {
    const GroupQuantParams found =
        SearchGroupWith(kTargetKernels, p, kType, w, range, {scale, zero_point}, q);
    scale = found.scale;
    zero_point = found.zero_point;
  };
  return QuantizeRowsTyped<kType>(p, weight, rows, cols, out, search_group);
}

// ---- The per-target entry points exported to search_simd.cc.

bool SearchRowsKernel(const QuantParams& p, DType dtype, const uint8_t* weight, int64_t rows,
                      int64_t cols, const RowBlockQuantOutput& out) {
  return WithDType(
      dtype, [&]<DType kType>() { return SearchRowsTyped<kType>(p, weight, rows, cols, out); });
}

const SearchKernels* SearchKernelsKernel() { return &kTargetKernels; }

const char* SearchTargetNameKernel() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace spk
HWY_AFTER_NAMESPACE();

#endif  // include guard
