#include "quant/search.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/float_convert.h"

namespace spk {

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

GroupQuantParams SearchGroup(const QuantParams& p, DType dtype, std::span<const float> w,
                             GroupQuantParams current, std::span<int8_t> q) {
  assert(q.size() == w.size() && current.scale != 0);
  return SearchGroupWith(ScalarSearchKernels(), p, dtype, w, GroupMinMax(w), current, q);
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

void ScalarFitSums(const float* w, const float* imp, size_t n, const float* inv, const float* lo,
                   const float* hi, size_t count, float* cw, float* cc) {
  for (size_t k = 0; k < count; ++k) {
    float sum_cw[kSearchStripes] = {}, sum_cc[kSearchStripes] = {};
    for (size_t i = 0; i < n; ++i) {
      const float c = NearestCode(w[i], inv[k], lo[k], hi[k]);
      const float t = c * imp[i];
      sum_cw[i % kSearchStripes] += t * w[i];
      sum_cc[i % kSearchStripes] += t * c;
    }
    cw[k] = SumStripes(sum_cw);
    cc[k] = SumStripes(sum_cc);
  }
}

void ScalarNearestErrors(DType dtype, const float* w, const float* imp, size_t n, const float* inv,
                         const float* scale, const float* lo, const float* hi, size_t count,
                         float* err) {
  for (size_t k = 0; k < count; ++k) {
    float sum[kSearchStripes] = {};
    for (size_t i = 0; i < n; ++i) {
      const float c = NearestCode(w[i], inv[k], lo[k], hi[k]);
      const float e = w[i] - RoundToDType(c * scale[k], dtype);
      sum[i % kSearchStripes] += (e * e) * imp[i];
    }
    err[k] = SumStripes(sum);
  }
}

float ScalarCodesError(DType dtype, const float* w, const float* imp, const int8_t* q, size_t n,
                       float scale, int32_t zero_point) {
  float err[kSearchStripes] = {};
  for (size_t i = 0; i < n; ++i) {
    const float c = static_cast<float>(static_cast<int32_t>(q[i]) - zero_point);
    const float e = w[i] - RoundToDType(c * scale, dtype);
    err[i % kSearchStripes] += (e * e) * imp[i];
  }
  return SumStripes(err);
}

void ScalarNearestCodes(const float* w, size_t n, float inv, float lo, float hi, int32_t zero_point,
                        int8_t* q) {
  for (size_t i = 0; i < n; ++i) {
    q[i] = static_cast<int8_t>(static_cast<int32_t>(NearestCode(w[i], inv, lo, hi)) + zero_point);
  }
}

// `s` rounded to the dtype when it is a usable scale: positive, finite, with a finite reciprocal
// (so that w * inv is never 0 * Inf); else 0.
float UsablePositiveScale(float s, DType dtype) {
  const float r = RoundToDType(s, dtype);
  return std::isfinite(r) && r > 0.0f && std::isfinite(1.0f / r) ? r : 0.0f;
}

// The value `steps` representable values of `dtype` away from the positive value s of the dtype
// (a usable scale or 0 when that is not one).
float NextScale(float s, DType dtype, int steps) {
  if (dtype == DType::kF32) {
    return UsablePositiveScale(std::bit_cast<float>(std::bit_cast<uint32_t>(s) + steps), dtype);
  }
  uint16_t bits;
  ConvertFromFloat(dtype, &s, reinterpret_cast<uint8_t*>(&bits), 1);
  bits = static_cast<uint16_t>(bits + steps);
  float next;
  ConvertToFloat(dtype, reinterpret_cast<const uint8_t*>(&bits), &next, 1);
  return UsablePositiveScale(next, dtype);
}

// A candidate of the search: a scale (a usable value of the dtype) and a zero point.
constexpr size_t kMaxFinalists = 2 * kMaxSearchBatch;
struct Candidates {
  GroupQuantParams at[kMaxFinalists];
  size_t count = 0;
  void Add(float scale, int32_t zero_point) {
    assert(count < kMaxFinalists);
    if (scale != 0.0f) at[count++] = {scale, zero_point};
  }
};

// The kernels' per-candidate arguments for candidates [first, first + count) of `c`.
struct Batch {
  float scale[kMaxSearchBatch], inv[kMaxSearchBatch], lo[kMaxSearchBatch], hi[kMaxSearchBatch];
  Batch(const QuantParams& p, const Candidates& c, size_t first, size_t count) {
    for (size_t k = 0; k < count; ++k) {
      const GroupQuantParams& g = c.at[first + k];
      scale[k] = g.scale;
      inv[k] = 1.0f / g.scale;
      lo[k] = static_cast<float>(QMin(p.bits) - g.zero_point);
      hi[k] = static_cast<float>(QMax(p.bits) - g.zero_point);
    }
  }
};

// The symmetric finalists: the best grid scale around absmax / 8 and its refit (header comment).
Candidates SymmetricFinalists(const SearchKernels& kernels, const QuantParams& p, DType dtype,
                              std::span<const float> w, const float* imp, GroupRange range) {
  // The format stores a positive weight_scale (the contract of the issue and of `check`; vLLM's GPU
  // kernels were never validated with negative ones). The candidates lie around absmax / 8 (-QMin):
  // a negative peak can then use the level -8 that RTN's absmax / 7.5 leaves almost unused.
  const float unit = std::max(range.max, -range.min) / static_cast<float>(-QMin(p.bits));
  Candidates grid;
  for (float factor : kSearchGrid) grid.Add(UsablePositiveScale(unit * factor, dtype), 0);
  Candidates finalists;
  if (grid.count == 0) return finalists;
  // Scored by s^2 sum(t c) - 2 s sum(t w): the weighted error of the codes with s, minus
  // sum(imp w w).
  const Batch b(p, grid, 0, grid.count);
  float cw[kMaxSearchBatch], cc[kMaxSearchBatch];
  kernels.fit_sums(w.data(), imp, w.size(), b.inv, b.lo, b.hi, grid.count, cw, cc);
  size_t best = 0;
  float best_score = 0;
  for (size_t k = 0; k < grid.count; ++k) {
    const float score = b.scale[k] * (b.scale[k] * cc[k] - 2.0f * cw[k]);
    if (k == 0 || score < best_score) best = k, best_score = score;
  }
  finalists.Add(b.scale[best], 0);
  finalists.Add(cc[best] > 0 ? UsablePositiveScale(cw[best] / cc[best], dtype) : 0.0f, 0);
  return finalists;
}

// The asymmetric finalists: the refit of the best shrunk range, its neighbouring scales and zero
// points (header comment).
Candidates AsymmetricFinalists(const SearchKernels& kernels, const QuantParams& p, DType dtype,
                               std::span<const float> w, const float* imp, GroupRange range) {
  Candidates grid;
  for (float factor : kAsymmetricGrid) {
    const GroupQuantParams g =
        ComputeGroupScale(p, dtype, {range.min * factor, range.max * factor});
    if (UsablePositiveScale(g.scale, dtype) == g.scale) grid.Add(g.scale, g.zero_point);
  }
  Candidates finalists;
  if (grid.count == 0) return finalists;
  // Scored by (sum c w)^2 / sum c c: what the least-squares scale of the codes removes from
  // sum(w w); larger is better.
  const Batch b(p, grid, 0, grid.count);
  float cw[kMaxSearchBatch], cc[kMaxSearchBatch];
  kernels.fit_sums(w.data(), imp, w.size(), b.inv, b.lo, b.hi, grid.count, cw, cc);
  size_t best = grid.count;
  float best_score = 0;
  for (size_t k = 0; k < grid.count; ++k) {
    if (!(cc[k] > 0) || !(cw[k] > 0)) continue;
    const float score = cw[k] * cw[k] / cc[k];
    if (best == grid.count || score > best_score) best = k, best_score = score;
  }
  if (best == grid.count) return finalists;
  const float refit = UsablePositiveScale(cw[best] / cc[best], dtype);
  const float scale = refit != 0.0f ? refit : b.scale[best];
  const int32_t zp = grid.at[best].zero_point;
  finalists.Add(scale, zp);
  finalists.Add(NextScale(scale, dtype, -1), zp);
  finalists.Add(NextScale(scale, dtype, 1), zp);
  // A zero point only moves the code range [QMin - zp, QMax - zp]: give the extra level to the
  // end that clips more.
  const float inv = 1.0f / scale;
  const float over_max = range.max * inv - static_cast<float>(QMax(p.bits) - zp);
  const float over_min = static_cast<float>(QMin(p.bits) - zp) - range.min * inv;
  const int32_t moved = over_max > over_min ? zp - 1 : zp + 1;
  if (moved >= QMin(p.bits) && moved <= QMax(p.bits)) finalists.Add(scale, moved);
  return finalists;
}

}  // namespace

const SearchKernels& ScalarSearchKernels() {
  static constexpr SearchKernels kKernels{ScalarImportance, ScalarFitSums, ScalarNearestErrors,
                                          ScalarCodesError, ScalarNearestCodes};
  return kKernels;
}

GroupQuantParams SearchGroupWith(const SearchKernels& kernels, const QuantParams& p, DType dtype,
                                 std::span<const float> w, GroupRange range, GroupQuantParams rtn,
                                 std::span<int8_t> q) {
  assert(q.size() == w.size());
  if (range.min == 0.0f && range.max == 0.0f) return rtn;  // all zero: RTN is exact
  const size_t n = w.size();
  // Per-thread scratch for the weight of each element in the objective: a group can be a whole row
  // (channel-wise schemes), and allocating per group would cost more than the search.
  thread_local std::vector<float> importance;
  importance.resize(n);
  kernels.importance(w.data(), n, InversePeak(range), importance.data());
  const float* imp = importance.data();
  const Candidates finalists = p.symmetric ? SymmetricFinalists(kernels, p, dtype, w, imp, range)
                                           : AsymmetricFinalists(kernels, p, dtype, w, imp, range);
  if (finalists.count == 0) return rtn;
  float errors[kMaxFinalists];
  for (size_t first = 0; first < finalists.count; first += kMaxSearchBatch) {
    const size_t count = std::min(kMaxSearchBatch, finalists.count - first);
    const Batch b(p, finalists, first, count);
    kernels.nearest_errors(dtype, w.data(), imp, n, b.inv, b.scale, b.lo, b.hi, count,
                           errors + first);
  }

  // The exact errors decide; ties keep the earlier candidate (RTN first).
  const float rtn_error =
      kernels.codes_error(dtype, w.data(), imp, q.data(), n, rtn.scale, rtn.zero_point);
  float best_error = rtn_error;
  size_t best = finalists.count;
  for (size_t k = 0; k < finalists.count; ++k) {
    if (errors[k] < best_error) best_error = errors[k], best = k;
  }
  if (best == finalists.count) return rtn;
  const GroupQuantParams found = finalists.at[best];
  const Batch b(p, finalists, best, 1);
  if (best_error > rtn_error * (1.0f - 0x1p-12f)) {
    // A float near-tie with RTN is settled in double, so that no group is ever worse than RTN.
    std::vector<int8_t> codes(n);
    kernels.nearest_codes(w.data(), n, b.inv[0], b.lo[0], b.hi[0], found.zero_point, codes.data());
    const std::span<const float> weights(imp, n);
    if (GroupSquaredError(dtype, w, codes, found, weights) >=
        GroupSquaredError(dtype, w, q, rtn, weights)) {
      return rtn;
    }
  }
  kernels.nearest_codes(w.data(), n, b.inv[0], b.lo[0], b.hi[0], found.zero_point, q.data());
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
