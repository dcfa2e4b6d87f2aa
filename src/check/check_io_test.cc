// CheckCheckpoint and the vLLM source scan when the disk fails them: every file check reads goes
// through the FileSystem it is given, so a FaultInjectingFileSystem can fail the read of
// config.json, of the shard index, of the folder listing, of a vLLM tree's version file and model
// code. Each must end the check with an IoError naming the path (exit 3), never a report: a
// finding-free "OK" about files that were never read would be a lie, and a finding would blame the
// checkpoint for the disk. The same folders, read without the fault, check clean, so the fault is
// what the tests see.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "check/check.h"
#include "check/check_test_util.h"
#include "check/vllm_source.h"
#include "io/fault_injection.h"

namespace spk {
namespace {

using ::testing::HasSubstr;

// A two-shard DFlash example quantized W4A16: it has an index, and checks clean.
std::string ShardedCheckpoint(const spk::testing::ScopedTempDir& dir) {
  ExampleOptions o;
  o.family = "dflash";
  o.dir = dir / "src";
  o.shards = 2;
  Status s = WriteExampleCheckpoint(o, FileSystem::Default());
  EXPECT_TRUE(s.ok()) << s.message();
  return check_test::Quantize(o.dir, dir / "q", Preset::kDFlash);
}

// Checks `ckpt` (with `options`) with `op` on `path` failing with EIO, and expects the check to
// fail with an IoError that names `path`.
void ExpectReadFaultFailsTheCheck(const std::string& ckpt, FileOp op, const std::string& path,
                                  CheckOptions options = {}) {
  options.checkpoint = ckpt;
  auto clean = CheckCheckpoint(RunContext{}, options);
  ASSERT_TRUE(clean.ok()) << clean.status().message();
  EXPECT_TRUE(clean->ok()) << RenderCheckReport(*clean);

  FaultInjectingFileSystem faulty(FileSystem::Default());
  faulty.FailOperation(op, path, EIO);
  auto report = CheckCheckpoint(RunContext{.fs = &faulty}, options);
  ASSERT_FALSE(report.ok()) << path << " failed, yet check reported:\n"
                            << RenderCheckReport(*report);
  EXPECT_EQ(report.status().code(), StatusCode::kIoError) << report.status().message();
  EXPECT_EQ(ExitCodeFor(report.status()), 3);
  EXPECT_THAT(report.status().message(), HasSubstr(path));
  EXPECT_THAT(report.status().message(), HasSubstr("Input/output error"));
}

TEST(CheckReadFaults, ConfigJsonReadErrorIsAnIoErrorNamingIt) {
  spk::testing::ScopedTempDir dir;
  std::string q = ShardedCheckpoint(dir);
  ExpectReadFaultFailsTheCheck(q, FileOp::kRead, q + "/config.json");
}

TEST(CheckReadFaults, ShardIndexReadErrorIsAnIoErrorNamingIt) {
  spk::testing::ScopedTempDir dir;
  std::string q = ShardedCheckpoint(dir);
  ASSERT_TRUE(FileSystem::Default()->FileExists(q + "/model.safetensors.index.json"));
  ExpectReadFaultFailsTheCheck(q, FileOp::kRead, q + "/model.safetensors.index.json");
}

// Both shards: one the index names and, in the second test, one it does not (vLLM loads it anyway).
TEST(CheckReadFaults, ShardReadErrorIsAnIoErrorNamingIt) {
  spk::testing::ScopedTempDir dir;
  std::string q = ShardedCheckpoint(dir);
  ExpectReadFaultFailsTheCheck(q, FileOp::kRead, q + "/model-00002-of-00002.safetensors");
}

TEST(CheckReadFaults, UnlistedShardReadErrorIsAnIoErrorNamingIt) {
  spk::testing::ScopedTempDir dir;
  std::string q = ShardedCheckpoint(dir);
  std::filesystem::copy_file(q + "/model-00001-of-00002.safetensors", q + "/stray.safetensors");
  ExpectReadFaultFailsTheCheck(q, FileOp::kRead, q + "/stray.safetensors");
}

TEST(CheckReadFaults, FolderListingErrorIsAnIoErrorNamingIt) {
  spk::testing::ScopedTempDir dir;
  std::string q = ShardedCheckpoint(dir);
  ExpectReadFaultFailsTheCheck(q, FileOp::kList, q);
}

TEST(CheckReadFaults, TargetConfigReadErrorIsAnIoErrorNamingIt) {
  spk::testing::ScopedTempDir dir;
  std::string q = ShardedCheckpoint(dir);
  std::string target = check_test::Example(dir, "target", "llm");
  // The example DFlash draft is for an 8-layer target; the llm example has 2 layers.
  check_test::EditConfig(target, [](check_test::Json& j) { j["num_hidden_layers"] = 8; });
  CheckOptions o;
  o.target = target;
  ExpectReadFaultFailsTheCheck(q, FileOp::kRead, target + "/config.json", o);
}

// A vLLM tree whose DFlash model reads qkv_proj.weight unguarded, with a version file.
std::string FakeVllmTree(const spk::testing::ScopedTempDir& dir) {
  namespace fs = std::filesystem;
  std::string root = dir / "site-packages";
  fs::create_directories(root + "/vllm/model_executor/models");
  std::ofstream(root + "/vllm/_version.py") << "__version__ = version = '0.32.0'\n";
  std::ofstream(root + "/vllm/model_executor/models/qwen3_dflash.py")
      << "class M:\n    def f(self, layers_attn):\n"
         "        kv = [a.qkv_proj.weight[a.q_size :] for a in layers_attn]\n";
  return root;
}

TEST(CheckReadFaults, VllmVersionFileReadErrorIsAnIoErrorNamingIt) {
  spk::testing::ScopedTempDir dir;
  std::string q = ShardedCheckpoint(dir);
  CheckOptions o;
  o.vllm_dir = FakeVllmTree(dir);
  ExpectReadFaultFailsTheCheck(q, FileOp::kRead, o.vllm_dir + "/vllm/_version.py", o);
}

TEST(CheckReadFaults, VllmSourceScanReadErrorIsAnIoErrorNamingIt) {
  spk::testing::ScopedTempDir dir;
  std::string tree = FakeVllmTree(dir);
  auto clean = InspectVllmSource(FileSystem::Default(), tree);
  ASSERT_TRUE(clean.ok()) << clean.status().message();
  ASSERT_EQ(clean->size(), 1u);
  EXPECT_EQ((*clean)[0].code, "vllm-dflash-context-kv");

  const std::string model = tree + "/vllm/model_executor/models/qwen3_dflash.py";
  for (auto [op, path] : {std::pair{FileOp::kRead, model},
                          std::pair{FileOp::kList, tree + "/vllm/model_executor/models"}}) {
    FaultInjectingFileSystem faulty(FileSystem::Default());
    faulty.FailOperation(op, path, EIO);
    auto findings = InspectVllmSource(&faulty, tree);
    ASSERT_FALSE(findings.ok()) << path;
    EXPECT_EQ(findings.status().code(), StatusCode::kIoError) << findings.status().message();
    EXPECT_THAT(findings.status().message(), HasSubstr(path));
  }
}

// A shard that reads but is not safetensors (truncated in its header) is the checkpoint's fault,
// one safetensors-invalid error. Its tensors are then unknown, so the rules that judge the stored
// set do not run, rather than call every module whose scale or weight_shape it held incomplete
// (missing-weight-shape, missing-scale, ...) and every ignore entry it matched dead.
TEST(CheckUnreadableShard, IsOneErrorAndTheRulesOverTheStoredTensorsDoNotRun) {
  spk::testing::ScopedTempDir dir;
  std::string q = ShardedCheckpoint(dir);
  std::vector<std::string> shards;
  for (const auto& e : std::filesystem::directory_iterator(q)) {
    if (e.path().extension() == ".safetensors") shards.push_back(e.path().filename());
  }
  std::sort(shards.begin(), shards.end());
  ASSERT_EQ(shards.size(), 2u);
  std::filesystem::resize_file(q + "/" + shards[1], 100);

  CheckOptions options;
  options.checkpoint = q;
  auto report = CheckCheckpoint(RunContext{}, options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_FALSE(report->ok());
  ASSERT_EQ(report->findings.size(), 1u) << RenderCheckReport(*report);
  EXPECT_EQ(report->findings[0].code, "safetensors-invalid");
  EXPECT_EQ(report->findings[0].file, shards[1]);
  EXPECT_THAT(report->unreadable_shards, ::testing::ElementsAre(shards[1]));
  for (std::string rule : {"module-tensors", "ignore-entries", "map-modules"}) {
    EXPECT_NE(std::find(report->rules_not_run.begin(), report->rules_not_run.end(), rule),
              report->rules_not_run.end())
        << rule;
  }
  EXPECT_THAT(RenderCheckReport(*report), HasSubstr("not judged until " + shards[1]));
}

}  // namespace
}  // namespace spk
