// A data-free scale search for the same pack-quantized formats RTN writes (`--method search`).
//
// RTN (quant/rtn.h) derives each group's scale from its min/max and rounds every weight to the
// nearest level. The format only stores integers q and a scale (and a zero point for asymmetric
// schemes), and vLLM/compressed-tensors reconstructs w' = R(R(q - zp) * scale) (R = rounding to the
// weight dtype), so any scale that is a nonzero finite value of the dtype and any q in
// [QMin(bits), QMax(bits)] is a valid checkpoint. The search picks, per group, a scale (and q)
// with a smaller error than RTN's, w' computed exactly that way, the error weighted towards the
// group's largest weights: sum importance(w) (w - w')^2 (kPeakWeight below says why).
//
// Both kinds of scheme share one structure (SearchGroupWith): a few candidates (scale, zero point),
// scored in one fused pass over the group, then the exact errors of a few finalists against RTN's.
//
// Symmetric schemes (the W4A16/W8A16 presets):
//   - the unit scale absmax / 8 (-QMin at 4 bits): the level range [-8, 7] is lopsided, and RTN's
//     absmax / 7.5 leaves the level -8 nearly unused; scales stay positive (the format's contract:
//     `check` rejects negative scales and vLLM's GPU kernels were not validated with them);
//   - a grid of kSearchGridSize scales, kSearchGrid[k] x the unit scale, each rounded to the
//     dtype, scored by the weighted error of its nearest-level codes c with the scale s itself,
//     computed from two sums: s^2 sum(t c) - 2 s sum(t w), t = importance c (the dtype rounding of
//     c s is ignored here; the finalists' errors below are exact);
//   - the finalists: the best grid scale and the weighted least-squares refit s = sum(t w) /
//     sum(t c) of its codes, rounded.
// Asymmetric schemes (w4a16-asym, w8a16-asym):
//   - a grid of kAsymmetricGridSize ranges, the group's min and max shrunk by kAsymmetricGrid[k]
//     (as llm-compressor's mse observer does), each turned into a scale and zero point by RTN's own
//     ComputeGroupScale, scored by how well the nearest-level codes c = q - zp fit the group with
//     their weighted least-squares scale: (sum t w)^2 / sum t c, t = importance c (llama.cpp's
//     make_qx_quants, weighted);
//   - the finalists: the refit s = sum(t w) / sum(t c) of the best grid point's codes, rounded to
//     the dtype, its neighbours one dtype step either side (at 8 bits in BF16 the dequantized
//     value c s is rounded to 8 significant bits, and which way each c s rounds depends on the last
//     bits of s: the neighbours often fit much better), and the refit with the zero point moved by
//     one towards the end of the range that clips more.
// For both, the exact errors of RTN and of the finalists (nearest-level codes, the dequantization
// rounded to the dtype as vLLM does) decide; ties keep the earlier one (RTN first), so a group
// never gets worse than RTN in its objective.
// Every per-element loop is one of five SearchKernels (sums over kSearchStripes fixed stripes
// i % 16, added up in a fixed tree), so the Highway kernels (quant/simd/search_simd.h) compute the
// very same floats in any vector width and the search logic is shared, not duplicated.
// The result is deterministic (no randomness, no dependence on threads or row blocks).
//
// Buffers are caller-owned; nothing is retained. Functions are thread-safe for distinct outputs.
// Errors follow quant/rtn.h: InvalidInput for bad data, naming the row and column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/status.h"
#include "quant/params.h"
#include "quant/rtn.h"
#include "tensor/dtype.h"

namespace spk {

// The exact reconstruction error of a group: sum over i of importance[i] (w[i] - R(R(q[i] - zp) *
// scale))^2, in double, with the dequantization of DequantizeGroup; an empty `importance` weighs
// every element 1. REQUIRES: q.size() == w.size(), importance empty or of the same size.
double GroupSquaredError(DType dtype, std::span<const float> w, std::span<const int8_t> q,
                         GroupQuantParams gq, std::span<const float> importance = {});

// Searches a better quantization of one group, starting from a valid one (`current` with codes `q`,
// e.g. RTN's). On return `q` and the returned params hold the best quantization found; its
// GroupSquaredError weighted by GroupImportance is never larger than that of the input. The
// returned scale is a positive finite value of `dtype` (when the input's is), with zero point 0 for
// symmetric schemes and in [QMin(bits), QMax(bits)] for asymmetric ones. It is SearchGroupWith with
// the scalar kernels. REQUIRES: w finite, q.size() == w.size(), q within the bit range,
// current.scale nonzero and finite, ValidateParams(p).ok(), IsQuantizableFloat(dtype).
GroupQuantParams SearchGroup(const QuantParams& p, DType dtype, std::span<const float> w,
                             GroupQuantParams current, std::span<int8_t> q);

// ---- The search, split into per-group logic and per-element kernels.

// The grid of the symmetric search, as multiples of absmax / -QMin(bits). 1.0 maps a negative peak
// onto QMin exactly; factors below 1 clip the peak, factors above 1 spend resolution to reconstruct
// the large weights better (chosen with the weighted objective below on a causal LM's real layer
// inputs and on synthetic groups: docs/quality.md).
inline constexpr int kSearchGridSize = 4;
inline constexpr float kSearchGrid[kSearchGridSize] = {0.92f, 0.98f, 1.04f, 1.10f};

// The objective: sum over the group of importance(w) (w - w')^2 with importance(w) = 1 +
// kPeakWeight (w / absmax)^4. Plain squared error lowers the weight error most by clipping a
// group's largest weights, but in trained LLMs the largest weights of a group sit on the input
// channels that carry most of the activation energy far more often than chance, so the layer's
// output error and the model's KL divergence got worse than RTN's (docs/quality.md). Weighting the
// large weights keeps them close and still lowers the error of the rest.
inline constexpr float kPeakWeight = 16.0f;

// The grid of the asymmetric search: factors the group's min and max are shrunk by (1 is RTN's
// range). Mild shrinking, chosen with the weighted objective on the causal LM of
// bench/quality/kl.py (docs/quality.md): the mse observer's deeper 0.93 and 0.86 clipped the
// large weights and, even weighted, did worse there.
inline constexpr int kAsymmetricGridSize = 3;
inline constexpr float kAsymmetricGrid[kAsymmetricGridSize] = {1.0f, 0.97f, 0.94f};

// Sums over a group are accumulated in kSearchStripes partial sums (element i goes to stripe
// i % kSearchStripes, in increasing i) and the stripes are added in a fixed tree: stripe k +=
// stripe k + h for h = 8, 4, 2, 1. Any vector width that divides 16 computes exactly the same
// float.
inline constexpr int kSearchStripes = 16;
float SumStripes(float (&stripes)[kSearchStripes]);  // adds in the tree, destroys the stripes

// The per-element steps the kernels share (the SIMD kernels apply the same operations to lanes and
// use these for tails). `inv` is 1 / scale; lo, hi the range of the codes c = q - zero_point,
// QMin - zero_point and QMax - zero_point, as floats.
inline float NearestCode(float w, float inv, float lo, float hi) {
  const float x = w * inv;
  const float clamped = x < lo ? lo : (x > hi ? hi : x);
  constexpr float kMagic = 0x1.8p23f;  // round half to even for |x| < 2^22
  return (clamped + kMagic) - kMagic;
}

// importance(w) of the objective above, with inv_peak = 1 / absmax: r = w inv_peak, r2 = r r,
// 1 + kPeakWeight (r2 r2), in that order of float operations. inv_peak 0 gives 1 (plain error).
inline float PeakImportance(float w, float inv_peak) {
  const float r = w * inv_peak;
  const float r2 = r * r;
  return 1.0f + kPeakWeight * (r2 * r2);
}

// The weights of the search's objective for a group: PeakImportance of each element with
// 1 / absmax (all ones when that reciprocal is not finite: an all-zero or subnormal group).
// REQUIRES: imp.size() == w.size().
void GroupImportance(std::span<const float> w, std::span<float> imp);

// The per-element loops of the search. n is any size; every sum is striped as above; `imp` holds
// each element's weight in the objective (the `importance` kernel's output; all ones for the plain
// error). The kernels that score candidates take up to kMaxSearchBatch of them at once (one pass
// over w, and independent sums the CPU can overlap); candidate k, with scale[k], inv[k] =
// 1 / scale[k] and code range [lo[k], hi[k]], gets the results it would get alone. All are pure
// functions of their inputs. REQUIRES: every inv finite and nonzero, w finite, lo <= hi,
// 1 <= count <= kMaxSearchBatch.
inline constexpr size_t kMaxSearchBatch = 4;
static_assert(kSearchGridSize <= static_cast<int>(kMaxSearchBatch));
static_assert(kAsymmetricGridSize <= static_cast<int>(kMaxSearchBatch));
struct SearchKernels {
  // imp[i] = PeakImportance(w[i], inv_peak).
  void (*importance)(const float* w, size_t n, float inv_peak, float* imp);
  // cw[k] = sum(t w), cc[k] = sum(t c) with t = c imp[i] over the nearest codes c =
  // NearestCode(w[i], inv[k], lo[k], hi[k]): the weighted least-squares sums.
  void (*fit_sums)(const float* w, const float* imp, size_t n, const float* inv, const float* lo,
                   const float* hi, size_t count, float* cw, float* cc);
  // err[k] = sum (e e) imp[i], e = w[i] - R(c scale[k]), over the nearest codes c for candidate k,
  // R = RoundToDType(., dtype).
  void (*nearest_errors)(DType dtype, const float* w, const float* imp, size_t n, const float* inv,
                         const float* scale, const float* lo, const float* hi, size_t count,
                         float* err);
  // sum (e e) imp[i], e = w[i] - R((q[i] - zero_point) scale), for given codes.
  float (*codes_error)(DType dtype, const float* w, const float* imp, const int8_t* q, size_t n,
                       float scale, int32_t zero_point);
  // q[i] = NearestCode(w[i], inv, lo, hi) + zero_point.
  void (*nearest_codes)(const float* w, size_t n, float inv, float lo, float hi, int32_t zero_point,
                        int8_t* q);
};

// The plain scalar kernels: the reference the SIMD ones are tested against.
const SearchKernels& ScalarSearchKernels();

// The search of one group with the given kernels (see the top of this file). `range` is
// GroupMinMax(w); `rtn` and `q` the RTN result, replaced when something is better.
// REQUIRES: the REQUIRES of SearchGroup.
GroupQuantParams SearchGroupWith(const SearchKernels& kernels, const QuantParams& p, DType dtype,
                                 std::span<const float> w, GroupRange range, GroupQuantParams rtn,
                                 std::span<int8_t> q);

// QuantizeRowsRtn with the search: the same inputs, outputs and errors (it validates and quantizes
// with RTN first, then improves every group with SearchGroup). Rows are independent, as for RTN.
// This is the plain reference; quant/simd/search_simd.h has the fast one (same bytes).
Status QuantizeRowsSearch(const QuantParams& p, DType dtype, const uint8_t* weight, int64_t rows,
                          int64_t cols, const RowBlockQuantOutput& out);

}  // namespace spk
