#include "http/prometheus.h"

#include <gtest/gtest.h>

#include <cmath>

namespace spk::http {
namespace {

TEST(Prometheus, ParsesVllmCounters) {
  const char* text =
      "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
      "# TYPE vllm:spec_decode_num_drafts_total counter\n"
      "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 12.0\n"
      "vllm:spec_decode_num_drafts_created{engine=\"0\",model_name=\"m\"} 1.7e9\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"1\",model_name=\"m\",position="
      "\"2\"} 3\n"
      "llamacpp:requests_processing 0\n"
      "llamacpp:n_drafted_total 5 1712345678000\n";
  auto samples = ParsePrometheusText(text);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  ASSERT_EQ(samples->size(), 5u);
  EXPECT_EQ((*samples)[0].name, "vllm:spec_decode_num_drafts_total");
  EXPECT_EQ((*samples)[0].Label("engine"), "0");
  EXPECT_EQ((*samples)[0].Label("model_name"), "m");
  EXPECT_DOUBLE_EQ((*samples)[0].value, 12.0);
  EXPECT_DOUBLE_EQ((*samples)[1].value, 1.7e9);
  EXPECT_EQ((*samples)[2].Label("position"), "2");
  EXPECT_EQ((*samples)[3].name, "llamacpp:requests_processing");
  EXPECT_TRUE((*samples)[3].labels.empty());
  EXPECT_DOUBLE_EQ((*samples)[4].value, 5);
}

TEST(Prometheus, UnescapesLabelValues) {
  auto samples = ParsePrometheusText(
      "m{path=\"C:\\\\dir\",quote=\"say \\\"hi\\\"\",nl=\"a\\nb\",brace=\"}{,\",} 1\n");
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  const MetricSample& s = (*samples)[0];
  EXPECT_EQ(s.Label("path"), "C:\\dir");
  EXPECT_EQ(s.Label("quote"), "say \"hi\"");
  EXPECT_EQ(s.Label("nl"), "a\nb");
  EXPECT_EQ(s.Label("brace"), "}{,");
}

TEST(Prometheus, SpecialValuesAndCrLf) {
  auto samples =
      ParsePrometheusText("a NaN\r\nb +Inf\r\nc -Inf\r\n\r\n   # indented comment\nd -1.5e-3\n");
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  ASSERT_EQ(samples->size(), 4u);
  EXPECT_TRUE(std::isnan((*samples)[0].value));
  EXPECT_TRUE(std::isinf((*samples)[1].value) && (*samples)[1].value > 0);
  EXPECT_TRUE(std::isinf((*samples)[2].value) && (*samples)[2].value < 0);
  EXPECT_DOUBLE_EQ((*samples)[3].value, -1.5e-3);
}

TEST(Prometheus, MalformedLinesNameTheLine) {
  for (const char* bad :
       {"ok 1\nm{a=\"x} 1\n", "ok 1\nm{a=x} 1\n", "ok 1\nm 1 2 3\n", "ok 1\nm\n",
        "ok 1\nm{a=\"\\q\"} 1\n", "ok 1\nm abc\n", "ok 1\n{a=\"b\"} 1\n", "ok 1\nm 0x10\n"}) {
    auto samples = ParsePrometheusText(bad);
    ASSERT_FALSE(samples.ok()) << bad;
    EXPECT_NE(samples.status().message().find("line 2"), std::string::npos)
        << samples.status().message();
  }
}

}  // namespace
}  // namespace spk::http
