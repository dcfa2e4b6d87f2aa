// The SVG plots of a bench results document (declared in bench/report.h): decode tok/s by prompt
// length per arm, and each arm's change against the baseline on a scale fitted to the data.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/json_at.h"
#include "base/xml_escape.h"
#include "bench/report.h"
#include "plot/svg_chart.h"

namespace spk::bench {
namespace {

using nlohmann::json;

// One colour per arm, in --arm order, in both panels.
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c",
                                   "#9467bd", "#ff7f0e", "#17becf"};
const char* ArmColor(size_t arm) { return kColors[arm % std::size(kColors)]; }

constexpr double kRateWidth = 720, kRateHeight = 440;

std::string RenderRateSvg(const json& results) {
  constexpr double kWidth = kRateWidth, kHeight = kRateHeight, kLeft = 70, kRight = 170, kTop = 40,
                   kBottom = 60;
  const json& arms = results["arms"];
  size_t cells = arms.empty() ? 0 : arms[0]["cells"].size();
  double y_max = 1;
  for (const json& arm : arms) {
    for (const json& cell : arm["cells"]) {
      const json &mean = FieldOrNull(cell, "mean_tok_s"), &sd = FieldOrNull(cell, "stdev_tok_s");
      if (!mean.is_number()) continue;
      double top = mean.get<double>() + (sd.is_number() ? sd.get<double>() : 0);
      y_max = std::max(y_max, top * 1.1);
    }
  }
  double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x_of = [&](size_t i) {
    return kLeft + plot_w * (static_cast<double>(i) + 0.5) / std::max<size_t>(cells, 1);
  };
  auto y_of = [&](double v) { return kTop + plot_h * (1 - v / y_max); };
  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{0}\" "
      "height=\"{1}\" viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\">Decode rate by prompt length (mean ± sample "
      "stdev)</text>\n",
      kWidth, kHeight, kLeft);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n",
                     kLeft, kTop, kTop + plot_h);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n",
                     kLeft, kTop + plot_h, kLeft + plot_w);
  plot::Ticks ticks = plot::NiceTicks(0, y_max, /*include_zero=*/true);
  y_max = ticks.hi;
  for (double v : ticks.values) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:.0f}</text>\n",
        kLeft, y_of(v), kLeft + plot_w, kLeft - 6, y_of(v) + 4, v);
  }
  for (size_t i = 0; i < cells; ++i) {
    svg +=
        fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x_of(i),
                    kTop + plot_h + 18, CellLabel(arms[0]["cells"][i]["prompt_tokens"]));
  }
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">prompt length (tokens)</text>\n",
      kLeft + plot_w / 2, kHeight - 15);
  svg += fmt::format(
      "<text transform=\"translate(18 {:.1f}) rotate(-90)\" text-anchor=\"middle\">decode "
      "rate (tokens/s)</text>\n",
      kTop + plot_h / 2);
  for (size_t a = 0; a < arms.size(); ++a) {
    const char* color = ArmColor(a);
    double offset = (static_cast<double>(a) - (static_cast<double>(arms.size()) - 1) / 2) * 6;
    std::string points;
    for (size_t i = 0; i < cells; ++i) {
      const json& cell = arms[a]["cells"][i];
      const json &mean_at = FieldOrNull(cell, "mean_tok_s"),
                 &sd_at = FieldOrNull(cell, "stdev_tok_s");
      if (!mean_at.is_number()) continue;
      double x = x_of(i) + offset, mean = mean_at.get<double>();
      points += fmt::format("{:.1f},{:.1f} ", x, y_of(mean));
      if (sd_at.is_number()) {
        double sd = sd_at.get<double>();
        svg += fmt::format(
            "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\"/>"
            "<line x1=\"{4:.1f}\" y1=\"{1:.1f}\" x2=\"{5:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\"/>"
            "<line x1=\"{4:.1f}\" y1=\"{2:.1f}\" x2=\"{5:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\"/>\n",
            x, y_of(mean - sd), y_of(mean + sd), color, x - 4, x + 4);
      }
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", x,
                         y_of(mean), color);
    }
    if (!points.empty()) {
      svg += fmt::format(
          "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n", points,
          color);
    }
    double ly = kTop + 10 + 20 * static_cast<double>(a);
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
        kLeft + plot_w + 15, ly - 10, color, kLeft + plot_w + 32, ly,
        EscapeXml(arms[a]["name"].get<std::string>()));
  }
  svg += "</svg>\n";
  return svg;
}

// The figure and its label of one comparison cell (or the whole comparison).
plot::Bar DeltaBar(const json& cmp, const std::string& where, size_t arm_index) {
  plot::Bar bar;
  bar.label =
      cmp["arm"].get<std::string>() + " vs " + cmp["baseline"].get<std::string>() + ", " + where;
  bar.color = ArmColor(arm_index);
  // The geometric mean of the paired ratios, the point its t interval belongs to (report.cc).
  const json &log_ratio = FieldOrNull(cmp, "log_ratio"), &low = FieldOrNull(cmp, "ci_low"),
             &high = FieldOrNull(cmp, "ci_high");
  bar.value = log_ratio.is_number() ? std::exp(log_ratio.get<double>()) : NAN;
  bar.has_ci = low.is_number() && high.is_number();
  if (bar.has_ci) {
    bar.ci_low = low.get<double>();
    bar.ci_high = high.get<double>();
  }
  bar.tooltip = bar.label;
  return bar;
}

}  // namespace

std::string RenderDeltaSvg(const json& results) {
  const json& comparisons = results["comparisons"];
  if (!comparisons.is_array() || comparisons.empty()) return "";
  plot::ChartSpec spec;
  spec.title = "Decode rate against the baseline (geometric mean of paired ratios, 95% CI)";
  spec.axis_label = "decode tok/s ratio to the baseline, change from 1 (%)";
  spec.below_one = "slower";
  spec.above_one = "faster";
  for (size_t c = 0; c < comparisons.size(); ++c) {
    const json& cmp = comparisons[c];
    for (const json& cell : cmp["cells"]) {
      json labelled = cell;
      labelled["arm"] = cmp["arm"];
      labelled["baseline"] = cmp["baseline"];
      std::string label = CellLabel(cell["prompt_tokens"]);
      spec.bars.push_back(
          DeltaBar(labelled, label == "prompts file" ? label : label + " tokens", c + 1));
    }
    spec.bars.push_back(DeltaBar(cmp, "all prompts", c + 1));
    spec.legend.push_back({cmp["arm"].get<std::string>(), ArmColor(c + 1)});
  }
  return plot::DeviationChart(spec);
}

std::string RenderSvg(const json& results) {
  std::string rate = RenderRateSvg(results), delta = RenderDeltaSvg(results);
  if (delta.empty()) return rate;
  // Both panels in one file, one above the other; the delta panel is no wider than 900 px.
  auto body = [](const std::string& svg) { return svg.substr(svg.find("<svg")); };
  size_t at = delta.find("height=\"") + 8;
  double delta_height = std::stod(delta.substr(at));
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"900\" height=\"{0:.0f}\" viewBox=\"0 0 900 {0:.0f}\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<g>{1}</g>\n<g transform=\"translate(0 {2:.0f})\">{3}</g>\n</svg>\n",
      kRateHeight + delta_height + 10, body(rate), kRateHeight + 10, body(delta));
}

}  // namespace spk::bench
