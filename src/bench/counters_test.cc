#include "bench/counters.h"

#include <gtest/gtest.h>

namespace spk::bench {
namespace {

MetricsSnapshot FromText(const char* text) {
  auto samples = http::ParsePrometheusText(text);
  EXPECT_TRUE(samples.ok()) << samples.status().message();
  return ExtractMetrics(*samples);
}

TEST(ExtractMetrics, SumsEnginesAndIgnoresCreated) {
  MetricsSnapshot m = FromText(
      "vllm:num_requests_running{engine=\"0\"} 1\n"
      "vllm:num_requests_running{engine=\"1\"} 0\n"
      "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 10\n"
      "vllm:spec_decode_num_drafts_total{engine=\"1\",model_name=\"m\"} 5\n"
      "vllm:spec_decode_num_drafts_created{engine=\"0\",model_name=\"m\"} 1.7e9\n"
      "vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 30\n"
      "vllm:spec_decode_num_draft_tokens_total{engine=\"1\",model_name=\"m\"} 15\n"
      "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 20\n"
      "vllm:spec_decode_num_accepted_tokens_total{engine=\"1\",model_name=\"m\"} 4\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",position=\"0\"} 9\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"1\",position=\"0\"} 3\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_created{engine=\"1\",position=\"0\"} 1e9\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",position=\"1\"} 7\n"
      "vllm:generation_tokens_total 999\n");
  ASSERT_TRUE(m.spec.has_value());
  EXPECT_DOUBLE_EQ(m.spec->drafts, 15);
  EXPECT_DOUBLE_EQ(m.spec->draft_tokens, 45);
  EXPECT_DOUBLE_EQ(m.spec->accepted_tokens, 24);
  EXPECT_DOUBLE_EQ(m.spec->accepted_per_position.at(0), 12);
  EXPECT_DOUBLE_EQ(m.spec->accepted_per_position.at(1), 7);
  ASSERT_TRUE(m.requests_running.has_value());
  EXPECT_DOUBLE_EQ(*m.requests_running, 1);
}

TEST(ExtractMetrics, LlamaCppWithAndWithoutTotal) {
  MetricsSnapshot without = FromText(
      "llamacpp:spec_decode_num_drafts 4\nllamacpp:spec_decode_num_draft_tokens 12\n"
      "llamacpp:spec_decode_num_accepted_tokens 6\nllamacpp:requests_processing 0\n");
  MetricsSnapshot with = FromText(
      "llamacpp:spec_decode_num_drafts_total 4\nllamacpp:spec_decode_num_draft_tokens_total 12\n"
      "llamacpp:spec_decode_num_accepted_tokens_total 6\nllamacpp:requests_processing 0\n");
  ASSERT_TRUE(without.spec && with.spec);
  EXPECT_EQ(*without.spec, *with.spec);
  EXPECT_DOUBLE_EQ(with.spec->accepted_tokens, 6);
  EXPECT_DOUBLE_EQ(*with.requests_running, 0);
}

TEST(ExtractMetrics, AbsentCountersAreNotZero) {
  MetricsSnapshot m = FromText("vllm:num_requests_running 0\nvllm:prompt_tokens_total 5\n");
  EXPECT_FALSE(m.spec.has_value());
}

TEST(SpecCounters, Difference) {
  SpecCounters before{10, 30, 20, {{0, 9}}};
  SpecCounters after{15, 45, 24, {{0, 12}, {1, 2}}};
  SpecCounters d = after - before;
  EXPECT_DOUBLE_EQ(d.drafts, 5);
  EXPECT_DOUBLE_EQ(d.draft_tokens, 15);
  EXPECT_DOUBLE_EQ(d.accepted_tokens, 4);
  EXPECT_DOUBLE_EQ(d.accepted_per_position.at(0), 3);
  EXPECT_DOUBLE_EQ(d.accepted_per_position.at(1), 2);
}

}  // namespace
}  // namespace spk::bench
