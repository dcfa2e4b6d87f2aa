#include "compare/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/xml_escape.h"
#include "plot/svg_chart.h"
#include "vllm/family.h"

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

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
