// SVG charts shared by the reports (compare --html, bench --svg, the model card): horizontal bar
// charts whose scale is fitted to the data, with labelled axes, units and a legend.
//
// Two kinds, for two kinds of number:
//   - BarChart: a magnitude (an error, a size): bars start at 0.
//   - DeviationChart: a ratio, whose interesting part is its distance from 1 (0.96 is "4% less"):
//     bars start at the "1" line and show ratio - 1 in percent, on an axis fitted to the smallest
//     and largest deviation, so a 0.5% difference is visible; confidence intervals reaching far
//     beyond the points are clipped at the axis' end (an open dot; the label has the numbers).
//     Value labels sit in a column right of the plot, away from the "1" line.
// A chart is a self-contained <svg> element (no script, no external style); each bar is a
// <rect class="bar">, each legend swatch a <rect class="legend">. Ownership: values in,
// a string out. Thread safety: pure functions. Error policy: cannot fail; non-finite values are
// drawn as "n/a" rows.
#pragma once

#include <string>
#include <vector>

namespace spk::plot {

// Axis ticks at 1, 2 or 5 times a power of ten, covering [lo, hi] (widened to include 0 when
// `include_zero`).
struct Ticks {
  double lo = 0, hi = 1, step = 1;
  std::vector<double> values;
};
Ticks NiceTicks(double lo, double hi, bool include_zero, int target_count = 6);

struct LegendEntry {
  std::string label, color;
};

struct Bar {
  std::string label;  // left of the bar
  double value = 0;   // BarChart: the magnitude; DeviationChart: the ratio (1 = no change)
  double ci_low = 0, ci_high = 0;  // DeviationChart only: a 95% interval of the ratio, if has_ci
  bool has_ci = false;
  std::string color = "#4e79a7";
  std::string tooltip;  // shown on hover (<title>)
};

struct ChartSpec {
  std::string title;
  std::string axis_label;  // with its unit, e.g. "relative error (||W - Q|| / ||W||)"
  std::vector<Bar> bars;
  std::vector<LegendEntry> legend;  // empty when colour means nothing
  // DeviationChart: what each side of the "1" line means, e.g. "Q2 closer" / "Q2 further".
  std::string below_one, above_one;
};

std::string BarChart(const ChartSpec& spec);
std::string DeviationChart(const ChartSpec& spec);

}  // namespace spk::plot
