#include "bench/report.h"

#include <gtest/gtest.h>

#include <functional>

#include "base/test_util.h"

namespace spk::bench {
namespace {

using nlohmann::json;

RequestRecord Make(size_t arm, size_t block, size_t length, double tok_s, bool spec) {
  RequestRecord r;
  r.arm = arm == 0 ? "base" : "fast";
  r.arm_index = arm;
  r.block = block;
  r.prompt_length = length;
  r.ok = true;
  r.complete = true;
  r.completion_tokens = 65;
  r.first_chunk_tokens = 1;
  r.decode_s = 64 / tok_s;
  r.decode_tok_s = tok_s;
  r.ttft_s = 0.1;
  if (spec) r.spec = SpecCounters{16, 48, 32, {{0, 14}, {1, 10}, {2, 8}}};
  return r;
}

std::vector<RequestRecord> Records() {
  std::vector<RequestRecord> records;
  for (size_t b = 0; b < 3; ++b) {
    for (size_t length : {128, 512}) {
      records.push_back(Make(0, b, length, 100 + b, false));
      records.push_back(Make(1, b, length, 120 + 2 * b, true));
    }
  }
  RequestRecord warm = Make(1, 0, 128, 1, true);
  warm.warmup = true;
  warm.spec = SpecCounters{100, 300, 0, {}};  // would wreck acceptance if it were counted
  records.push_back(warm);
  RequestRecord failed = Make(0, 3, 128, 0, false);
  failed.ok = false;
  failed.complete = false;
  failed.error = "HTTP 503";
  failed.spec = SpecCounters{100, 300, 0, {}};  // an incomplete request's deltas never count
  records.push_back(failed);
  return records;
}

TEST(Analyze, AcceptanceCountsCompleteRequestsThatCouldNotBeTimed) {
  std::vector<RequestRecord> records = Records();
  size_t fast_before = 0;
  for (const RequestRecord& r : records) fast_before += r.arm_index == 1 && !r.warmup;
  // One of the fast arm's requests arrived in a burst: untimed (a failure of its cell), but its
  // counters are the server's and count for acceptance.
  RequestRecord burst = Make(1, 3, 512, 0, true);
  burst.ok = false;
  burst.error = "stream arrived in a burst";
  burst.spec = SpecCounters{10, 30, 30, {{0, 10}, {1, 10}, {2, 10}}};
  records.push_back(burst);
  json results = Analyze(records, {{"base", "fast"}, {128, 512}, 0.05});
  const json& spec = results["arms"][1]["spec_decode"];
  EXPECT_EQ(spec["requests"], fast_before + 1);
  EXPECT_DOUBLE_EQ(spec["draft_tokens"].get<double>(), 48.0 * fast_before + 30);
  EXPECT_DOUBLE_EQ(spec["accepted_tokens"].get<double>(), 32.0 * fast_before + 30);
  EXPECT_EQ(results["arms"][1]["failures"], 1);
}

TEST(Analyze, JsonShapeAndFigures) {
  json results = Analyze(Records(), {{"base", "fast"}, {128, 512}, 0.05});
  ASSERT_EQ(results["arms"].size(), 2u);
  const json& base = results["arms"][0];
  EXPECT_EQ(base["name"], "base");
  ASSERT_EQ(base["cells"].size(), 2u);
  const json& cell = base["cells"][0];
  EXPECT_EQ(cell["prompt_tokens"], 128);
  EXPECT_EQ(cell["n"], 3);
  EXPECT_EQ(cell["failures"], 1);
  EXPECT_DOUBLE_EQ(cell["mean_tok_s"].get<double>(), 101);
  EXPECT_DOUBLE_EQ(cell["stdev_tok_s"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(cell["median_tok_s"].get<double>(), 101);
  EXPECT_DOUBLE_EQ(cell["mad_tok_s"].get<double>(), 1);
  for (const char* key :
       {"relative_mad", "noisy", "mean_ttft_s", "median_ttft_s", "mean_verify_steps"}) {
    EXPECT_TRUE(cell.contains(key)) << key;
  }
  EXPECT_TRUE(base["spec_decode"].is_null());
  EXPECT_EQ(base["spec_decode_note"], "no speculative decoding");

  const json& spec = results["arms"][1]["spec_decode"];
  ASSERT_TRUE(spec.is_object());
  EXPECT_DOUBLE_EQ(spec["draft_tokens"].get<double>(), 6 * 48);  // warm-up excluded
  EXPECT_DOUBLE_EQ(spec["accepted_tokens"].get<double>(), 6 * 32);
  EXPECT_DOUBLE_EQ(spec["acceptance_rate"].get<double>(), 32.0 / 48);
  EXPECT_DOUBLE_EQ(spec["mean_acceptance_length"].get<double>(), 1 + 32.0 / 16);
  EXPECT_DOUBLE_EQ(spec["per_position_rates"][0].get<double>(), 14.0 / 16);
  // Every block accepted the same: the 95% intervals have no width.
  EXPECT_EQ(spec["ci_blocks"], 3);
  EXPECT_DOUBLE_EQ(spec["mean_acceptance_length_ci_low"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(spec["mean_acceptance_length_ci_high"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(spec["per_position_ci_high"][2].get<double>(), 8.0 / 16);

  ASSERT_EQ(results["comparisons"].size(), 1u);
  const json& cmp = results["comparisons"][0];
  EXPECT_EQ(cmp["baseline"], "base");
  EXPECT_EQ(cmp["arm"], "fast");
  EXPECT_EQ(cmp["n_pairs"], 6);
  EXPECT_NEAR(cmp["ratio"].get<double>(), (2 * 366.0) / (2 * 303.0), 1e-12);
  ASSERT_TRUE(cmp["ci_low"].is_number());
  EXPECT_LT(cmp["ci_low"].get<double>(), cmp["ratio"].get<double>());
  EXPECT_GT(cmp["ci_high"].get<double>(), cmp["ratio"].get<double>());
  EXPECT_TRUE(cmp["bootstrap_ci_low"].is_number());
  EXPECT_TRUE(cmp["log_ratio_se"].is_number());
  ASSERT_EQ(cmp["cells"].size(), 2u);
  const json& d = cmp["decomposition"];
  ASSERT_TRUE(d.is_object());
  // base: 64 steps per request (no spec), fast: 16 verify steps.
  EXPECT_NEAR(d["verify_steps_ratio"].get<double>(), 16.0 / 64, 1e-12);
  EXPECT_NEAR(d["decode_time_ratio"].get<double>(),
              d["verify_steps_ratio"].get<double>() * d["time_per_step_ratio"].get<double>(),
              1e-12);
}

TEST(Render, MarkdownAndSvg) {
  json results = Analyze(Records(), {{"base", "fast"}, {128, 512}, 0.05});
  std::string md = RenderMarkdown(results);
  EXPECT_NE(md.find("| prompt | base tok/s | fast tok/s | delta fast |"), std::string::npos) << md;
  EXPECT_NE(md.find("| base | no speculative decoding |"), std::string::npos) << md;
  EXPECT_NE(md.find("| fast | 288 | 192 | 66.7% |"), std::string::npos) << md;
  EXPECT_NE(md.find("[1 failed]"), std::string::npos) << md;
  std::string svg = RenderSvg(results);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find(">fast</text>"), std::string::npos);
}

TEST(CheckResults, AnalyzeOutputPasses) {
  json results = Analyze(Records(), {{"base", "fast"}, {128, 512}, 0.05});
  EXPECT_TRUE(CheckResults(results, "B.json").ok());
  results["prompts"] = nullptr;  // as bench writes it without a prompts file
  results["host"] = {{"hostname", "m"}, {"cpu", "c"}, {"gpus", {"g", 1}}};  // a GPU: skipped
  EXPECT_TRUE(CheckResults(results, "B.json").ok());
}

// The message CheckResults gives for Analyze's output with one change.
std::string CheckAfter(const std::function<void(json&)>& change) {
  json results = Analyze(Records(), {{"base", "fast"}, {128, 512}, 0.05});
  change(results);
  Status s = CheckResults(results, "B.json");
  EXPECT_EQ(s.code(), s.ok() ? StatusCode::kOk : StatusCode::kInvalidInput);
  return s.message();
}

TEST(CheckResults, NamesTheFileAndTheField) {
  EXPECT_EQ(CheckAfter([](json& r) { r["arms"][1]["name"] = 7; }),
            "B.json: arms[1].name: expected a string, got a number");
  EXPECT_EQ(CheckAfter([](json& r) { r["arms"][1]["spec_decode"]["accepted_tokens"] = "32"; }),
            "B.json: arms[1].spec_decode.accepted_tokens: expected a number or null, got a string");
  EXPECT_EQ(CheckAfter([](json& r) { r["arms"] = "none"; }),
            "B.json: arms: expected an array, got a string");
  EXPECT_EQ(CheckAfter([](json& r) { r["comparisons"][0]["arm"] = 1; }),
            "B.json: comparisons[0].arm: expected a string, got a number");
  EXPECT_EQ(CheckAfter([](json& r) { r["arms"][0]["cells"][1].erase("noisy"); }),
            "B.json: arms[0].cells[1].noisy: expected a boolean, got nothing");
  EXPECT_EQ(CheckAfter([](json& r) { r["arms"][0]["cells"][0]["failures"] = -1; }),
            "B.json: arms[0].cells[0].failures: expected an integer >= 0, got -1");
  EXPECT_EQ(CheckAfter([](json& r) { r["arms"][1]["cells"].erase(1); }),
            "B.json: arms[1].cells: expected 2 cells (as arms[0] has), got 1");
  EXPECT_EQ(CheckAfter([](json& r) { r["comparisons"][0]["cells"][0]["ci_low"] = true; }),
            "B.json: comparisons[0].cells[0].ci_low: expected a number or null, got a boolean");
  EXPECT_EQ(CheckAfter([](json& r) {
              r["prompts"] = {{"degraded", {"x", 2}}};
            }),
            "B.json: prompts.degraded[1]: expected a string, got a number");
  EXPECT_EQ(CheckAfter([](json& r) { r["host"] = "m1"; }),
            "B.json: host: expected an object, got a string");
  EXPECT_EQ(CheckResults(json::array(), "B.json").message(),
            "B.json: expected an object, got an array");
  // Optional statistics may be null or absent: the renderers say "-" or "not available".
  EXPECT_EQ(CheckAfter([](json& r) {
              r["arms"][0]["cells"][0].erase("stdev_tok_s");
              r["comparisons"][0]["ci_low"] = nullptr;
            }),
            "");
}

// A `bench --prompts` run: one cell with prompt_tokens 0, a "prompts" object, intervals over
// blocks; CheckResults accepts it and every renderer reads it.
TEST(CheckResults, PromptsFileRunPassesAndRenders) {
  std::vector<RequestRecord> records;
  for (size_t b = 0; b < 3; ++b) {
    for (size_t a = 0; a < 2; ++a) {
      RequestRecord r = Make(a, b, 0, a == 0 ? 100 : 150 + 10.0 * b, true);
      r.spec = SpecCounters{10, 30, 6.0 + b, {{0, 5.0}, {1, 1.0 + b}}};
      records.push_back(r);
    }
  }
  json results = Analyze(records, {{"base", "fast"}, {0}, 0.05});
  results["prompts"] = {{"method", "file"},
                        {"exact", nullptr},
                        {"file", "p.jsonl"},
                        {"count", 3},
                        {"chat", 2},
                        {"text", 1},
                        {"ignore_eos", false},
                        {"description", "3 prompts from p.jsonl"},
                        {"degraded", json::array()}};
  results["flags"] = {{"prompts_file", "p.jsonl"}, {"ignore_eos", false}};
  ASSERT_TRUE(CheckResults(results, "B.json").ok()) << CheckResults(results, "B.json").message();
  EXPECT_EQ(results["arms"][1]["spec_decode"]["ci_blocks"], 3);
  std::string md = RenderMarkdown(results);
  EXPECT_NE(md.find("| prompts file |"), std::string::npos) << md;
  EXPECT_NE(md.find("prompts: 3 prompts from p.jsonl"), std::string::npos) << md;
  EXPECT_NE(md.find("[low, high]: 95% t interval"), std::string::npos) << md;
  EXPECT_NE(RenderSvg(results).find("prompts file"), std::string::npos);
}

TEST(CheckResults, NamesAMistypedIntervalField) {
  EXPECT_EQ(CheckAfter([](json& r) { r["arms"][1]["spec_decode"]["per_position_ci_low"] = "x"; }),
            "B.json: arms[1].spec_decode.per_position_ci_low: expected an array, got a string");
  EXPECT_EQ(
      CheckAfter([](json& r) { r["arms"][1]["spec_decode"]["per_position_ci_high"][2] = "x"; }),
      "B.json: arms[1].spec_decode.per_position_ci_high[2]: expected a number or null, got a "
      "string");
  EXPECT_EQ(CheckAfter([](json& r) {
              r["arms"][1]["spec_decode"]["mean_acceptance_length_ci_low"] = true;
            }),
            "B.json: arms[1].spec_decode.mean_acceptance_length_ci_low: expected a number or null, "
            "got a boolean");
  EXPECT_EQ(
      CheckAfter([](json& r) { r["arms"][1]["spec_decode"]["acceptance_rate_ci_high"] = "0.9"; }),
      "B.json: arms[1].spec_decode.acceptance_rate_ci_high: expected a number or null, got a "
      "string");
  EXPECT_EQ(CheckAfter([](json& r) { r["arms"][1]["spec_decode"]["ci_blocks"] = 1.5; }),
            "B.json: arms[1].spec_decode.ci_blocks: expected an integer >= 0, got 1.5");
  EXPECT_EQ(CheckAfter([](json& r) {
              r["prompts"] = {{"ignore_eos", "no"}};
            }),
            "B.json: prompts.ignore_eos: expected a boolean, got a string");
  // Fewer than 2 blocks: null bounds and null elements; files from before the intervals have none.
  EXPECT_EQ(CheckAfter([](json& r) {
              json& s = r["arms"][1]["spec_decode"];
              s["mean_acceptance_length_ci_low"] = nullptr;
              s["per_position_ci_low"] = {nullptr, nullptr, nullptr};
              s["ci_blocks"] = nullptr;
              r["arms"][1]["spec_decode"].erase("per_position_ci_high");
            }),
            "");
}

TEST(PoolResults, NamesTheFileAndTheField) {
  json doc = {{"comparisons", {{{"baseline", "x"}, {"arm", 3}}}}};
  EXPECT_EQ(PoolResults({doc}, {"a.json"}).status().message(),
            "a.json: comparisons[0].arm: expected a string, got a number");
  EXPECT_EQ(PoolResults({json{{"nope", 1}}}, {"bad.json"}).status().message(),
            "bad.json: comparisons: expected an array, got nothing");
  doc = {{"comparisons",
          {{{"baseline", "x"}, {"arm", "y"}, {"cells", {{{"prompt_tokens", "512"}}}}}}}};
  EXPECT_EQ(
      PoolResults({doc}, {"a.json"}).status().message(),
      "a.json: comparisons[0].cells[0].prompt_tokens: expected an integer >= 0, got a string");
}

TEST(PoolResults, InverseVarianceAcrossFiles) {
  json a = {{"comparisons",
             {{{"baseline", "x"},
               {"arm", "y"},
               {"ratio", 1.1},
               {"log_ratio", 0.1},
               {"log_ratio_se", 0.05},
               {"cells", json::array()}}}}};
  json b = {{"comparisons",
             {{{"baseline", "x"},
               {"arm", "y"},
               {"ratio", 1.2},
               {"log_ratio", 0.2},
               {"log_ratio_se", 0.1},
               {"cells", json::array()}}}}};
  auto pooled = PoolResults({a, b}, {"a.json", "b.json"});
  ASSERT_TRUE(pooled.ok()) << pooled.status().message();
  const json& p = (*pooled)["pooled"][0];
  EXPECT_EQ(p["n_machines"], 2);
  EXPECT_NEAR(p["log_ratio"].get<double>(), 0.12, 1e-12);
  EXPECT_NE(RenderPooledMarkdown(*pooled).find("| y vs x | all | 2 |"), std::string::npos);
  test_util::ExpectError(PoolResults({json{{"nope", 1}}}, {"bad.json"}), StatusCode::kInvalidInput,
                         "bad.json: comparisons: expected an array");
}

TEST(Analyze, AcceptanceIntervalsAreOverBlocks) {
  // Blocks 0..2 accept 12, 18 and 15 of 20 drafts (two requests each, summed per block): the
  // interval is the t interval over block ratios 0.6, 0.9, 0.75 (stats_test.cc), plus 1; a
  // per-position rate is at most 1.
  std::vector<RequestRecord> records;
  const double accepted[] = {6, 9, 7.5};
  for (size_t b = 0; b < 3; ++b) {
    for (size_t length : {128, 512}) {
      RequestRecord r = Make(0, b, length, 100, true);
      r.spec = SpecCounters{10, 30, accepted[b], {{0, accepted[b]}}};
      records.push_back(r);
    }
  }
  json results = Analyze(records, {{"base"}, {128, 512}, 0.05});
  const json& spec = results["arms"][0]["spec_decode"];
  EXPECT_DOUBLE_EQ(spec["mean_acceptance_length"].get<double>(), 1.75);
  EXPECT_NEAR(spec["mean_acceptance_length_ci_low"].get<double>(), 1.37734926875155606, 1e-14);
  EXPECT_NEAR(spec["mean_acceptance_length_ci_high"].get<double>(), 2.122650731248444, 1e-14);
  EXPECT_NEAR(spec["per_position_ci_low"][0].get<double>(), 0.37734926875155606, 1e-14);
  EXPECT_DOUBLE_EQ(spec["per_position_ci_high"][0].get<double>(), 1.0);
  EXPECT_EQ(spec["ci_blocks"], 3);
  std::string md = RenderSpecTable(results);
  EXPECT_NE(md.find("| base | 180 | 45 | 25.0% | 1.750 [1.377, 2.123] | 0.750 [0.377, 1.000] |"),
            std::string::npos)
      << md;
}

}  // namespace
}  // namespace spk::bench
