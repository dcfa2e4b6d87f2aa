// Unit tests of the two-output join of `compare` (JoinCompareReports) and its reports, on
// hand-made per-output reports: ratios, order, totals, kinds, the module-set errors, and that the
// one-output JSON did not change shape. tests/python/test_compare.py runs it on real checkpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compare/compare.h"
#include "compare/report.h"

namespace spk {
namespace {

LayerError Layer(const std::string& module, double sse, double output_rel_error) {
  LayerError l;
  l.module = module;
  l.kind = module.substr(module.rfind('.') + 1);
  l.out = 4;
  l.in = 8;
  l.sse = sse;
  l.rel_fro = std::sqrt(sse / 100.0);  // ||W||^2 = 100
  l.snr_db = sse > 0 ? 10 * std::log10(100.0 / sse) : std::numeric_limits<double>::infinity();
  l.output_rel_error = output_rel_error;
  return l;
}

CompareReport Report(const std::string& path, std::vector<LayerError> layers) {
  CompareReport r;
  r.source = "src";
  r.quantized = path;
  r.scheme = "w4a16 (group 128)";
  for (const LayerError& l : layers) r.total_sse += l.sse;
  r.layers = std::move(layers);
  return r;
}

// Q: up 4, down 2, gate exact. Q2: up 1 (gain), down 3 (worse), gate exact.
GainReport Joined() {
  auto g = JoinCompareReports(
      Report("rtn", {Layer("m.0.mlp.up_proj", 4, 0.5), Layer("m.0.mlp.down_proj", 2, 0.2),
                     Layer("m.1.mlp.gate_proj", 0, 0)}),
      Report("search", {Layer("m.1.mlp.gate_proj", 0, 0), Layer("m.0.mlp.down_proj", 3, 0.4),
                        Layer("m.0.mlp.up_proj", 1, 0.25)}));
  EXPECT_TRUE(g.ok()) << g.status().message();
  return *g;
}

TEST(CompareGain, RatiosOfSquaredErrorsLargestGainFirst) {
  GainReport g = Joined();
  ASSERT_EQ(g.layers.size(), 3u);
  EXPECT_EQ(g.layers[0].q.module, "m.0.mlp.up_proj");
  EXPECT_DOUBLE_EQ(g.layers[0].sse_ratio, 0.25);
  EXPECT_DOUBLE_EQ(g.layers[0].output_se_ratio, 0.0625 / 0.25);
  EXPECT_DOUBLE_EQ(g.layers[0].q2.sse, 1.0);  // joined by module, not by position
  EXPECT_EQ(g.layers[1].q.module, "m.1.mlp.gate_proj");
  EXPECT_EQ(g.layers[1].sse_ratio, 1.0);  // both exact: no gain
  EXPECT_EQ(g.layers[1].output_se_ratio, 1.0);
  EXPECT_EQ(g.layers[2].q.module, "m.0.mlp.down_proj");
  EXPECT_DOUBLE_EQ(g.layers[2].sse_ratio, 1.5);
  EXPECT_DOUBLE_EQ(g.layers[2].output_se_ratio, 4.0);
  EXPECT_EQ(g.layers_better, 1u);
  EXPECT_EQ(g.layers_worse, 1u);
  EXPECT_DOUBLE_EQ(g.sse_ratio, 4.0 / 6.0);  // totals, not a mean of ratios
  EXPECT_EQ(g.q.quantized, "rtn");
  EXPECT_EQ(g.q2.quantized, "search");
}

TEST(CompareGain, KindsSumTheirLayersBeforeTheRatio) {
  auto g = JoinCompareReports(Report("a", {Layer("m.0.q_proj", 1, 0.1), Layer("m.1.q_proj", 9, 0.1),
                                           Layer("m.0.o_proj", 2, 0.1)}),
                              Report("b", {Layer("m.0.q_proj", 1, 0.1), Layer("m.1.q_proj", 4, 0.1),
                                           Layer("m.0.o_proj", 1.8, 0.1)}));
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->kinds.size(), 2u);
  EXPECT_EQ(g->kinds[0].kind, "q_proj");  // 5/10 beats 0.9
  EXPECT_EQ(g->kinds[0].layers, 2u);
  EXPECT_DOUBLE_EQ(g->kinds[0].sse, 10);
  EXPECT_DOUBLE_EQ(g->kinds[0].sse2, 5);
  EXPECT_DOUBLE_EQ(g->kinds[0].sse_ratio, 0.5);
  EXPECT_DOUBLE_EQ(g->kinds[1].sse_ratio, 0.9);
}

TEST(CompareGain, OnlyQExactIsAnInfiniteRatioWrittenAsNull) {
  auto g = JoinCompareReports(Report("a", {Layer("m.0.fc", 0, 0), Layer("m.1.fc", 1, 0.1)}),
                              Report("b", {Layer("m.0.fc", 2, 0.1), Layer("m.1.fc", 1, 0.1)}));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->layers.back().q.module, "m.0.fc");  // sorted last
  EXPECT_TRUE(std::isinf(g->layers.back().sse_ratio));
  auto json = GainReportToJson(*g);
  EXPECT_TRUE(json["layers"][1]["sse_ratio"].is_null());
  EXPECT_TRUE(json["layers"][1]["output_se_ratio"].is_null());
  EXPECT_DOUBLE_EQ(json["summary"]["sse_ratio"].get<double>(), 3.0);
  EXPECT_EQ(GainReportHtml(*g).find("nan"), std::string::npos);
}

TEST(CompareGain, ModuleOnlyInOneOutputIsAnErrorNamingIt) {
  auto missing_in_q2 = JoinCompareReports(
      Report("rtn", {Layer("m.0.fc", 1, 0.1), Layer("m.1.fc", 1, 0.1), Layer("m.2.fc", 1, 0.1)}),
      Report("search", {Layer("m.0.fc", 1, 0.1)}));
  ASSERT_FALSE(missing_in_q2.ok());
  EXPECT_EQ(missing_in_q2.status().code(), StatusCode::kInvalidInput);
  const std::string& m = missing_in_q2.status().message();
  EXPECT_NE(m.find("rtn: module 'm.1.fc' is quantized there but not in search"), std::string::npos)
      << m;
  EXPECT_NE(m.find("(and 1 more)"), std::string::npos) << m;

  auto missing_in_q = JoinCompareReports(
      Report("rtn", {Layer("m.0.fc", 1, 0.1)}),
      Report("search", {Layer("m.0.fc", 1, 0.1), Layer("m.0.lm_extra", 1, 0.1)}));
  ASSERT_FALSE(missing_in_q.ok());
  EXPECT_NE(missing_in_q.status().message().find(
                "search: module 'm.0.lm_extra' is quantized there but not in rtn"),
            std::string::npos)
      << missing_in_q.status().message();
}

TEST(CompareGain, DifferentSchemesAreReportedSideBySide) {
  CompareReport q2 = Report("w8", {Layer("m.0.fc", 0.5, 0.1)});
  q2.scheme = "w8a16 (group 32)";
  auto g = JoinCompareReports(Report("w4", {Layer("m.0.fc", 8, 0.1)}), std::move(q2));
  ASSERT_TRUE(g.ok());
  auto json = GainReportToJson(*g);
  EXPECT_EQ(json["q"]["scheme"], "w4a16 (group 128)");
  EXPECT_EQ(json["q2"]["scheme"], "w8a16 (group 32)");
  EXPECT_NE(RenderGainReport(*g).find("w8a16 (group 32)"), std::string::npos);
}

TEST(CompareGain, JsonKeys) {
  auto json = GainReportToJson(Joined());
  std::vector<std::string> top;
  for (auto& [k, v] : json.items()) top.push_back(k);
  EXPECT_EQ(top, (std::vector<std::string>{"source", "q", "q2", "summary", "by_kind", "layers"}));
  EXPECT_EQ(json["q"]["quantized"], "rtn");
  EXPECT_DOUBLE_EQ(json["q"]["sse"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(json["q2"]["sse"].get<double>(), 4.0);
  EXPECT_EQ(json["summary"]["layers"], 3);
  EXPECT_EQ(json["summary"]["largest_gain_layer"], "m.0.mlp.up_proj");
  EXPECT_EQ(json["summary"]["least_gain_layer"], "m.0.mlp.down_proj");
  EXPECT_EQ(json["summary"]["layers_better"], 1);
  const auto& first = json["layers"][0];
  EXPECT_EQ(first["module"], "m.0.mlp.up_proj");
  EXPECT_EQ(first["kind"], "up_proj");
  EXPECT_DOUBLE_EQ(first["q"]["sse"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(first["q2"]["rel_fro"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(first["sse_ratio"].get<double>(), 0.25);
  EXPECT_TRUE(json["layers"][1]["q"]["snr_db"].is_null());  // exact layer: SNR +inf

  auto no_paths = GainReportToJson(Joined(), /*with_paths=*/false);
  EXPECT_FALSE(no_paths.contains("source"));
  EXPECT_FALSE(no_paths["q"].contains("quantized"));
}

TEST(CompareGain, TextAndHtmlShowTheGain) {
  GainReport g = Joined();
  std::string text = RenderGainReport(g, 2);
  EXPECT_NE(text.find("weight SSE Q2 / Q: 0.6667 (3 layers; Q2 closer on 1, further on 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("m.0.mlp.up_proj"), std::string::npos);
  EXPECT_EQ(text.find("  m.0.mlp.down_proj "), std::string::npos) << "--top 2 cuts the third";
  std::string html = GainReportHtml(g);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  size_t svgs = 0, rects = 0;
  for (size_t p = 0; (p = html.find("<svg", p)) != std::string::npos; ++p) ++svgs;
  for (size_t p = 0; (p = html.find("<rect class=\"bar\"", p)) != std::string::npos; ++p) ++rects;
  EXPECT_EQ(svgs, 2u);
  EXPECT_EQ(rects, 3u + 3u);  // one bar per layer and per kind
  EXPECT_NE(html.find("weight SSE Q2 / Q: <b>0.6667</b>"), std::string::npos);
  EXPECT_NE(html.find("stroke-dasharray"), std::string::npos);  // the ratio-1 line
}

TEST(CompareGain, OneOutputJsonKeepsItsShape) {
  auto json = CompareReportToJson(Report("rtn", {Layer("m.0.fc", 1, 0.1)}));
  EXPECT_FALSE(json["layers"][0].contains("sse"));
  EXPECT_FALSE(json["summary"].contains("sse"));
  EXPECT_FALSE(json.contains("q2"));
}

}  // namespace
}  // namespace spk
