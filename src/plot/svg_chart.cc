#include "plot/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "base/xml_escape.h"

namespace spk::plot {
namespace {

// Layout in px: names, plot, then the value labels (at the bar's end for magnitudes, in their own
// column for deviations, so that they never run over the "1" line or each other).
constexpr double kNames = 250, kGap = 10, kPlot = 420, kRight = 280, kRow = 18;
constexpr double kTitleY = 20, kLegendY = 40;

double Left() { return kNames + kGap; }
double Width() { return Left() + kPlot + kRight; }
// How far an interval may reach past the points before it is clipped at the axis' end: a
// 2-sample interval of +2000% would otherwise squash every bar into the "1" line.
constexpr double kIntervalReach = 2;

std::string TickText(double v, double step, bool percent) {
  int decimals = step >= 1 ? 0 : step >= 0.1 ? 1 : step >= 0.01 ? 2 : 3;
  if (!percent) return fmt::format("{:.{}f}", v, std::max(0, decimals));
  if (std::fabs(v) < step / 2) return "0%";
  return fmt::format("{:+.{}f}%", v, decimals);
}

struct Frame {
  Ticks ticks;
  double top = 0;     // y of the first row
  double bottom = 0;  // y of the axis
  double X(double v) const { return Left() + (v - ticks.lo) / (ticks.hi - ticks.lo) * kPlot; }
};

// Title, legend, grid, tick labels and axis label; the rows go between frame.top and .bottom.
std::string DrawFrame(const ChartSpec& spec, const Frame& f, bool percent, double height) {
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0:.0f} {1:.0f}\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\" "
      "aria-label=\"{2}\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"4\" y=\"{3}\" font-size=\"14\" font-weight=\"bold\">{2}</text>\n",
      Width(), height, EscapeXml(spec.title), kTitleY);
  double lx = 4;
  for (const LegendEntry& e : spec.legend) {
    svg += fmt::format(
        "<rect class=\"legend\" x=\"{:.0f}\" y=\"{:.0f}\" width=\"11\" height=\"11\" "
        "fill=\"{}\"/>"
        "<text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>\n",
        lx, kLegendY - 10, e.color, lx + 15, kLegendY, EscapeXml(e.label));
    lx += 30 + 6.5 * static_cast<double>(e.label.size());
  }
  for (double v : f.ticks.values) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.0f}\" x2=\"{0:.1f}\" y2=\"{2:.0f}\" stroke=\"#e3e3e3\"/>"
        "<text x=\"{0:.1f}\" y=\"{3:.0f}\" text-anchor=\"middle\">{4}</text>\n",
        f.X(v), f.top - 4, f.bottom, f.bottom + 14, TickText(v, f.ticks.step, percent));
  }
  svg += fmt::format(
      "<line x1=\"{:.0f}\" y1=\"{:.0f}\" x2=\"{:.0f}\" y2=\"{:.0f}\" stroke=\"#333\"/>\n"
      "<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}</text>\n",
      Left(), f.bottom, Left() + kPlot, f.bottom, Left() + kPlot / 2, f.bottom + 30,
      EscapeXml(spec.axis_label));
  return svg;
}

std::string RowLabel(const Bar& b, double y) {
  return fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", kNames - 6,
                     y + kRow - 5, EscapeXml(b.label));
}

// Draws every bar with `draw(bar, y)` inside a frame fitted to [lo, hi].
std::string Chart(const ChartSpec& spec, double lo, double hi, bool percent, bool deviation,
                  const std::function<std::string(const Bar&, const Frame&, double)>& draw) {
  Frame f;
  f.ticks = NiceTicks(lo, hi, /*include_zero=*/true);
  f.top = (spec.legend.empty() ? kLegendY - 10 : kLegendY + 8) + (deviation ? 16 : 0);
  f.bottom = f.top + kRow * static_cast<double>(spec.bars.size()) + 4;
  double height = f.bottom + 40;
  std::string svg = DrawFrame(spec, f, percent, height);
  if (deviation) {
    double x1 = f.X(0);
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.0f}\" x2=\"{0:.1f}\" y2=\"{2:.0f}\" stroke=\"#333\" "
        "stroke-dasharray=\"4 3\"/>\n"
        "<text x=\"{3:.1f}\" y=\"{4:.0f}\" text-anchor=\"end\" fill=\"#555\">&#8592; {5}</text>"
        "<text x=\"{6:.1f}\" y=\"{4:.0f}\" fill=\"#555\">{7} &#8594;</text>\n",
        x1, f.top - 14, f.bottom, x1 - 6, f.top - 4, EscapeXml(spec.below_one), x1 + 6,
        EscapeXml(spec.above_one));
  }
  for (size_t i = 0; i < spec.bars.size(); ++i) {
    double y = f.top + kRow * static_cast<double>(i);
    svg += RowLabel(spec.bars[i], y) + draw(spec.bars[i], f, y) + "\n";
  }
  return svg + "</svg>\n";
}

std::string NotAvailable(const Frame& f, double y) {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#888\">n/a</text>", f.X(0) + 4,
                     y + kRow - 5);
}

}  // namespace

Ticks NiceTicks(double lo, double hi, bool include_zero, int target_count) {
  if (include_zero) {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  if (!(hi > lo)) hi = lo + 1;
  double raw = (hi - lo) / std::max(1, target_count);
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power * 10;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  }
  Ticks t;
  t.step = step;
  t.lo = std::floor(lo / step + 1e-9) * step;
  t.hi = std::ceil(hi / step - 1e-9) * step;
  if (t.hi <= t.lo) t.hi = t.lo + step;
  for (double v = t.lo; v <= t.hi + step / 2; v += step)
    t.values.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return t;
}

std::string BarChart(const ChartSpec& spec) {
  double hi = 0;
  for (const Bar& b : spec.bars) {
    if (std::isfinite(b.value)) hi = std::max(hi, b.value);
  }
  return Chart(
      spec, 0, hi, /*percent=*/false, /*deviation=*/false,
      [](const Bar& b, const Frame& f, double y) {
        if (!std::isfinite(b.value)) return NotAvailable(f, y);
        double x = f.X(0), w = std::max(1.0, f.X(b.value) - x);
        return fmt::format(
            "<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.0f}\" "
            "fill=\"{}\"><title>{}</title></rect>"
            "<text x=\"{:.1f}\" y=\"{:.1f}\">{:.4g}</text>",
            x, y + 2, w, kRow - 4, b.color, EscapeXml(b.tooltip), x + w + 4, y + kRow - 5, b.value);
      });
}

std::string DeviationChart(const ChartSpec& spec) {
  auto pct = [](double ratio) { return (ratio - 1) * 100; };
  double lo = 0, hi = 0;  // the points' range first, then the intervals within reach of it
  for (const Bar& b : spec.bars) {
    if (!std::isfinite(b.value)) continue;
    lo = std::min(lo, pct(b.value));
    hi = std::max(hi, pct(b.value));
  }
  double reach = kIntervalReach * std::max(hi - lo, 1.0);
  double lo_limit = std::max(-100.0, lo - reach), hi_limit = hi + reach;
  for (const Bar& b : spec.bars) {
    if (!std::isfinite(b.value) || !b.has_ci) continue;
    lo = std::min(lo, std::max(lo_limit, pct(b.ci_low)));
    hi = std::max(hi, std::min(hi_limit, pct(b.ci_high)));
  }
  return Chart(spec, lo, hi, /*percent=*/true, /*deviation=*/true,
               [&](const Bar& b, const Frame& f, double y) {
                 if (!std::isfinite(b.value)) return NotAvailable(f, y);
                 double d = pct(b.value), x0 = f.X(0), x1 = f.X(d);
                 std::string s = fmt::format(
                     "<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                     "height=\"{:.0f}\" fill=\"{}\"><title>{}</title></rect>",
                     std::min(x0, x1), y + 3, std::max(1.0, std::fabs(x1 - x0)), kRow - 6, b.color,
                     EscapeXml(b.tooltip));
                 std::string text = fmt::format("{:.4f} ({:+.2f}%)", b.value, d);
                 if (b.has_ci) {
                   double l = pct(b.ci_low), h = pct(b.ci_high), cy = y + kRow / 2;
                   double cl = f.X(std::max(l, f.ticks.lo)), ch = f.X(std::min(h, f.ticks.hi));
                   s += fmt::format(
                       "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                       "stroke=\"#222\"/>",
                       cl, cy, ch, cy);
                   for (auto [x, clipped] : {std::pair{cl, l < f.ticks.lo}, {ch, h > f.ticks.hi}}) {
                     // A cap where the interval ends, an open end where the axis clips it.
                     s += clipped ? fmt::format(
                                        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\" "
                                        "fill=\"#222\"/>",
                                        x, cy)
                                  : fmt::format(
                                        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                                        "y2=\"{2:.1f}\" stroke=\"#222\"/>",
                                        x, cy - 4, cy + 4);
                   }
                   text += fmt::format(", 95% CI {:+.1f}% .. {:+.1f}%", l, h);
                 }
                 return s + fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>",
                                        Left() + kPlot + 10, y + kRow - 5, text);
               });
}

}  // namespace spk::plot
