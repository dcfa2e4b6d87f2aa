#include "plot/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

namespace spk::plot {
namespace {

TEST(NiceTicks, CoversTheDataWithRoundSteps) {
  Ticks t = NiceTicks(-3.9, 0.5, /*include_zero=*/true);
  EXPECT_DOUBLE_EQ(t.step, 1);
  EXPECT_DOUBLE_EQ(t.lo, -4);
  EXPECT_DOUBLE_EQ(t.hi, 1);
  EXPECT_EQ(t.values.size(), 6u);
  Ticks small = NiceTicks(0.0012, 0.0093, /*include_zero=*/true);
  EXPECT_DOUBLE_EQ(small.step, 0.002);
  EXPECT_GE(small.hi, 0.0093);
  Ticks flat = NiceTicks(2, 2, /*include_zero=*/false);
  EXPECT_GT(flat.hi, flat.lo);
}

// The width of the first bar (<rect ... width="W" ...> after the background rect).
double FirstBarWidth(const std::string& svg) {
  std::smatch m;
  std::string rest = svg.substr(svg.find("<title>") - 200);
  std::regex width("<rect class=\"bar\" x=\"[-0-9.]+\" y=\"[-0-9.]+\" width=\"([0-9.]+)\"");
  EXPECT_TRUE(std::regex_search(rest, m, width));
  return std::stod(m[1]);
}

TEST(DeviationChart, DrawsTheDistanceFromOneOnAFittedScale) {
  ChartSpec spec{"gain",      "weight SSE ratio Q2/Q - 1 (%)",
                 {},          {{"attention", "#4e79a7"}},
                 "Q2 closer", "Q2 further"};
  spec.bars.push_back({"layers.0.q_proj", 0.96, 0, 0, false, "#4e79a7", "q"});
  spec.bars.push_back({"layers.0.k_proj", 0.99, 0, 0, false, "#4e79a7", "k"});
  std::string svg = DeviationChart(spec);
  // -4% fills most of the 420 px plot: the scale is fitted, not 0..1.
  EXPECT_GT(FirstBarWidth(svg), 300);
  EXPECT_NE(svg.find("0.9600 (-4.00%)"), std::string::npos);
  EXPECT_NE(svg.find(">-4%<"), std::string::npos);  // tick label with its unit
  EXPECT_NE(svg.find("Q2 closer"), std::string::npos);
  EXPECT_NE(svg.find(">attention<"), std::string::npos);  // the legend
  EXPECT_NE(svg.find("weight SSE ratio Q2/Q - 1 (%)"), std::string::npos);
}

TEST(DeviationChart, DrawsConfidenceIntervalsAndNonFiniteRows) {
  ChartSpec spec{"speed", "decode tok/s ratio - 1 (%)", {}, {}, "slower", "faster"};
  spec.bars.push_back({"w4a16 @ 128", 1.05, 0.98, 1.12, true, "#d62728", ""});
  spec.bars.push_back({"w4a16 @ 512", std::nan(""), 0, 0, false, "#d62728", ""});
  std::string svg = DeviationChart(spec);
  EXPECT_NE(svg.find("1.0500 (+5.00%)"), std::string::npos);
  EXPECT_NE(svg.find(">n/a<"), std::string::npos);
  EXPECT_NE(svg.find(">+15%<"), std::string::npos);  // 5% steps, up past the upper end of the CI
}

TEST(DeviationChart, ClipsIntervalsFarBeyondThePoints) {
  // bench's real 2-block interval on vLLM CPU: -8.8% with a 95% CI of -96.4% .. +2178.3%.
  ChartSpec spec{"speed", "decode tok/s ratio - 1 (%)", {}, {}, "slower", "faster"};
  spec.bars.push_back({"w4a16 @ 128", 0.9116, 0.036, 22.783, true, "#d62728", ""});
  spec.bars.push_back({"w4a16 @ 512", 0.9626, 0.662, 1.399, true, "#d62728", ""});
  std::string svg = DeviationChart(spec);
  EXPECT_EQ(svg.find(">+2000%<"), std::string::npos) << "the axis is fitted to the points";
  EXPECT_NE(svg.find("95% CI -96.4% .. +2178.3%"), std::string::npos) << "the label keeps it";
  EXPECT_NE(svg.find("<circle"), std::string::npos) << "a clipped end is drawn open";
  EXPECT_GT(FirstBarWidth(svg), 20) << "the -8.8% bar is visible";
}

TEST(BarChart, StartsAtZeroAndLabelsTheAxis) {
  ChartSpec spec{"error", "relative error", {}, {}, "", ""};
  spec.bars.push_back({"a", 0.012, 0, 0, false, "#4e79a7", "a"});
  std::string svg = BarChart(spec);
  EXPECT_NE(svg.find(">0.000<"), std::string::npos);
  EXPECT_NE(svg.find("relative error"), std::string::npos);
  EXPECT_NE(svg.find(">0.012<"), std::string::npos);
}

}  // namespace
}  // namespace spk::plot
