#include "safetensors/checkpoint_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io/fs_util.h"
#include "io/test_util.h"
#include "safetensors/test_files.h"

namespace spk {
namespace {

using ::testing::HasSubstr;

constexpr char kShard1[] = "model-00001-of-00002.safetensors";
constexpr char kShard2[] = "model-00002-of-00002.safetensors";

void WriteIndex(const testing::ScopedTempDir& dir, std::map<std::string, std::string> weight_map) {
  ShardIndex index;
  index.weight_map = std::move(weight_map);
  ASSERT_TRUE(
      WriteWholeFile(dir / "model.safetensors.index.json", SerializeShardIndex(index)).ok());
}

// Two shards: a and b in shard 1, c in shard 2.
void WriteShards(const testing::ScopedTempDir& dir) {
  testing::WriteTestSafetensors(dir / kShard1, {{"a", DType::kBF16, {2}}, {"b", DType::kU8, {3}}});
  testing::WriteTestSafetensors(dir / kShard2, {{"c", DType::kF32, {1}}});
}

TEST(CheckpointFilesTest, OpensSingleModelFile) {
  testing::ScopedTempDir dir;
  testing::WriteTestSafetensors(dir / "model.safetensors", {{"w", DType::kU8, {2}}});
  testing::WriteTestSafetensors(dir / "other.safetensors", {{"v", DType::kU8, {2}}});
  auto ckpt = SafetensorsCheckpoint::Open(FileSystem::Default(), dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_FALSE(ckpt->sharded());
  EXPECT_EQ(ckpt->shard_files(), (std::vector<std::string>{"model.safetensors"}));
  ASSERT_TRUE(ckpt->Find("w").has_value());
  EXPECT_FALSE(ckpt->Find("v").has_value());
}

TEST(CheckpointFilesTest, OpensTheOnlySafetensorsFile) {
  testing::ScopedTempDir dir;
  testing::WriteTestSafetensors(dir / "draft.safetensors", {{"w", DType::kU8, {2}}});
  auto ckpt = SafetensorsCheckpoint::Open(FileSystem::Default(), dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_EQ(ckpt->shard_files(), (std::vector<std::string>{"draft.safetensors"}));
  EXPECT_EQ(ckpt->Find("w")->entry->nbytes(), 2u);
}

TEST(CheckpointFilesTest, RejectsSeveralFilesWithoutIndex) {
  testing::ScopedTempDir dir;
  WriteShards(dir);
  auto ckpt = SafetensorsCheckpoint::Open(FileSystem::Default(), dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(), HasSubstr("2 .safetensors files"));
}

TEST(CheckpointFilesTest, RejectsFolderWithoutSafetensors) {
  testing::ScopedTempDir dir;
  auto ckpt = SafetensorsCheckpoint::Open(FileSystem::Default(), dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(SafetensorsCheckpoint::Open(FileSystem::Default(), dir / "nope").status().code(),
            StatusCode::kNotFound);
}

TEST(CheckpointFilesTest, OpensShardedCheckpoint) {
  testing::ScopedTempDir dir;
  WriteShards(dir);
  WriteIndex(dir, {{"a", kShard1}, {"b", kShard1}, {"c", kShard2}});
  auto ckpt = SafetensorsCheckpoint::Open(FileSystem::Default(), dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_TRUE(ckpt->sharded());
  ASSERT_TRUE(ckpt->index().has_value());
  EXPECT_EQ(ckpt->shard_files(), (std::vector<std::string>{kShard1, kShard2}));
  auto c = ckpt->Find("c");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->shard, 1u);
  EXPECT_EQ(c->entry->name, "c");
  EXPECT_EQ(ckpt->shard(c->shard).path(), dir / kShard2);
  EXPECT_TRUE(ckpt->warnings().empty());
  SafetensorsCheckpoint moved = std::move(*ckpt);  // entries stay valid across moves
  EXPECT_EQ(moved.Find("a")->entry->dtype, DType::kBF16);
}

TEST(CheckpointFilesTest, MissingShardIsAnErrorNamingIt) {
  testing::ScopedTempDir dir;
  WriteShards(dir);
  WriteIndex(dir,
             {{"a", kShard1}, {"b", kShard1}, {"c", kShard2}, {"d", "model-extra.safetensors"}});
  auto ckpt = SafetensorsCheckpoint::Open(FileSystem::Default(), dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(ckpt.status().message(), HasSubstr("model-extra.safetensors"));
}

TEST(CheckpointFilesTest, TensorListedButNotInItsShard) {
  testing::ScopedTempDir dir;
  WriteShards(dir);
  WriteIndex(dir, {{"a", kShard1}, {"b", kShard1}, {"c", kShard2}, {"ghost", kShard2}});
  auto ckpt = SafetensorsCheckpoint::Open(FileSystem::Default(), dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(), HasSubstr("'ghost'"));
  EXPECT_THAT(ckpt.status().message(), HasSubstr("does not contain it"));
}

TEST(CheckpointFilesTest, TensorInShardButNotInIndex) {
  testing::ScopedTempDir dir;
  WriteShards(dir);
  WriteIndex(dir, {{"a", kShard1}, {"c", kShard2}});
  auto ckpt = SafetensorsCheckpoint::Open(FileSystem::Default(), dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(), HasSubstr("tensor 'b' is not listed"));
}

TEST(CheckpointFilesTest, TensorInTheWrongShard) {
  testing::ScopedTempDir dir;
  WriteShards(dir);
  WriteIndex(dir, {{"a", kShard1}, {"b", kShard2}, {"c", kShard2}});
  auto ckpt = SafetensorsCheckpoint::Open(FileSystem::Default(), dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(), HasSubstr("'b'"));
}

TEST(CheckpointFilesTest, UnlistedShardGivesAWarning) {
  testing::ScopedTempDir dir;
  WriteShards(dir);
  testing::WriteTestSafetensors(dir / "stray.safetensors", {{"s", DType::kU8, {1}}});
  WriteIndex(dir, {{"a", kShard1}, {"b", kShard1}, {"c", kShard2}});
  auto ckpt = SafetensorsCheckpoint::Open(FileSystem::Default(), dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  ASSERT_EQ(ckpt->warnings().size(), 1u);
  EXPECT_THAT(ckpt->warnings()[0], HasSubstr("stray.safetensors"));
  EXPECT_THAT(ckpt->warnings()[0], HasSubstr("vLLM"));
  EXPECT_FALSE(ckpt->Find("s").has_value());
}

TEST(CheckpointFilesTest, InvalidIndexIsRejected) {
  testing::ScopedTempDir dir;
  WriteShards(dir);
  ASSERT_TRUE(
      WriteWholeFile(dir / "model.safetensors.index.json", R"({"weight_map":{"a":"../x"}})").ok());
  auto ckpt = SafetensorsCheckpoint::Open(FileSystem::Default(), dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(), HasSubstr("model.safetensors.index.json"));
}

}  // namespace
}  // namespace spk
