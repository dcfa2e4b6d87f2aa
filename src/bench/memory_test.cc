#include "bench/memory.h"

#include <gtest/gtest.h>

#include <cerrno>

#include <unistd.h>
#include "io/fault_injection.h"

namespace spk::bench {
namespace {

// Lines as vLLM 0.32 writes them: the GPU runner's (v1/worker/gpu_model_runner.py) and, from a real
// CPU log of the e2e, the weight loader's checkpoint size for the target and then the drafter.
constexpr const char* kGpuLog =
    "(Worker_TP0 pid=11) INFO 12-01 09:26:45 [gpu_model_runner.py:5150] Model loading took 34.67 "
    "GiB memory and 12.345678 seconds\n"
    "(Worker_TP1 pid=12) INFO 12-01 09:26:45 [gpu_model_runner.py:5150] Model loading took 34.67 "
    "GiB memory and 12.400000 seconds\n";
constexpr const char* kCpuLog =
    "(Worker pid=19862) INFO 12-01 09:26:45 [weight_utils.py:1108] Filesystem type for "
    "checkpoints: EXT4. Checkpoint size: 0.50 GiB. Available RAM: 12.41 GiB.\n"
    "(Worker pid=19862) INFO 12-01 09:26:45 [default_loader.py:501] Loading weights took 0.05 "
    "seconds\n"
    "(Worker pid=19862) INFO 12-01 09:26:47 [cpu_model_runner.py:75] Loading drafter model...\n"
    "(Worker pid=19862) INFO 12-01 09:26:47 [weight_utils.py:1108] Filesystem type for "
    "checkpoints: EXT4. Checkpoint size: 0.02 GiB. Available RAM: 12.34 GiB.\n";

TEST(VllmLogMemory, SumsModelLoadingOverWorkers) {
  LogMemory m = ParseVllmLogMemory(kGpuLog);
  ASSERT_TRUE(m.model_loading_gib.has_value());
  EXPECT_DOUBLE_EQ(*m.model_loading_gib, 69.34);
  EXPECT_EQ(m.lines.size(), 2u);
  EXPECT_FALSE(m.target_checkpoint_gib.has_value());
}

TEST(VllmLogMemory, SplitsCheckpointSizesAtTheDrafterLine) {
  LogMemory m = ParseVllmLogMemory(kCpuLog);
  EXPECT_FALSE(m.model_loading_gib.has_value());
  ASSERT_TRUE(m.target_checkpoint_gib && m.draft_checkpoint_gib);
  EXPECT_DOUBLE_EQ(*m.target_checkpoint_gib, 0.50);
  EXPECT_DOUBLE_EQ(*m.draft_checkpoint_gib, 0.02);
  EXPECT_TRUE(m.ToJson().contains("model_loading_note"));
}

TEST(ProcessGroupMemory, FindsThisProcess) {
  auto m = ProcessGroupMemory(FileSystem::Default(), ::getpgrp());
  ASSERT_TRUE(m.has_value());
  EXPECT_GT(m->rss_bytes, 1024u * 1024u);  // a test binary holds more than a MiB
  bool found = false;
  for (const auto& p : m->processes) found = found || p["pid"].get<int>() == ::getpid();
  EXPECT_TRUE(found);
  EXPECT_FALSE(ProcessGroupMemory(FileSystem::Default(), -12345).has_value());
}

TEST(MetricsMemory, ReadsProcessGaugesOnly) {
  std::vector<http::MetricSample> samples = {
      {"process_resident_memory_bytes", {}, 2048},
      {"vllm:num_requests_running", {}, 0},
  };
  auto j = MetricsMemory(samples);
  ASSERT_TRUE(j.is_object());
  EXPECT_DOUBLE_EQ(j["process_resident_memory_bytes"].get<double>(), 2048);
  EXPECT_TRUE(MetricsMemory({{"vllm:x", {}, 1}}).is_null());
}

TEST(VllmLogMemory, NonUtf8LogLinesStillDumpAsJson) {
  // Found by tests/fuzz/vllm_log_memory_fuzz.cc: a log is bytes, the results JSON must be UTF-8.
  LogMemory m = ParseVllmLogMemory("Checkpoint size: 0\x8a\n");
  ASSERT_EQ(m.lines.size(), 1u);
  std::string dumped = m.ToJson().dump();
  EXPECT_NE(dumped.find("0\xEF\xBF\xBD\""), std::string::npos) << dumped;  // U+FFFD
}

TEST(ProcessGroupMemory, GoesThroughItsFileSystem) {
  FaultInjectingFileSystem fs(FileSystem::Default());
  EXPECT_TRUE(ProcessGroupMemory(&fs, ::getpgrp()).has_value());
  fs.FailOperation(FileOp::kRead, "status", EIO);  // every /proc/PID/status: 0 bytes resident
  auto unread = ProcessGroupMemory(&fs, ::getpgrp());
  ASSERT_TRUE(unread.has_value());
  EXPECT_EQ(unread->rss_bytes, 0u);
  fs.FailOperation(FileOp::kList, "/proc", EIO);  // no listing: no figure, no crash
  EXPECT_FALSE(ProcessGroupMemory(&fs, ::getpgrp()).has_value());
}

}  // namespace
}  // namespace spk::bench
