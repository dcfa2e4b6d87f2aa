#include "io/atomic_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>

#include "base/test_util.h"
#include "io/fault_injection.h"
#include "io/fs_util.h"
#include "io/test_util.h"

namespace spk {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// Entries of `dir` whose name marks them as our temporary or aside folders.
int CountHiddenSiblings(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(".", 0) == 0) ++n;
  }
  return n;
}

TEST(AtomicOutputDirTest, CommitRenamesTempToDst) {
  testing::ScopedTempDir dir;
  const std::string dst = dir / "out";
  auto out = AtomicOutputDir::Create(FileSystem::Default(), dst, /*force=*/false);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_THAT(out->temp_path(), HasSubstr("/.out.tmp-"));
  EXPECT_TRUE(IsDirectory(out->temp_path()));
  EXPECT_FALSE(fs::exists(dst));
  ASSERT_TRUE(WriteWholeFile(out->temp_path() + "/config.json", "{}").ok());
  ASSERT_TRUE(out->Commit().ok());
  EXPECT_EQ(*ReadWholeFile(dst + "/config.json"), "{}");
  EXPECT_EQ(CountHiddenSiblings(dir.path()), 0);
}

TEST(AtomicOutputDirTest, DestructorWithoutCommitRemovesTemp) {
  testing::ScopedTempDir dir;
  std::string temp;
  {
    auto out = AtomicOutputDir::Create(FileSystem::Default(), dir / "out", false);
    ASSERT_TRUE(out.ok());
    temp = out->temp_path();
    AtomicOutputDir moved = std::move(*out);  // ownership moves; only one removal
    ASSERT_TRUE(WriteWholeFile(moved.temp_path() + "/half.safetensors", "xx").ok());
    fs::create_directory(moved.temp_path() + "/nested");
  }
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(dir / "out"));
  EXPECT_EQ(CountHiddenSiblings(dir.path()), 0);
}

TEST(AtomicOutputDirTest, RefusesNonEmptyDstWithoutForce) {
  testing::ScopedTempDir dir;
  fs::create_directory(dir / "out");
  ASSERT_TRUE(WriteWholeFile(dir / "out/old.txt", "old").ok());
  auto out = AtomicOutputDir::Create(FileSystem::Default(), dir / "out", false);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(out.status().message(), HasSubstr("--force"));
  EXPECT_EQ(CountHiddenSiblings(dir.path()), 0);
}

TEST(AtomicOutputDirTest, AcceptsExistingEmptyDst) {
  testing::ScopedTempDir dir;
  fs::create_directory(dir / "out");
  auto out = AtomicOutputDir::Create(FileSystem::Default(), dir / "out/", false);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(WriteWholeFile(out->temp_path() + "/new.txt", "new").ok());
  ASSERT_TRUE(out->Commit().ok());
  EXPECT_TRUE(FileExists(dir / "out/new.txt"));
}

TEST(AtomicOutputDirTest, ForceReplacesExistingDst) {
  testing::ScopedTempDir dir;
  fs::create_directory(dir / "out");
  ASSERT_TRUE(WriteWholeFile(dir / "out/old.txt", "old").ok());
  auto out = AtomicOutputDir::Create(FileSystem::Default(), dir / "out", /*force=*/true);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(FileExists(dir / "out/old.txt"));  // untouched until Commit
  ASSERT_TRUE(WriteWholeFile(out->temp_path() + "/new.txt", "new").ok());
  ASSERT_TRUE(out->Commit().ok());
  EXPECT_FALSE(FileExists(dir / "out/old.txt"));
  EXPECT_TRUE(FileExists(dir / "out/new.txt"));
  EXPECT_EQ(CountHiddenSiblings(dir.path()), 0);
  EXPECT_EQ(out->Commit().code(), StatusCode::kInternal);
}

TEST(AtomicOutputDirTest, RefusesMissingParent) {
  testing::ScopedTempDir dir;
  auto out = AtomicOutputDir::Create(FileSystem::Default(), dir / "no/such/out", true);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(out.status().message(), HasSubstr("does not exist"));
}

TEST(AtomicOutputDirTest, RefusesDstThatIsAFile) {
  testing::ScopedTempDir dir;
  ASSERT_TRUE(WriteWholeFile(dir / "out", "x").ok());
  auto out = AtomicOutputDir::Create(FileSystem::Default(), dir / "out", true);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kAlreadyExists);
}

TEST(WriteFileAtomicallyTest, ReplacesTheFileWhole) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "README.md";
  ASSERT_TRUE(WriteWholeFile(path, "the user's own text").ok());
  ASSERT_TRUE(WriteFileAtomically(FileSystem::Default(), path, "the card").ok());
  EXPECT_EQ(*ReadWholeFile(path), "the card");
  EXPECT_EQ(CountHiddenSiblings(dir.path()), 0);
}

// A disk that fills up mid-write, or a rename that fails, leaves the old file and no sibling.
TEST(WriteFileAtomicallyTest, AFailureLeavesTheOldFileAndNothingElse) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "README.md";
  ASSERT_TRUE(WriteWholeFile(path, "the user's own text").ok());
  FaultInjectingFileSystem faulty(FileSystem::Default());
  faulty.SetWriteLimit(4);
  Status full = WriteFileAtomically(&faulty, path, "a card longer than four bytes");
  EXPECT_EQ(full.code(), StatusCode::kIoError);
  EXPECT_THAT(full.message(), HasSubstr("cannot write " + path));
  EXPECT_THAT(full.message(), HasSubstr("disk full"));
  EXPECT_THAT(full.message(), HasSubstr("it is unchanged"));
  faulty.ClearFaults();
  faulty.FailOperation(FileOp::kRename, "README.md", EIO);
  test_util::ExpectError(WriteFileAtomically(&faulty, path, "the card"), StatusCode::kIoError,
                         "(cannot rename " + path);
  EXPECT_EQ(*ReadWholeFile(path), "the user's own text");
  EXPECT_EQ(CountHiddenSiblings(dir.path()), 0);
}

TEST(WriteFileAtomicallyTest, AMissingFolderIsAnErrorNamingThePath) {
  testing::ScopedTempDir dir;
  Status s = WriteFileAtomically(FileSystem::Default(), dir / "nodir/r.json", "{}");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("nodir/r.json"));
}

}  // namespace
}  // namespace spk
