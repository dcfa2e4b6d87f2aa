#include "check/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "base/xml_escape.h"
#include "check/dequantize.h"
#include "checkpoint/family.h"
#include "checkpoint/quant_config.h"
#include "checkpoint/source.h"
#include "plot/svg_chart.h"
#include "quant/pack_quantized.h"
#include "quant/rtn.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

using Json = nlohmann::ordered_json;
constexpr std::string_view kPacked = kPackedSuffix;

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

std::string Leaf(const std::string& module) {
  size_t dot = module.rfind('.');
  return dot == std::string::npos ? module : module.substr(dot + 1);
}

struct Sums {
  double w2 = 0, e2 = 0, q2 = 0, wq = 0, max_abs = 0, y2 = 0, ye2 = 0;
  uint64_t clipped = 0, count = 0;
};

Result<LayerError> CompareModule(const SourceCheckpoint& src, const SourceCheckpoint& quantized,
                                 const std::string& module, const CheckpointScheme& scheme,
                                 const CompareOptions& options, Sums* total) {
  SPK_ASSIGN_OR_RETURN(auto reader, PackedModuleReader::Open(quantized, module, scheme));
  const QuantParams& qp = scheme.params;
  auto located = src.files.Find(module + ".weight");
  if (!located) {
    return Status::InvalidInput(fmt::format(
        "{}: no tensor '{}.weight' to compare with the quantized module; pass the checkpoint "
        "that was quantized",
        src.dir, module));
  }
  const TensorEntry& w_entry = *located->entry;
  if (w_entry.shape != std::vector<int64_t>{reader.rows(), reader.cols()} ||
      !IsQuantizableFloat(w_entry.dtype)) {
    return Status::InvalidInput(fmt::format(
        "{}: '{}.weight' is {} {}, the quantized module is [{}, {}]", src.dir, module,
        DTypeName(w_entry.dtype), ShapeToString(w_entry.shape), reader.rows(), reader.cols()));
  }
  const SafetensorsReader& w_reader = src.files.shard(located->shard);
  const int64_t rows = reader.rows(), cols = reader.cols();
  const int64_t gw = GroupWidth(cols, qp.group_size);
  const size_t samples = static_cast<size_t>(std::max(options.samples, 0));
  std::vector<float> x = RandomNormal(options.seed ^ Fnv1a(module), samples * cols);
  const uint64_t w_row_bytes = static_cast<uint64_t>(cols) * DTypeBits(w_entry.dtype) / 8;
  const float qmax = static_cast<float>(QMax(qp.bits)), qmin = static_cast<float>(QMin(qp.bits));

  Sums s;
  PackedModuleReader::RowBlock block;
  std::vector<uint8_t> w_bytes;
  std::vector<float> w, q;
  const int64_t step = RowsPerBlock(cols);
  for (int64_t r0 = 0; r0 < rows; r0 += step) {
    int64_t n = std::min(step, rows - r0);
    SPK_RETURN_IF_ERROR(reader.ReadRows(r0, n, &block));
    w_bytes.resize(static_cast<size_t>(n) * w_row_bytes);
    SPK_RETURN_IF_ERROR(w_reader.ReadTensorBytes(w_entry, r0 * w_row_bytes, w_bytes));
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
        s.clipped += t > qmax + 0.5f || t < qmin - 0.5f;
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

// JSON has no infinity: an exact layer's SNR is written as null.
Json Number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

// A fixed palette, one color per layer kind, in order of first appearance.
template <typename Kind>  // KindSummary or KindGain
std::string KindColor(const std::vector<Kind>& kinds, const std::string& kind) {
  static const char* const kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                         "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i].kind == kind) return kPalette[i % std::size(kPalette)];
  }
  return "#888888";
}

// The legend of a chart coloured by layer kind (KindColor).
template <typename Kind>  // KindSummary or KindGain
std::vector<plot::LegendEntry> KindLegend(const std::vector<Kind>& kinds) {
  std::vector<plot::LegendEntry> legend;
  for (const Kind& k : kinds) legend.push_back({k.kind, KindColor(kinds, k.kind)});
  return legend;
}

// A bar of a chart (plot/svg_chart.h) coloured by its layer kind.
plot::Bar KindBar(std::string label, double value, std::string color, std::string tooltip) {
  plot::Bar bar;
  bar.label = std::move(label);
  bar.value = value;
  bar.color = std::move(color);
  bar.tooltip = std::move(tooltip);
  return bar;
}

// The per-layer and per-kind charts of a report; `draw` is plot::BarChart (errors, from 0) or
// plot::DeviationChart (ratios, from 1).
struct ChartPair {
  std::string layers, kinds;
};
ChartPair LayerAndKindCharts(std::string (*draw)(const plot::ChartSpec&), const std::string& what,
                             const std::string& axis, std::vector<plot::Bar> layer_bars,
                             std::vector<plot::Bar> kind_bars,
                             std::vector<plot::LegendEntry> legend, const std::string& below = "",
                             const std::string& above = "") {
  return {draw({what + " per layer (model order)", axis, std::move(layer_bars), std::move(legend),
                below, above}),
          draw({what + " by layer type (mean)", axis, std::move(kind_bars), {}, below, above})};
}

// Layers in model order (layer index, then name), for the per-layer chart. `module_of` gives an
// item's LayerError (LayerError itself, or one side of a LayerGain).
template <typename T, typename ModuleOf>
std::vector<const T*> ModelOrder(const std::vector<T>& layers, ModuleOf module_of) {
  std::vector<const T*> out;
  for (const T& l : layers) out.push_back(&l);
  std::stable_sort(out.begin(), out.end(), [&](const T* a, const T* b) {
    const std::string &ma = module_of(*a).module, &mb = module_of(*b).module;
    auto ia = LayerIndex(ma).value_or(-1), ib = LayerIndex(mb).value_or(-1);
    return ia != ib ? ia < ib : ma < mb;
  });
  return out;
}

// The page around the reports' bodies: one stylesheet for both, no script.
std::string HtmlPage(const std::string& title, const std::string& body) {
  return fmt::format(R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>sparkulator compare: {}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
svg .title {{ font-weight: bold; font-size: 14px; }}
svg .label, svg .value {{ font-size: 11px; }}
.summary td {{ text-align: left; }}
</style></head><body>
{}</body></html>
)",
                     EscapeXml(title), body);
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

// One side of a layer in the two-output JSON.
Json SideJson(const LayerError& l) {
  return {{"rel_fro", l.rel_fro},
          {"snr_db", Number(l.snr_db)},
          {"output_rel_error", l.output_rel_error},
          {"sse", l.sse}};
}

// One output's totals in the two-output JSON.
Json TotalsJson(const CompareReport& r, bool with_paths) {
  Json j;
  if (with_paths) j["quantized"] = r.quantized;
  j["scheme"] = r.scheme;
  j["dense_tensors"] = r.dense_tensors;
  j["sse"] = r.total_sse;
  j["overall_rel_fro"] = r.overall_rel_fro;
  j["mean_snr_db"] = Number(r.mean_snr_db);
  j["min_cosine"] = r.min_cosine;
  j["mean_output_rel_error"] = r.mean_output_rel_error;
  return j;
}

std::string TotalsLine(const char* label, const CompareReport& r) {
  return fmt::format(
      "  {}: {} ({})\n      weight SSE {:.6g}, overall relative error {:.4f}, mean SNR {:.2f} dB, "
      "mean output error {:.4f}\n",
      label, r.quantized, r.scheme, r.total_sse, r.overall_rel_fro, r.mean_snr_db,
      r.mean_output_rel_error);
}

}  // namespace

Result<CompareReport> CompareCheckpoints(FileSystem* fs, const CompareOptions& options) {
  if (options.samples < 0) return Status::Usage("--samples must not be negative");
  SPK_ASSIGN_OR_RETURN(SourceCheckpoint src, OpenSourceCheckpoint(fs, options.source));
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
  for (const TensorMeta& t : quantized.tensors) {
    if (!t.name.ends_with(kPacked)) {
      const auto suffixes = scheme.scheme->codec->suffixes();
      bool aux = std::any_of(suffixes.begin(), suffixes.end(),
                             [&](std::string_view suffix) { return t.name.ends_with(suffix); });
      report.dense_tensors += !aux;
      continue;
    }
    std::string module = t.name.substr(0, t.name.size() - kPacked.size());
    SPK_ASSIGN_OR_RETURN(LayerError l,
                         CompareModule(src, quantized, module, scheme, options, &total));
    report.layers.push_back(std::move(l));
  }
  Summarize(&report, total);
  return report;
}

Json CompareReportToJson(const CompareReport& r, bool with_paths) {
  Json layers = Json::array();
  for (const LayerError& l : r.layers) {
    layers.push_back({{"module", l.module},
                      {"kind", l.kind},
                      {"shape", {l.out, l.in}},
                      {"rel_fro", l.rel_fro},
                      {"snr_db", Number(l.snr_db)},
                      {"cosine", l.cosine},
                      {"max_abs", l.max_abs},
                      {"clipped_fraction", l.clipped_fraction},
                      {"output_rel_error", l.output_rel_error}});
  }
  Json kinds = Json::array();
  for (const KindSummary& k : r.kinds) {
    kinds.push_back({{"kind", k.kind},
                     {"layers", k.layers},
                     {"mean_rel_fro", k.mean_rel_fro},
                     {"mean_snr_db", Number(k.mean_snr_db)},
                     {"mean_output_rel_error", k.mean_output_rel_error}});
  }
  Json out;
  if (with_paths) {
    out["source"] = r.source;
    out["quantized"] = r.quantized;
  }
  out["scheme"] = r.scheme;
  out["summary"] = {{"layers", r.layers.size()},
                    {"dense_tensors", r.dense_tensors},
                    {"overall_rel_fro", r.overall_rel_fro},
                    {"mean_snr_db", Number(r.mean_snr_db)},
                    {"min_cosine", r.min_cosine},
                    {"mean_output_rel_error", r.mean_output_rel_error},
                    {"worst_layer", r.layers.empty() ? "" : r.layers.front().module}};
  out["by_kind"] = kinds;
  out["layers"] = layers;
  return out;
}

std::string RenderCompareReport(const CompareReport& r, size_t top) {
  std::string out = fmt::format(
      "{} vs {} ({})\n{} quantized layers; overall relative error {:.4f}, mean SNR {:.2f} dB, "
      "min cosine {:.6f}, mean output error {:.4f}\n\nworst layers:\n",
      r.quantized, r.source, r.scheme, r.layers.size(), r.overall_rel_fro, r.mean_snr_db,
      r.min_cosine, r.mean_output_rel_error);
  out += fmt::format("  {:<48} {:>9} {:>8} {:>9} {:>9} {:>8} {:>9}\n", "module", "rel_err",
                     "snr_db", "cosine", "max_abs", "clipped", "out_err");
  for (size_t i = 0; i < r.layers.size() && i < top; ++i) {
    const LayerError& l = r.layers[i];
    out += fmt::format("  {:<48} {:>9.5f} {:>8.2f} {:>9.6f} {:>9.5f} {:>8.5f} {:>9.5f}\n", l.module,
                       l.rel_fro, l.snr_db, l.cosine, l.max_abs, l.clipped_fraction,
                       l.output_rel_error);
  }
  out += "\nby layer type:\n";
  for (const KindSummary& k : r.kinds) {
    out += fmt::format("  {:<16} {:>4} layers  rel_err {:.5f}  snr {:.2f} dB  out_err {:.5f}\n",
                       k.kind, k.layers, k.mean_rel_fro, k.mean_snr_db, k.mean_output_rel_error);
  }
  return out;
}

std::string CompareReportHtml(const CompareReport& r) {
  std::vector<plot::Bar> layer_bars;
  for (const LayerError* l : ModelOrder(
           r.layers, [](const LayerError& l) -> auto& { return l; })) {
    layer_bars.push_back(
        KindBar(l->module, l->rel_fro, KindColor(r.kinds, l->kind),
                fmt::format("{}: rel err {:.5f}, SNR {:.2f} dB, output err {:.5f}", l->module,
                            l->rel_fro, l->snr_db, l->output_rel_error)));
  }
  std::vector<plot::Bar> kind_bars;
  for (const KindSummary& k : r.kinds) {
    kind_bars.push_back(KindBar(
        k.kind, k.mean_rel_fro, KindColor(r.kinds, k.kind),
        fmt::format("{}: {} layers, mean rel err {:.5f}", k.kind, k.layers, k.mean_rel_fro)));
  }
  std::string rows;
  for (const LayerError& l : r.layers) {
    rows += fmt::format(
        "<tr><td>{}</td><td>{}&times;{}</td><td>{:.5f}</td><td>{:.2f}</td><td>{:.6f}</td>"
        "<td>{:.5f}</td><td>{:.5f}</td><td>{:.5f}</td></tr>\n",
        EscapeXml(l.module), l.out, l.in, l.rel_fro, l.snr_db, l.cosine, l.max_abs,
        l.clipped_fraction, l.output_rel_error);
  }
  ChartPair charts = LayerAndKindCharts(
      plot::BarChart, "relative error", "relative error ||W - Q|| / ||W|| (unitless)",
      std::move(layer_bars), std::move(kind_bars), KindLegend(r.kinds));
  return HtmlPage(
      r.quantized,
      fmt::format(
          R"(<h1>Quantization error: {title}</h1>
<table class="summary">
<tr><td>source</td><td>{source}</td></tr>
<tr><td>quantized</td><td>{quantized}</td></tr>
<tr><td>scheme</td><td>{scheme}</td></tr>
<tr><td>quantized layers</td><td>{layers}</td></tr>
<tr><td>overall relative error</td><td>{overall:.5f}</td></tr>
<tr><td>mean SNR</td><td>{snr:.2f} dB</td></tr>
<tr><td>min cosine similarity</td><td>{cosine:.6f}</td></tr>
<tr><td>mean output error (Y = X W<sup>T</sup>)</td><td>{out_err:.5f}</td></tr>
<tr><td>worst layer</td><td>{worst}</td></tr>
</table>
<h2>Error per layer</h2>
<figure id="per-layer">{layer_chart}</figure>
<h2>Error by layer type</h2>
<figure id="by-kind">{kind_chart}</figure>
<h2>Layers, worst first</h2>
<table><tr><th>module</th><th>shape</th><th>rel. error</th><th>SNR dB</th><th>cosine</th>
<th>max abs</th><th>clipped</th><th>output error</th></tr>
{rows}</table>
)",
          fmt::arg("title", EscapeXml(r.quantized)), fmt::arg("source", EscapeXml(r.source)),
          fmt::arg("quantized", EscapeXml(r.quantized)), fmt::arg("scheme", EscapeXml(r.scheme)),
          fmt::arg("layers", r.layers.size()), fmt::arg("overall", r.overall_rel_fro),
          fmt::arg("snr", r.mean_snr_db), fmt::arg("cosine", r.min_cosine),
          fmt::arg("out_err", r.mean_output_rel_error),
          fmt::arg("worst", EscapeXml(r.layers.empty() ? "" : r.layers.front().module)),
          fmt::arg("layer_chart", charts.layers), fmt::arg("kind_chart", charts.kinds),
          fmt::arg("rows", rows)));
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

Result<GainReport> CompareGain(FileSystem* fs, const CompareOptions& options,
                               const std::string& quantized2) {
  SPK_ASSIGN_OR_RETURN(CompareReport q, CompareCheckpoints(fs, options));
  CompareOptions second = options;
  second.quantized = quantized2;
  SPK_ASSIGN_OR_RETURN(CompareReport q2, CompareCheckpoints(fs, second));
  return JoinCompareReports(std::move(q), std::move(q2));
}

Json GainReportToJson(const GainReport& g, bool with_paths) {
  Json layers = Json::array();
  for (const LayerGain& l : g.layers) {
    layers.push_back({{"module", l.q.module},
                      {"kind", l.q.kind},
                      {"shape", {l.q.out, l.q.in}},
                      {"q", SideJson(l.q)},
                      {"q2", SideJson(l.q2)},
                      {"sse_ratio", Number(l.sse_ratio)},
                      {"output_se_ratio", Number(l.output_se_ratio)}});
  }
  Json kinds = Json::array();
  for (const KindGain& k : g.kinds) {
    kinds.push_back({{"kind", k.kind},
                     {"layers", k.layers},
                     {"sse", k.sse},
                     {"sse2", k.sse2},
                     {"sse_ratio", Number(k.sse_ratio)}});
  }
  Json out;
  if (with_paths) out["source"] = g.q.source;
  out["q"] = TotalsJson(g.q, with_paths);
  out["q2"] = TotalsJson(g.q2, with_paths);
  out["summary"] = {{"layers", g.layers.size()},
                    {"sse_ratio", Number(g.sse_ratio)},
                    {"layers_better", g.layers_better},
                    {"layers_worse", g.layers_worse},
                    {"largest_gain_layer", g.layers.empty() ? "" : g.layers.front().q.module},
                    {"least_gain_layer", g.layers.empty() ? "" : g.layers.back().q.module}};
  out["by_kind"] = kinds;
  out["layers"] = layers;
  return out;
}

std::string RenderGainReport(const GainReport& g, size_t top) {
  std::string out = fmt::format("two quantized outputs of {}\n", g.q.source);
  out += TotalsLine("Q ", g.q);
  out += TotalsLine("Q2", g.q2);
  out += fmt::format(
      "weight SSE Q2 / Q: {:.4f} ({} layers; Q2 closer on {}, further on {})\n\n"
      "layers, largest gain (smallest Q2/Q) first:\n",
      g.sse_ratio, g.layers.size(), g.layers_better, g.layers_worse);
  out +=
      fmt::format("  {:<48} {:>9} {:>9} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9}\n", "module", "rel_err",
                  "rel_err2", "snr_db", "snr_db2", "out_err", "out_err2", "sse_Q2/Q", "out_Q2/Q");
  for (size_t i = 0; i < g.layers.size() && i < top; ++i) {
    const LayerGain& l = g.layers[i];
    out += fmt::format(
        "  {:<48} {:>9.5f} {:>9.5f} {:>7.2f} {:>7.2f} {:>9.5f} {:>9.5f} {:>9.4f} {:>9.4f}\n",
        l.q.module, l.q.rel_fro, l.q2.rel_fro, l.q.snr_db, l.q2.snr_db, l.q.output_rel_error,
        l.q2.output_rel_error, l.sse_ratio, l.output_se_ratio);
  }
  out += "\nby layer type (weight SSE Q2 / Q):\n";
  for (const KindGain& k : g.kinds) {
    out += fmt::format("  {:<16} {:>4} layers  {:.4f}\n", k.kind, k.layers, k.sse_ratio);
  }
  return out;
}

std::string GainReportHtml(const GainReport& g) {
  std::vector<plot::Bar> layer_bars;
  for (const LayerGain* l : ModelOrder(
           g.layers, [](const LayerGain& l) -> auto& { return l.q; })) {
    layer_bars.push_back(
        KindBar(l->q.module, l->sse_ratio, KindColor(g.kinds, l->q.kind),
                fmt::format("{}: weight SSE Q2/Q {:.4f}, output error squared Q2/Q {:.4f}",
                            l->q.module, l->sse_ratio, l->output_se_ratio)));
  }
  std::vector<plot::Bar> kind_bars;
  for (const KindGain& k : g.kinds) {
    kind_bars.push_back(KindBar(
        k.kind, k.sse_ratio, KindColor(g.kinds, k.kind),
        fmt::format("{}: {} layers, weight SSE Q2/Q {:.4f}", k.kind, k.layers, k.sse_ratio)));
  }
  std::string rows;
  for (const LayerGain& l : g.layers) {
    rows += fmt::format(
        "<tr><td>{}</td><td>{}&times;{}</td><td>{:.5f}</td><td>{:.5f}</td><td>{:.2f}</td>"
        "<td>{:.2f}</td><td>{:.5f}</td><td>{:.5f}</td><td>{:.4f}</td><td>{:.4f}</td></tr>\n",
        EscapeXml(l.q.module), l.q.out, l.q.in, l.q.rel_fro, l.q2.rel_fro, l.q.snr_db, l.q2.snr_db,
        l.q.output_rel_error, l.q2.output_rel_error, l.sse_ratio, l.output_se_ratio);
  }
  auto totals_row = [](const char* label, const CompareReport& r) {
    return fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.6g}</td><td>{:.5f}</td><td>{:.2f} dB</td>"
        "<td>{:.5f}</td></tr>\n",
        label, EscapeXml(r.quantized), EscapeXml(r.scheme), r.total_sse, r.overall_rel_fro,
        r.mean_snr_db, r.mean_output_rel_error);
  };
  ChartPair charts = LayerAndKindCharts(
      plot::DeviationChart, "weight SSE Q2 / Q", "weight SSE ratio Q2 / Q, change from 1 (%)",
      std::move(layer_bars), std::move(kind_bars), KindLegend(g.kinds), "Q2 closer", "Q2 further");
  return HtmlPage(
      g.q2.quantized + " vs " + g.q.quantized,
      fmt::format(
          R"(<h1>Gain of Q2 over Q</h1>
<p>source: {source}</p>
<table class="summary">
<tr><th></th><th>checkpoint</th><th>scheme</th><th>weight SSE</th><th>overall rel. error</th>
<th>mean SNR</th><th>mean output error</th></tr>
{q}{q2}</table>
<p>weight SSE Q2 / Q: <b>{ratio:.4f}</b> over {layers} layers; Q2 closer on {better}, further on
{worse}. Below 1 (the dashed line) Q2 is closer to the source.</p>
<h2>Weight SSE Q2 / Q per layer</h2>
<figure id="gain-per-layer">{layer_chart}</figure>
<h2>Weight SSE Q2 / Q by layer type</h2>
<figure id="gain-by-kind">{kind_chart}</figure>
<h2>Layers, largest gain first</h2>
<table><tr><th>module</th><th>shape</th><th>rel. error Q</th><th>rel. error Q2</th>
<th>SNR dB Q</th><th>SNR dB Q2</th><th>output error Q</th><th>output error Q2</th>
<th>weight SSE Q2/Q</th><th>output error&sup2; Q2/Q</th></tr>
{rows}</table>
)",
          fmt::arg("source", EscapeXml(g.q.source)), fmt::arg("q", totals_row("Q", g.q)),
          fmt::arg("q2", totals_row("Q2", g.q2)), fmt::arg("ratio", g.sse_ratio),
          fmt::arg("layers", g.layers.size()), fmt::arg("better", g.layers_better),
          fmt::arg("worse", g.layers_worse), fmt::arg("layer_chart", charts.layers),
          fmt::arg("kind_chart", charts.kinds), fmt::arg("rows", rows)));
}

}  // namespace spk
