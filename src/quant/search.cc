#include "quant/search.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/float_convert.h"

namespace spk {
namespace {

// The asymmetric grid: llm-compressor's mse observer shrinks min and max by p = 1.00, 0.99, ...
constexpr int kAsymmetricCandidates = 20;
constexpr float kAsymmetricShrinkStep = 0.01f;
// Passes of coordinate descent over the codes of the best candidate.
constexpr int kDescentPasses = 1;

// Rounding of float32 values to the weight dtype, inlined so the candidate loops vectorize. Every
// value rounded here is finite or +-Inf (never NaN), which is what lets BF16 use the plain
// round-to-nearest-even bit trick; it matches RoundToDType on all such inputs (tested).
struct RoundBF16 {
  float operator()(float x) const {
    uint32_t u = std::bit_cast<uint32_t>(x);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return std::bit_cast<float>(u & 0xFFFF0000u);
  }
};
struct RoundF16 {
  float operator()(float x) const { return RoundToDType(x, DType::kF16); }
};
struct RoundF32 {
  float operator()(float x) const { return x; }
};

// Round half to even for |x| < 2^22 (the codes are clamped to the bit range first): adding and
// subtracting 1.5 * 2^23 leaves the nearest integer in the default rounding mode, and unlike
// std::nearbyint it vectorizes without SSE4.1.
inline float RoundToInteger(float x) {
  constexpr float kMagic = 0x1.8p23f;
  return (x + kMagic) - kMagic;
}

// A candidate: a scale (a value of the dtype) and a zero point; codes c = q - zero_point lie in
// [lo, hi] = [qmin - zero_point, qmax - zero_point].
struct Candidate {
  float scale;
  int32_t zero_point;
};

// The search over one group. Works on codes c = q - zp held as floats, so that symmetric and
// asymmetric schemes share every loop; the dequantized value is R(c * scale), which equals
// DequantizeGroup's R(R(q - zp) * scale) because the small integer c is exact in every dtype.
template <typename Round>
class GroupSearch {
 public:
  GroupSearch(const QuantParams& p, std::span<const float> w, Round round)
      : w_(w), qmin_(QMin(p.bits)), qmax_(QMax(p.bits)), round_(round), codes_(w.size()) {}

  // How well the nearest levels for `c` fit w with their own least-squares scale:
  // (sum c w)^2 / sum c c, the amount that scale removes from sum w^2 (larger is better; -1 when
  // no code is nonzero). The refit scale is returned in `fit` (before rounding). This is how
  // llama.cpp's make_qx_quants scores its candidates; it ignores the dtype rounding of the
  // dequantized values, which the exact error (CodesError) then accounts for. Eight partial sums
  // so the loop vectorizes without reassociation.
  float FitScore(Candidate c, float* fit) const {
    const float inv = 1.0f / c.scale;
    const float lo = static_cast<float>(qmin_ - c.zero_point);
    const float hi = static_cast<float>(qmax_ - c.zero_point);
    float cw[8] = {}, cc[8] = {};
    size_t i = 0;
    for (; i + 8 <= w_.size(); i += 8) {
      for (size_t j = 0; j < 8; ++j) {
        const float code = RoundToInteger(std::min(std::max(w_[i + j] * inv, lo), hi));
        cw[j] += code * w_[i + j];
        cc[j] += code * code;
      }
    }
    for (; i < w_.size(); ++i) {
      const float code = RoundToInteger(std::min(std::max(w_[i] * inv, lo), hi));
      cw[i % 8] += code * w_[i];
      cc[i % 8] += code * code;
    }
    const float sum_cw = ((cw[0] + cw[1]) + (cw[2] + cw[3])) + ((cw[4] + cw[5]) + (cw[6] + cw[7]));
    const float sum_cc = ((cc[0] + cc[1]) + (cc[2] + cc[3])) + ((cc[4] + cc[5]) + (cc[6] + cc[7]));
    if (!(sum_cc > 0) || !(sum_cw > 0)) return -1.0f;
    *fit = sum_cw / sum_cc;
    return sum_cw * sum_cw / sum_cc;
  }

  // Fills codes_ with the nearest levels for `c` (the codes FitScore scores).
  void SetRoundedCodes(Candidate c) {
    const float inv = 1.0f / c.scale;
    const float lo = static_cast<float>(qmin_ - c.zero_point);
    const float hi = static_cast<float>(qmax_ - c.zero_point);
    for (size_t i = 0; i < w_.size(); ++i) {
      codes_[i] = RoundToInteger(std::min(std::max(w_[i] * inv, lo), hi));
    }
  }

  // The exact error of codes_ with `scale`, in double (the final comparison with the input).
  double CodesError(float scale) const {
    double err = 0;
    for (size_t i = 0; i < w_.size(); ++i) {
      const double e = static_cast<double>(w_[i]) - round_(codes_[i] * scale);
      err += e * e;
    }
    return err;
  }

  // The least-squares scale sum(c w) / sum(c c) of codes_, rounded to the dtype; 0 when it is not
  // a usable scale (no nonzero code, a non-positive or overflowing fit).
  float RefitScale() const {
    double cw = 0, cc = 0;
    for (size_t i = 0; i < w_.size(); ++i) {
      cw += static_cast<double>(codes_[i]) * w_[i];
      cc += static_cast<double>(codes_[i]) * codes_[i];
    }
    return UsableScale(cc > 0 ? cw / cc : 0);
  }

  // One pass of coordinate descent on codes_ for `c`: each code moves one level towards w / scale
  // when that raises (sum c w)^2 / sum c c, i.e. lowers the least-squares error with the scale
  // refit; the moves keep the codes in range.
  void CoordinateDescentPass(Candidate c) {
    const float lo = static_cast<float>(qmin_ - c.zero_point);
    const float hi = static_cast<float>(qmax_ - c.zero_point);
    const float inv = 1.0f / c.scale;
    double cw = 0, cc = 0;
    for (size_t i = 0; i < w_.size(); ++i) {
      cw += static_cast<double>(codes_[i]) * w_[i];
      cc += static_cast<double>(codes_[i]) * codes_[i];
    }
    for (size_t i = 0; i < w_.size(); ++i) {
      const float x = w_[i] * inv, code = codes_[i];
      if (x == code) continue;
      const float step = x > code ? 1.0f : -1.0f;
      if (code + step < lo || code + step > hi) continue;
      const double new_cw = cw + step * w_[i];
      const double new_cc = cc + 2.0 * step * code + 1.0;
      if (new_cc > 0 && new_cw > 0 && new_cw * new_cw * cc > cw * cw * new_cc) {
        codes_[i] = code + step;
        cw = new_cw;
        cc = new_cc;
      }
    }
  }

  // `s` rounded to the dtype when that is a positive finite scale, else 0 (unusable).
  float UsableScale(double s) const {
    const float rounded = round_(static_cast<float>(s));
    return std::isfinite(rounded) && rounded > 0 ? rounded : 0.0f;
  }

  std::span<const float> codes() const { return codes_; }
  void set_codes(std::span<const int8_t> q, int32_t zero_point) {
    for (size_t i = 0; i < q.size(); ++i) codes_[i] = static_cast<float>(q[i] - zero_point);
  }

 private:
  std::span<const float> w_;
  int32_t qmin_, qmax_;
  Round round_;
  std::vector<float> codes_;
};

// The asymmetric grid candidate whose nearest-level codes fit the group best (FitScore), returned
// with the least-squares scale of those codes in place of the grid scale.
template <typename Round>
Candidate BestAsymmetricCandidate(const QuantParams& p, DType dtype, GroupRange range,
                                  const GroupSearch<Round>& search, GroupQuantParams current) {
  Candidate best{current.scale, current.zero_point};
  float fit = current.scale;
  float best_score = search.FitScore(best, &fit);
  float best_fit = fit;
  auto consider = [&](Candidate c) {
    if (!(c.scale > 0) || !std::isfinite(c.scale)) return;
    const float score = search.FitScore(c, &fit);
    if (score > best_score) {
      best_score = score;
      best = c;
      best_fit = fit;
    }
  };
  for (int k = 0; k < kAsymmetricCandidates; ++k) {
    const float shrink = 1.0f - kAsymmetricShrinkStep * k;
    const GroupQuantParams gq =
        ComputeGroupScale(p, dtype, {range.min * shrink, range.max * shrink});
    consider({gq.scale, gq.zero_point});
  }
  const Candidate center = best;
  for (int32_t delta : {-1, 1}) {  // the zero points next to the best one, same scale
    const int32_t zp = center.zero_point + delta;
    if (zp >= QMin(p.bits) && zp <= QMax(p.bits)) consider({center.scale, zp});
  }
  const float refit = search.UsableScale(best_fit);
  return {refit > 0 ? refit : best.scale, best.zero_point};
}

template <typename Round>
GroupQuantParams SearchAsymmetricGroupWith(const QuantParams& p, DType dtype,
                                           std::span<const float> w, GroupQuantParams current,
                                           std::span<int8_t> q, Round round) {
  const GroupRange range = GroupMinMax(w);
  if (range.min == 0.0f && range.max == 0.0f) return current;  // all zero: RTN is exact

  GroupSearch<Round> search(p, w, round);
  search.set_codes(q, current.zero_point);
  double best_error = search.CodesError(current.scale);
  GroupQuantParams best = current;
  std::vector<float> best_codes;  // empty while the input stays best
  auto keep_if_better = [&](float scale, int32_t zero_point) {
    if (scale == 0.0f) return;
    const double e = search.CodesError(scale);
    if (e < best_error) {
      best_error = e;
      best = {scale, zero_point};
      best_codes.assign(search.codes().begin(), search.codes().end());
    }
  };

  // The best grid point's refit scale, with the nearest levels for it.
  const Candidate fitted = BestAsymmetricCandidate(p, dtype, range, search, current);
  search.SetRoundedCodes(fitted);
  keep_if_better(fitted.scale, fitted.zero_point);

  // Coordinate descent from there, then the refit of the moved codes, stored as they are and
  // with the nearest levels for the new scale.
  for (int pass = 0; pass < kDescentPasses; ++pass) search.CoordinateDescentPass(fitted);
  const float descended = search.RefitScale();
  keep_if_better(descended, fitted.zero_point);
  if (descended > 0) {
    search.SetRoundedCodes({descended, fitted.zero_point});
    keep_if_better(descended, fitted.zero_point);
  }

  if (best_codes.empty()) return current;
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = static_cast<int8_t>(static_cast<int32_t>(best_codes[i]) + best.zero_point);
  }
  return best;
}

}  // namespace

double GroupSquaredError(DType dtype, std::span<const float> w, std::span<const int8_t> q,
                         GroupQuantParams gq, std::span<const float> importance) {
  assert(q.size() == w.size() && (importance.empty() || importance.size() == w.size()));
  std::vector<float> dequantized(w.size());
  DequantizeGroup(dtype, q, gq, dequantized);
  double err = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double e = static_cast<double>(w[i]) - dequantized[i];
    err += (importance.empty() ? 1.0 : importance[i]) * e * e;
  }
  return err;
}

GroupQuantParams SearchGroup(const QuantParams& p, DType dtype, std::span<const float> w,
                             GroupQuantParams current, std::span<int8_t> q) {
  assert(q.size() == w.size() && current.scale != 0);
  if (p.symmetric) {
    return SearchSymmetricGroup(ScalarSearchKernels(), p, dtype, w, GroupMinMax(w), current, q);
  }
  switch (dtype) {
    case DType::kBF16:
      return SearchAsymmetricGroupWith(p, dtype, w, current, q, RoundBF16{});
    case DType::kF16:
      return SearchAsymmetricGroupWith(p, dtype, w, current, q, RoundF16{});
    default:
      return SearchAsymmetricGroupWith(p, dtype, w, current, q, RoundF32{});
  }
}

namespace {

// 1 / absmax of a group, or 0 (every importance 1) when that is not finite: an all-zero group, or
// one whose peak is so small (subnormal) that the reciprocal overflows.
float InversePeak(GroupRange range) {
  const float inv = 1.0f / std::max(range.max, -range.min);
  return std::isfinite(inv) ? inv : 0.0f;
}

}  // namespace

void GroupImportance(std::span<const float> w, std::span<float> imp) {
  assert(imp.size() == w.size());
  const float inv_peak = InversePeak(GroupMinMax(w));
  for (size_t i = 0; i < w.size(); ++i) imp[i] = PeakImportance(w[i], inv_peak);
}

float SumStripes(float (&stripes)[kSearchStripes]) {
  for (int h = kSearchStripes / 2; h >= 1; h /= 2) {
    for (int k = 0; k < h; ++k) stripes[k] += stripes[k + h];
  }
  return stripes[0];
}

namespace {

// ---- The scalar kernels (the reference of quant/simd/search_simd-inl.h).

void ScalarImportance(const float* w, size_t n, float inv_peak, float* imp) {
  for (size_t i = 0; i < n; ++i) imp[i] = PeakImportance(w[i], inv_peak);
}

void ScalarFitSums(const float* w, const float* imp, size_t n, const float* inv, size_t count,
                   float lo, float hi, float* cw, float* cc) {
  for (size_t k = 0; k < count; ++k) {
    float sum_cw[kSearchStripes] = {}, sum_cc[kSearchStripes] = {};
    for (size_t i = 0; i < n; ++i) {
      const float c = NearestCode(w[i], inv[k], lo, hi);
      const float t = c * imp[i];
      sum_cw[i % kSearchStripes] += t * w[i];
      sum_cc[i % kSearchStripes] += t * c;
    }
    cw[k] = SumStripes(sum_cw);
    cc[k] = SumStripes(sum_cc);
  }
}

void ScalarNearestErrors(DType dtype, const float* w, const float* imp, size_t n, const float* inv,
                         const float* scale, size_t count, float lo, float hi, float* err) {
  for (size_t k = 0; k < count; ++k) {
    float sum[kSearchStripes] = {};
    for (size_t i = 0; i < n; ++i) {
      const float e = w[i] - RoundToDType(NearestCode(w[i], inv[k], lo, hi) * scale[k], dtype);
      sum[i % kSearchStripes] += (e * e) * imp[i];
    }
    err[k] = SumStripes(sum);
  }
}

float ScalarCodesError(DType dtype, const float* w, const float* imp, const int8_t* q, size_t n,
                       float scale) {
  float err[kSearchStripes] = {};
  for (size_t i = 0; i < n; ++i) {
    const float e = w[i] - RoundToDType(static_cast<float>(q[i]) * scale, dtype);
    err[i % kSearchStripes] += (e * e) * imp[i];
  }
  return SumStripes(err);
}

void ScalarNearestCodes(const float* w, size_t n, float inv, float lo, float hi, int8_t* q) {
  for (size_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(NearestCode(w[i], inv, lo, hi));
}

// `s` rounded to the dtype when it is a usable scale: positive, finite, with a finite reciprocal
// (so that w * inv is never 0 * Inf); else 0.
float UsablePositiveScale(float s, DType dtype) {
  const float r = RoundToDType(s, dtype);
  return std::isfinite(r) && r > 0.0f && std::isfinite(1.0f / r) ? r : 0.0f;
}

}  // namespace

const SearchKernels& ScalarSearchKernels() {
  static constexpr SearchKernels kKernels{ScalarImportance, ScalarFitSums, ScalarNearestErrors,
                                          ScalarCodesError, ScalarNearestCodes};
  return kKernels;
}

GroupQuantParams SearchSymmetricGroup(const SearchKernels& kernels, const QuantParams& p,
                                      DType dtype, std::span<const float> w, GroupRange range,
                                      GroupQuantParams rtn, std::span<int8_t> q) {
  assert(p.symmetric && q.size() == w.size());
  if (range.min == 0.0f && range.max == 0.0f) return rtn;  // all zero: RTN is exact
  const size_t n = w.size();
  const float lo = static_cast<float>(QMin(p.bits)), hi = static_cast<float>(QMax(p.bits));
  // The format stores a positive weight_scale (the contract of the issue and of `check`; vLLM's GPU
  // kernels were never validated with negative ones). The candidates lie around absmax / 8 (-QMin),
  // below RTN's absmax / 7.5: a negative peak can then use the level -8 that RTN leaves almost
  // unused, and a positive one is clipped a little, which lowers the error of the rest.
  const float unit = std::max(range.max, -range.min) / -lo;
  // Per-thread scratch for the importance of each element: a group can be a whole row (channel-wise
  // schemes), and allocating per group would cost more than the search.
  thread_local std::vector<float> importance;
  importance.resize(n);
  kernels.importance(w.data(), n, InversePeak(range), importance.data());
  const float* imp = importance.data();

  // The grid, scored by s^2 sum(t c) - 2 s sum(t w): the weighted error of the codes with s, minus
  // sum(imp w w), in batches of kMaxSearchBatch candidates per pass.
  float scales[kSearchGridSize], invs[kSearchGridSize];
  size_t count = 0;
  for (float factor : kSearchGrid) {
    const float s = UsablePositiveScale(unit * factor, dtype);
    if (s != 0.0f) scales[count] = s, invs[count] = 1.0f / s, ++count;
  }
  if (count == 0) return rtn;
  float cw[kSearchGridSize], cc[kSearchGridSize];
  for (size_t first = 0; first < count; first += kMaxSearchBatch) {
    kernels.fit_sums(w.data(), imp, n, invs + first, std::min(kMaxSearchBatch, count - first), lo,
                     hi, cw + first, cc + first);
  }
  size_t grid_best = 0;
  float best_score = 0;
  for (size_t k = 0; k < count; ++k) {
    const float score = scales[k] * (scales[k] * cc[k] - 2.0f * cw[k]);
    if (k == 0 || score < best_score) grid_best = k, best_score = score;
  }

  // The finalists: the best grid scale and the weighted least-squares refit of its codes.
  float finalists[2] = {scales[grid_best]}, finalist_invs[2] = {invs[grid_best]};
  size_t finalist_count = 1;
  const float refit =
      cc[grid_best] > 0 ? UsablePositiveScale(cw[grid_best] / cc[grid_best], dtype) : 0.0f;
  if (refit != 0.0f) {
    finalists[1] = refit, finalist_invs[1] = 1.0f / refit, finalist_count = 2;
  }
  float errors[2];
  kernels.nearest_errors(dtype, w.data(), imp, n, finalist_invs, finalists, finalist_count, lo, hi,
                         errors);

  // The exact errors decide; ties keep the earlier candidate (RTN first).
  const float rtn_error = kernels.codes_error(dtype, w.data(), imp, q.data(), n, rtn.scale);
  float best_error = rtn_error, best = 0;
  for (size_t k = 0; k < finalist_count; ++k) {
    if (errors[k] < best_error) best_error = errors[k], best = finalists[k];
  }
  if (best == 0.0f) return rtn;
  const GroupQuantParams found{best, 0};
  if (best_error > rtn_error * (1.0f - 0x1p-12f)) {
    // A float near-tie with RTN is settled in double, so that no group is ever worse than RTN.
    std::vector<int8_t> codes(n);
    kernels.nearest_codes(w.data(), n, 1.0f / best, lo, hi, codes.data());
    const std::span<const float> weights(imp, n);
    if (GroupSquaredError(dtype, w, codes, found, weights) >=
        GroupSquaredError(dtype, w, q, rtn, weights)) {
      return rtn;
    }
  }
  kernels.nearest_codes(w.data(), n, 1.0f / best, lo, hi, q.data());
  return found;
}

Status QuantizeRowsSearch(const QuantParams& p, DType dtype, const uint8_t* weight, int64_t rows,
                          int64_t cols, const RowBlockQuantOutput& out) {
  // RTN validates the input and writes the starting point every group is improved from.
  SPK_RETURN_IF_ERROR(QuantizeRowsRtn(p, dtype, weight, rows, cols, out));
  const int64_t width = GroupWidth(cols, p.group_size);
  const int64_t groups = GroupsPerRow(cols, p.group_size);
  const int64_t words = PackedWords(cols, p.bits);
  const size_t elem = DTypeBits(dtype) / 8;

  std::vector<float> row(static_cast<size_t>(cols));
  std::vector<int8_t> q(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    ConvertToFloat(dtype, weight + static_cast<size_t>(r * cols) * elem, row.data(), row.size());
    const std::span<int32_t> packed(out.packed + r * words, static_cast<size_t>(words));
    UnpackRow(p.bits, packed, q);
    for (int64_t j = 0; j < groups; ++j) {
      const size_t slot = static_cast<size_t>(r * groups + j);
      GroupQuantParams gq;
      ConvertToFloat(dtype, out.scales + slot * elem, &gq.scale, 1);
      gq.zero_point = out.zero_points != nullptr ? out.zero_points[slot] : 0;
      gq = SearchGroup(p, dtype, std::span(row).subspan(j * width, width), gq,
                       std::span(q).subspan(j * width, width));
      ConvertFromFloat(dtype, &gq.scale, out.scales + slot * elem, 1);
      if (out.zero_points != nullptr) out.zero_points[slot] = gq.zero_point;
    }
    PackRow(p.bits, q, packed);
  }
  return Status::Ok();
}

}  // namespace spk
