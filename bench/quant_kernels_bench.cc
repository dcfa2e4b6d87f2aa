// Microbenchmarks of the quantizer kernels: each SIMD kernel of RTN (quant/simd/rtn_simd.h), of
// the scale search (quant/simd/search_simd.h) and the byte-format row quantizers
// (quant/simd/float_simd.h), best target of this CPU, beside its scalar reference, in bytes of BF16
// weight processed per second on one core.
// Run: build/bench/quant_kernels_bench [--benchmark_filter=...].
#include <benchmark/benchmark.h>

#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "quant/float_formats.h"
#include "quant/float_rows.h"
#include "quant/rtn.h"
#include "quant/search.h"
#include "quant/simd/float_simd.h"
#include "quant/simd/rtn_simd.h"
#include "quant/simd/search_simd.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

constexpr int64_t kCols = 4096;  // one row of a 4096-wide projection
constexpr int64_t kRows = 64;    // 512 KiB of BF16: stays in L2 like one pipeline block slice

std::vector<float> RandomFloats(size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> v(n);
  for (float& x : v) x = RoundToDType(normal(rng), DType::kBF16);
  return v;
}

std::vector<uint8_t> RandomBF16(size_t n) {
  const std::vector<float> v = RandomFloats(n);
  std::vector<uint8_t> bytes(2 * n);
  ConvertFromFloat(DType::kBF16, v.data(), bytes.data(), n);
  return bytes;
}

// bytes/s of BF16 input: 2 bytes per weight.
void SetWeights(benchmark::State& state, int64_t weights) {
  state.SetBytesProcessed(state.iterations() * weights * 2);
}

template <bool kSimd>
void BM_ConvertBF16ToFloat(benchmark::State& state) {
  const std::vector<uint8_t> in = RandomBF16(kCols);
  std::vector<float> out(kCols);
  for (auto _ : state) {
    if (kSimd) {
      simd::ConvertToFloat(DType::kBF16, in.data(), out.data(), kCols);
    } else {
      ConvertToFloat(DType::kBF16, in.data(), out.data(), kCols);
    }
    benchmark::DoNotOptimize(out.data());
  }
  SetWeights(state, kCols);
}

template <bool kSimd>
void BM_ConvertF16ToFloat(benchmark::State& state) {
  const std::vector<float> v = RandomFloats(kCols);
  std::vector<uint8_t> in(2 * kCols);
  ConvertFromFloat(DType::kF16, v.data(), in.data(), kCols);
  std::vector<float> out(kCols);
  for (auto _ : state) {
    if (kSimd) {
      simd::ConvertToFloat(DType::kF16, in.data(), out.data(), kCols);
    } else {
      ConvertToFloat(DType::kF16, in.data(), out.data(), kCols);
    }
    benchmark::DoNotOptimize(out.data());
  }
  SetWeights(state, kCols);
}

template <bool kSimd>
void BM_GroupMinMax(benchmark::State& state) {
  const std::vector<float> v = RandomFloats(kCols);
  for (auto _ : state) {
    for (int64_t g = 0; g < kCols; g += 128) {
      const std::span<const float> group(v.data() + g, 128);
      benchmark::DoNotOptimize(kSimd ? simd::GroupMinMax(group) : GroupMinMax(group));
    }
  }
  SetWeights(state, kCols);
}

template <bool kSimd>
void BM_GroupScales(benchmark::State& state) {
  const QuantParams p{4, false, 128};
  const std::vector<float> v = RandomFloats(2 * kCols);
  std::vector<float> mins(v.begin(), v.begin() + kCols), maxs(v.begin() + kCols, v.end());
  for (size_t i = 0; i < mins.size(); ++i) {
    if (mins[i] > maxs[i]) std::swap(mins[i], maxs[i]);
  }
  std::vector<float> scales(kCols);
  std::vector<int32_t> zps(kCols);
  for (auto _ : state) {
    if (kSimd) {
      simd::ComputeGroupScales(p, DType::kBF16, mins.data(), maxs.data(), kCols, scales.data(),
                               zps.data());
    } else {
      for (int64_t i = 0; i < kCols; ++i) {
        const GroupQuantParams gq = ComputeGroupScale(p, DType::kBF16, {mins[i], maxs[i]});
        scales[i] = gq.scale;
        zps[i] = gq.zero_point;
      }
    }
    benchmark::DoNotOptimize(scales.data());
  }
  // One scale per 128 weights: report the weights those scales cover.
  SetWeights(state, kCols * 128);
}

template <bool kSimd>
void BM_QuantizeGroup(benchmark::State& state) {
  const QuantParams p{4, true, 128};
  const std::vector<float> v = RandomFloats(kCols);
  std::vector<int8_t> q(kCols);
  const GroupQuantParams gq{RoundToDType(0.01f, DType::kBF16), 0};
  for (auto _ : state) {
    if (kSimd) {
      simd::QuantizeGroupWithScale(p, DType::kBF16, v, gq, q);
    } else {
      QuantizeGroupWithScale(p, DType::kBF16, v, gq, q);
    }
    benchmark::DoNotOptimize(q.data());
  }
  SetWeights(state, kCols);
}

template <bool kSimd>
void BM_PackRow4(benchmark::State& state) {
  std::vector<int8_t> q(kCols);
  for (int64_t i = 0; i < kCols; ++i) q[i] = static_cast<int8_t>(i % 16 - 8);
  std::vector<int32_t> words(PackedWords(kCols, 4));
  for (auto _ : state) {
    if (kSimd) {
      simd::PackRow(4, q, words);
    } else {
      PackRow(4, q, words);
    }
    benchmark::DoNotOptimize(words.data());
  }
  SetWeights(state, kCols);
}

// A row quantizer (RTN or search, scalar or SIMD) on a 4-bit, group-128 row block; the label names
// the target and the scheme. range(0) != 0: symmetric.
using RowQuantizer = Status (*)(const QuantParams&, DType, const uint8_t*, int64_t, int64_t,
                                const RowBlockQuantOutput&);
void RunRowQuantizer(benchmark::State& state, RowQuantizer quantize, const char* target) {
  const QuantParams p{4, state.range(0) != 0, 128};
  const std::vector<uint8_t> in = RandomBF16(kRows * kCols);
  std::vector<int32_t> packed(kRows * PackedWords(kCols, 4));
  std::vector<uint8_t> scales(kRows * kCols / 128 * 2);
  std::vector<int32_t> zps(kRows * kCols / 128);
  const RowBlockQuantOutput out{packed.data(), scales.data(), p.symmetric ? nullptr : zps.data()};
  for (auto _ : state) {
    const Status s = quantize(p, DType::kBF16, in.data(), kRows, kCols, out);
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    benchmark::DoNotOptimize(packed.data());
  }
  SetWeights(state, kRows * kCols);
  state.SetLabel(std::string(target) + (p.symmetric ? " w4a16" : " w4a16-asym"));
}

template <bool kSimd>
void BM_QuantizeRows(benchmark::State& state) {
  RunRowQuantizer(state, kSimd ? QuantizeRowsRtnFast : QuantizeRowsRtn,
                  kSimd ? simd::ActiveTargetName() : "scalar");
}

// The search's per-group kernels on 128-weight groups, as SearchGroupWith calls them: the weights,
// the fit sums of the four grid scales in one pass, the exact errors of two finalists.
template <bool kSimd>
void BM_SearchKernels(benchmark::State& state) {
  const SearchKernels& k = kSimd ? simd::ActiveSearchKernels() : ScalarSearchKernels();
  const std::vector<float> w = RandomFloats(kCols);
  std::vector<float> imp(kCols);
  const float unit = 0.06f / 8, inv_peak = 1 / 0.06f;
  float inv[kMaxSearchBatch], scale[kMaxSearchBatch], lo[kMaxSearchBatch], hi[kMaxSearchBatch];
  for (size_t c = 0; c < kMaxSearchBatch; ++c) {
    scale[c] = kSearchGrid[c] * unit, inv[c] = 1 / scale[c], lo[c] = -8, hi[c] = 7;
  }
  float cw[kMaxSearchBatch], cc[kMaxSearchBatch], err[kMaxSearchBatch];
  for (auto _ : state) {
    for (int64_t g = 0; g < kCols; g += 128) {
      k.importance(w.data() + g, 128, inv_peak, imp.data() + g);
      k.fit_sums(w.data() + g, imp.data() + g, 128, inv, lo, hi, kMaxSearchBatch, cw, cc);
      k.nearest_errors(DType::kBF16, w.data() + g, imp.data() + g, 128, inv, scale, lo, hi, 2, err);
      benchmark::DoNotOptimize(cw);
      benchmark::DoNotOptimize(err);
    }
  }
  SetWeights(state, kCols);
  state.SetLabel(kSimd ? simd::ActiveSearchTargetName() : "scalar");
}

// The whole search row pass (RTN, the search of every group, packing), w4a16 and w4a16-asym.
template <bool kSimd>
void BM_SearchRows(benchmark::State& state) {
  RunRowQuantizer(state, kSimd ? QuantizeRowsSearchFast : QuantizeRowsSearch,
                  kSimd ? simd::ActiveSearchTargetName() : "scalar");
}

// A byte-format row block (range(0) indexes kByteFormats), as the codecs run it.
struct ByteFormatCase {
  const char* name;
  ByteRowsLayout layout;
  QuantParams p;
};
constexpr ByteFormatCase kByteFormats[] = {
    {"fp8-dynamic", {ByteFormat::kFp8, 1}, {8, true, kChannelWise}},
    {"fp8-block", {ByteFormat::kFp8, 128}, {8, true, 128}},
    {"w8a8", {ByteFormat::kInt, 1}, {8, true, kChannelWise}},
    {"w4afp8", {ByteFormat::kInt, 1}, {4, true, 128}},
    {"mxfp8a16", {ByteFormat::kMxfp8, 1}, {8, true, 32}},
    {"nvfp4a16", {ByteFormat::kNvfp4, 1}, {4, true, 16}},
    {"mxfp4a16", {ByteFormat::kMxfp4, 1}, {4, true, 32}},
};

template <bool kSimd>
void BM_ByteRows(benchmark::State& state) {
  const ByteFormatCase& c = kByteFormats[state.range(0)];
  const int64_t rows = 128;  // one FP8 block band
  const std::vector<uint8_t> in = RandomBF16(rows * kCols);
  std::vector<uint8_t> values(rows * kCols), scales(rows * kCols * 2);
  const float gs = NvFp4GlobalScale(AbsMaxOf(DType::kBF16, in.data(), rows * kCols), DType::kBF16);
  const auto quantize = kSimd ? QuantizeByteRowsFast : QuantizeByteRows;
  for (auto _ : state) {
    const Status s = quantize(c.layout, c.p, DType::kBF16, in.data(), rows, kCols, gs,
                              {values.data(), scales.data()});
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    benchmark::DoNotOptimize(values.data());
  }
  SetWeights(state, rows * kCols);
  state.SetLabel(std::string(kSimd ? simd::FloatActiveTargetName() : "scalar") + " " + c.name);
}

// NVFP4's global-scale pass: the absmax of BF16 weights.
template <bool kSimd>
void BM_AbsMax(benchmark::State& state) {
  const std::vector<uint8_t> in = RandomBF16(kRows * kCols);
  for (auto _ : state) {
    benchmark::DoNotOptimize(kSimd ? simd::AbsMaxOf(DType::kBF16, in.data(), kRows * kCols)
                                   : AbsMaxOf(DType::kBF16, in.data(), kRows * kCols));
  }
  SetWeights(state, kRows * kCols);
}

BENCHMARK(BM_ConvertBF16ToFloat<false>);
BENCHMARK(BM_ConvertBF16ToFloat<true>);
BENCHMARK(BM_ConvertF16ToFloat<false>);
BENCHMARK(BM_ConvertF16ToFloat<true>);
BENCHMARK(BM_GroupMinMax<false>);
BENCHMARK(BM_GroupMinMax<true>);
BENCHMARK(BM_GroupScales<false>);
BENCHMARK(BM_GroupScales<true>);
BENCHMARK(BM_QuantizeGroup<false>);
BENCHMARK(BM_QuantizeGroup<true>);
BENCHMARK(BM_PackRow4<false>);
BENCHMARK(BM_PackRow4<true>);
BENCHMARK(BM_QuantizeRows<false>)->Arg(1)->Arg(0);
BENCHMARK(BM_QuantizeRows<true>)->Arg(1)->Arg(0);
BENCHMARK(BM_SearchKernels<false>);
BENCHMARK(BM_SearchKernels<true>);
BENCHMARK(BM_SearchRows<false>)->Arg(1)->Arg(0);
BENCHMARK(BM_SearchRows<true>)->Arg(1)->Arg(0);
BENCHMARK(BM_ByteRows<false>)->DenseRange(0, std::size(kByteFormats) - 1);
BENCHMARK(BM_ByteRows<true>)->DenseRange(0, std::size(kByteFormats) - 1);
BENCHMARK(BM_AbsMax<false>);
BENCHMARK(BM_AbsMax<true>);

}  // namespace
}  // namespace spk
