#include "compare/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "base/strings.h"
#include "model/quant_config.h"
#include "model/quantized_modules.h"
#include "quant/float_formats.h"
#include "source/module_reader.h"
#include "source/source.h"
#include "source/source_decode.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

// splitmix64: a tiny, portable generator, so the random inputs are the same everywhere.
struct SplitMix64 {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>((Next() >> 11) + 1) * 0x1.0p-53; }  // (0, 1]
};

// N(0, 1) samples by Box-Muller.
std::vector<float> RandomNormal(uint64_t seed, size_t n) {
  SplitMix64 rng{seed};
  std::vector<float> out(n);
  for (size_t i = 0; i < n; i += 2) {
    double r = std::sqrt(-2.0 * std::log(rng.Uniform()));
    double theta = 2.0 * M_PI * rng.Uniform();
    out[i] = static_cast<float>(r * std::cos(theta));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(theta));
  }
  return out;
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return h;
}

// Beyond these, w / scale + zero_point was clipped by more than half of the last step: the
// integer range +-0.5, or the largest FP8 E4M3 / FP4 E2M1 value plus half its step (448 + 16,
// 6 + 1).
struct ClipRange {
  float low, high;
};
ClipRange ClipRangeOf(const QuantScheme& scheme) {
  if (scheme.type == WeightType::kInt) {
    return {static_cast<float>(QMin(scheme.bits)) - 0.5f,
            static_cast<float>(QMax(scheme.bits)) + 0.5f};
  }
  const float top = scheme.bits == 8 ? kFp8E4M3Max + 16.0f : kFp4E2M1Max + 1.0f;
  return {-top, top};
}

struct Sums {
  double w2 = 0, e2 = 0, q2 = 0, wq = 0, max_abs = 0, y2 = 0, ye2 = 0;
  uint64_t clipped = 0, count = 0;
};

Result<LayerError> CompareModule(const SourceCheckpoint& src, const SourceCheckpoint& quantized,
                                 const std::string& module, const CheckpointScheme& scheme,
                                 const CompareOptions& options, Sums* total) {
  SPK_ASSIGN_OR_RETURN(auto reader, QuantizedModuleReader::Open(quantized, module, scheme));
  const QuantParams& qp = scheme.params;
  // The source's weight as quantize read it: a split expert, or a pre-quantized source's decode.
  const std::optional<size_t> w_index = FindSourceTensor(src, module + ".weight");
  if (!w_index) {
    return Status::InvalidInput(fmt::format(
        "{}: no tensor '{}.weight' to compare with the quantized module; pass the checkpoint "
        "that was quantized",
        src.dir, module));
  }
  const TensorMeta& w_entry = src.tensors[*w_index];
  if (w_entry.shape != std::vector<int64_t>{reader.rows(), reader.cols()} ||
      !IsQuantizableFloat(w_entry.dtype)) {
    return Status::InvalidInput(fmt::format(
        "{}: '{}.weight' is {} {}, the quantized module is [{}, {}]", src.dir, module,
        DTypeName(w_entry.dtype), ShapeToString(w_entry.shape), reader.rows(), reader.cols()));
  }
  const int64_t rows = reader.rows(), cols = reader.cols();
  const int64_t gw = GroupWidth(cols, qp.group_size);
  const size_t samples = static_cast<size_t>(std::max(options.samples, 0));
  std::vector<float> x = RandomNormal(options.seed ^ Fnv1a(module), samples * cols);
  const uint64_t w_row_bytes = static_cast<uint64_t>(cols) * DTypeBits(w_entry.dtype) / 8;
  const ClipRange clip = ClipRangeOf(*scheme.scheme);

  Sums s;
  QuantizedModuleReader::RowBlock block;
  std::vector<uint8_t> w_bytes;
  std::vector<float> w, q;
  const int64_t step = RowsPerBlock(cols, reader.row_alignment());
  for (int64_t r0 = 0; r0 < rows; r0 += step) {
    int64_t n = std::min(step, rows - r0);
    SPK_RETURN_IF_ERROR(reader.ReadRows(r0, n, &block));
    w_bytes.resize(static_cast<size_t>(n) * w_row_bytes);
    SPK_RETURN_IF_ERROR(ReadSourceRows(src, *w_index, r0, n, w_bytes));
    w.resize(static_cast<size_t>(n * cols));
    q.resize(w.size());
    ConvertToFloat(w_entry.dtype, w_bytes.data(), w.data(), w.size());
    ConvertToFloat(reader.dtype(), block.bytes.data(), q.data(), q.size());
    for (int64_t r = 0; r < n; ++r) {
      const float* wr = &w[r * cols];
      const float* qr = &q[r * cols];
      for (int64_t c = 0; c < cols; ++c) {
        double a = wr[c], b = qr[c], e = a - b;
        s.w2 += a * a;
        s.e2 += e * e;
        s.q2 += b * b;
        s.wq += a * b;
        s.max_abs = std::max(s.max_abs, std::abs(e));
        size_t g = static_cast<size_t>(r * reader.groups() + c / gw);
        float scale = block.scales[g];
        float zp = block.zero_points.empty() ? 0.0f : static_cast<float>(block.zero_points[g]);
        float t = wr[c] / scale + zp;
        s.clipped += t > clip.high || t < clip.low;
      }
      for (size_t k = 0; k < samples; ++k) {
        const float* xk = &x[k * cols];
        double y = 0, yq = 0;
        for (int64_t c = 0; c < cols; ++c) {
          y += static_cast<double>(xk[c]) * wr[c];
          yq += static_cast<double>(xk[c]) * qr[c];
        }
        s.y2 += y * y;
        s.ye2 += (y - yq) * (y - yq);
      }
    }
    s.count += static_cast<uint64_t>(n * cols);
  }
  LayerError l;
  l.module = module;
  l.kind = Leaf(module);
  l.out = rows;
  l.in = cols;
  l.rel_fro = s.w2 > 0 ? std::sqrt(s.e2 / s.w2) : 0.0;
  l.snr_db = s.e2 > 0 ? 10.0 * std::log10(s.w2 / s.e2) : std::numeric_limits<double>::infinity();
  l.cosine = s.w2 > 0 && s.q2 > 0 ? s.wq / std::sqrt(s.w2 * s.q2) : 1.0;
  l.max_abs = s.max_abs;
  l.clipped_fraction = s.count ? static_cast<double>(s.clipped) / s.count : 0.0;
  l.output_rel_error = s.y2 > 0 ? std::sqrt(s.ye2 / s.y2) : 0.0;
  l.sse = s.e2;
  total->w2 += s.w2;
  total->e2 += s.e2;
  return l;
}

void Summarize(CompareReport* r, const Sums& total) {
  std::stable_sort(r->layers.begin(), r->layers.end(),
                   [](const LayerError& a, const LayerError& b) {
                     return a.rel_fro != b.rel_fro ? a.rel_fro > b.rel_fro : a.module < b.module;
                   });
  r->overall_rel_fro = total.w2 > 0 ? std::sqrt(total.e2 / total.w2) : 0.0;
  r->total_sse = total.e2;
  std::map<std::string, KindSummary> kinds;
  size_t finite_snr = 0;
  for (const LayerError& l : r->layers) {
    KindSummary& k = kinds[l.kind];
    k.kind = l.kind;
    k.layers++;
    k.mean_rel_fro += l.rel_fro;
    k.mean_output_rel_error += l.output_rel_error;
    if (std::isfinite(l.snr_db)) {
      k.mean_snr_db += l.snr_db;
      r->mean_snr_db += l.snr_db;
      ++finite_snr;
    }
    r->min_cosine = std::min(r->min_cosine, l.cosine);
    r->mean_output_rel_error += l.output_rel_error;
  }
  if (!r->layers.empty()) r->mean_output_rel_error /= r->layers.size();
  if (finite_snr) r->mean_snr_db /= finite_snr;
  for (auto& [name, k] : kinds) {
    k.mean_rel_fro /= k.layers;
    k.mean_snr_db /= k.layers;
    k.mean_output_rel_error /= k.layers;
    r->kinds.push_back(k);
  }
  std::stable_sort(
      r->kinds.begin(), r->kinds.end(), [](const KindSummary& a, const KindSummary& b) {
        return a.mean_rel_fro != b.mean_rel_fro ? a.mean_rel_fro > b.mean_rel_fro : a.kind < b.kind;
      });
}

// A ratio of squared errors b / a: 1 when both are exact, +inf when only a is.
double SquaredErrorRatio(double b, double a) {
  if (a > 0) return b / a;
  return b > 0 ? std::numeric_limits<double>::infinity() : 1.0;
}

Status ModuleOnlyIn(const std::string& module, const std::string& in, const std::string& not_in,
                    size_t count) {
  return Status::InvalidInput(fmt::format(
      "{}: module '{}' is quantized there but not in {}{}; compare two outputs of the same "
      "source quantized with the same ignore list",
      in, module, not_in, count > 1 ? fmt::format(" (and {} more)", count - 1) : ""));
}

using ByModule = std::map<std::string, const LayerError*>;

ByModule IndexByModule(const CompareReport& r) {
  ByModule out;
  for (const LayerError& l : r.layers) out[l.module] = &l;
  return out;
}

// The first module (by name) of `from` that `in` lacks, and how many it lacks.
std::pair<std::string, size_t> FirstMissing(const ByModule& from, const ByModule& in) {
  std::pair<std::string, size_t> out;
  for (const auto& [module, l] : from) {
    if (in.contains(module)) continue;
    if (!out.second++) out.first = module;
  }
  return out;
}

bool LargerGain(double ratio_a, const std::string& name_a, double ratio_b,
                const std::string& name_b) {
  return ratio_a != ratio_b ? ratio_a < ratio_b : name_a < name_b;
}

}  // namespace

Result<CompareReport> CompareCheckpoints(const RunContext& run, const CompareOptions& options) {
  FileSystem* fs = run.fs;
  if (options.samples < 0) return Status::Usage("--samples must not be negative");
  // The source as quantize read it: experts split, a pre-quantized source decoded.
  SPK_ASSIGN_OR_RETURN(SourceCheckpoint src, OpenDenseSource(fs, options.source));
  SPK_ASSIGN_OR_RETURN(SourceCheckpoint quantized, OpenSourceCheckpoint(fs, options.quantized));
  if (!quantized.config.has_quantization_config) {
    return Status::InvalidInput(fmt::format(
        "{}/config.json has no quantization_config: pass the source first, then the quantized "
        "checkpoint(s)",
        quantized.dir));
  }
  SPK_ASSIGN_OR_RETURN(CheckpointScheme scheme,
                       SchemeFromConfig(quantized.dir + "/config.json", quantized.config));
  CompareReport report;
  report.source = src.dir;
  report.quantized = quantized.dir;
  report.scheme = SchemeLabel(*scheme.scheme, scheme.params.group_size);
  Sums total;
  const WeightCodec& codec = *scheme.scheme->codec;
  auto has = [&](const std::string& name) { return quantized.files.Find(name).has_value(); };
  for (const TensorMeta& t : quantized.tensors) {
    auto module = QuantizedModuleOf(codec, t.name, t.dtype, has);
    if (!module) {
      report.dense_tensors += !IsQuantAuxName(codec, t.name);
      continue;
    }
    SPK_ASSIGN_OR_RETURN(LayerError l,
                         CompareModule(src, quantized, *module, scheme, options, &total));
    report.layers.push_back(std::move(l));
  }
  Summarize(&report, total);
  return report;
}

Result<GainReport> JoinCompareReports(CompareReport q, CompareReport q2) {
  ByModule first = IndexByModule(q), second = IndexByModule(q2);
  if (auto [module, count] = FirstMissing(first, second); count) {
    return ModuleOnlyIn(module, q.quantized, q2.quantized, count);
  }
  if (auto [module, count] = FirstMissing(second, first); count) {
    return ModuleOnlyIn(module, q2.quantized, q.quantized, count);
  }
  GainReport g;
  std::map<std::string, KindGain> kinds;
  for (const LayerError& l : q.layers) {
    const LayerError& l2 = *second.at(l.module);
    double out = l.output_rel_error, out2 = l2.output_rel_error;
    g.layers.push_back(
        {l, l2, SquaredErrorRatio(l2.sse, l.sse), SquaredErrorRatio(out2 * out2, out * out)});
    g.layers_better += g.layers.back().sse_ratio < 1;
    g.layers_worse += g.layers.back().sse_ratio > 1;
    KindGain& k = kinds[l.kind];
    k.kind = l.kind;
    k.layers++;
    k.sse += l.sse;
    k.sse2 += l2.sse;
  }
  std::stable_sort(g.layers.begin(), g.layers.end(), [](const LayerGain& a, const LayerGain& b) {
    return LargerGain(a.sse_ratio, a.q.module, b.sse_ratio, b.q.module);
  });
  for (auto& [name, k] : kinds) {
    k.sse_ratio = SquaredErrorRatio(k.sse2, k.sse);
    g.kinds.push_back(k);
  }
  std::stable_sort(g.kinds.begin(), g.kinds.end(), [](const KindGain& a, const KindGain& b) {
    return LargerGain(a.sse_ratio, a.kind, b.sse_ratio, b.kind);
  });
  g.sse_ratio = SquaredErrorRatio(q2.total_sse, q.total_sse);
  g.q = std::move(q);
  g.q2 = std::move(q2);
  return g;
}

Result<GainReport> CompareGain(const RunContext& run, const CompareOptions& options,
                               const std::string& quantized2) {
  SPK_ASSIGN_OR_RETURN(CompareReport q, CompareCheckpoints(run, options));
  CompareOptions second = options;
  second.quantized = quantized2;
  SPK_ASSIGN_OR_RETURN(CompareReport q2, CompareCheckpoints(run, second));
  return JoinCompareReports(std::move(q), std::move(q2));
}

}  // namespace spk
