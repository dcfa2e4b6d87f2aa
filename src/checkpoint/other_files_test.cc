// CopyOtherFiles on a real folder, through a CheckpointWriter: what is copied byte for byte, what
// is left to the writers (config, index, shards), and that a sub-folder is reported rather than
// silently dropped.
#include "checkpoint/other_files.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "io/fs_util.h"
#include "io/test_util.h"

namespace spk {
namespace {

TEST(CopyOtherFilesTest, CopiesEverythingButConfigIndexAndShards) {
  spk::testing::ScopedTempDir dir;
  const std::string src = dir / "src", dst = dir / "dst";
  std::filesystem::create_directories(src + "/1_Pooling");
  for (const char* name : {"config.json", "model.safetensors.index.json",
                           "model-00001-of-00002.safetensors", "tokenizer.json", "README.md"}) {
    ASSERT_TRUE(WriteWholeFile(src + "/" + name, std::string("bytes of ") + name).ok());
  }
  ASSERT_TRUE(WriteWholeFile(src + "/1_Pooling/config.json", "{}").ok());

  std::vector<std::string> warnings;
  CheckpointWriter out(FileSystem::Default(),
                       CheckpointWriterOptions::For(dst, false, 1, Durability::kPageCache, false));
  auto copied = CopyOtherFiles(FileSystem::Default(), src, &out, &warnings);
  ASSERT_TRUE(copied.ok()) << copied.status().message();
  ASSERT_TRUE(out.Finish().ok()) << out.status().message();
  EXPECT_EQ(*copied, (std::vector<std::string>{"README.md", "tokenizer.json"}));
  EXPECT_EQ(ReadWholeFile(dst + "/tokenizer.json").value(), "bytes of tokenizer.json");
  EXPECT_FALSE(FileExists(dst + "/config.json"));
  EXPECT_FALSE(FileExists(dst + "/model-00001-of-00002.safetensors"));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], src + "/1_Pooling: sub-folder not copied");
}

TEST(CopyOtherFilesTest, MissingSourceIsNotFound) {
  spk::testing::ScopedTempDir dir;
  std::vector<std::string> warnings;
  CheckpointWriter out(
      FileSystem::Default(),
      CheckpointWriterOptions::For(dir / "dst", false, 1, Durability::kPageCache, false));
  auto copied = CopyOtherFiles(FileSystem::Default(), dir / "absent", &out, &warnings);
  ASSERT_FALSE(copied.ok());
  EXPECT_EQ(copied.status().code(), StatusCode::kNotFound);
  EXPECT_NE(copied.status().message().find("absent"), std::string::npos);
}

}  // namespace
}  // namespace spk
