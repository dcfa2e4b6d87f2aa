#include "io/fault_injection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <vector>

#include "base/test_util.h"
#include "io/fs_util.h"
#include "io/test_util.h"

namespace spk {
namespace {

using ::testing::HasSubstr;

TEST(FaultInjectionTest, WriteLimitFailsLikeDiskFull) {
  testing::ScopedTempDir dir;
  FaultInjectingFileSystem fs(FileSystem::Default());
  fs.SetWriteLimit(10);
  auto w = fs.CreateForWrite(dir / "out.safetensors");
  ASSERT_TRUE(w.ok());
  std::vector<uint8_t> six(6, 1);
  EXPECT_TRUE((*w)->WriteAt(0, six).ok());
  Status s = (*w)->WriteAt(6, six);  // 12 > 10
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("disk full while writing " + (dir / "out.safetensors")));
  EXPECT_EQ(fs.bytes_written(), 6u);
  std::vector<uint8_t> four(4, 1);
  EXPECT_TRUE((*w)->WriteAt(6, four).ok());  // exactly up to the limit is fine
  fs.ClearFaults();
  EXPECT_TRUE((*w)->WriteAt(10, six).ok());
}

TEST(FaultInjectionTest, ReadsFailFromOffset) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "in.bin";
  ASSERT_TRUE(WriteWholeFile(path, std::string(100, 'x')).ok());
  FaultInjectingFileSystem fs(FileSystem::Default());
  auto r = fs.OpenForRead(path);
  ASSERT_TRUE(r.ok());
  fs.FailReadsFrom(path, 50);  // applies to files opened before the fault was set
  std::vector<uint8_t> buf(10);
  EXPECT_TRUE((*r)->ReadAt(40, buf).ok());  // [40, 50) stays below the fault
  Status s = (*r)->ReadAt(45, buf);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr("Input/output error"));
}

TEST(FaultInjectionTest, TruncatedFileAppearsShorterAndShortReadsFail) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "in.bin";
  ASSERT_TRUE(WriteWholeFile(path, std::string(100, 'x')).ok());
  FaultInjectingFileSystem fs(FileSystem::Default());
  fs.TruncateFile(path, 30);
  auto r = fs.OpenForRead(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->size(), 30u);
  std::vector<uint8_t> buf(10);
  EXPECT_TRUE((*r)->ReadAt(20, buf).ok());
  Status s = (*r)->ReadAt(25, buf);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("ends at byte 30"));
  EXPECT_THAT(s.message(), HasSubstr(path));
}

// A fault aimed at a file name hits that file in any folder (a random temporary one too), for
// whole-file writes and as the destination of a copy; other files are untouched.
TEST(FaultInjectionTest, WriteFaultByNameCoversWholeFilesAndCopies) {
  testing::ScopedTempDir dir;
  FaultInjectingFileSystem fs(FileSystem::Default());
  ASSERT_TRUE(fs.WriteFile(dir / "tokenizer.json", "{}").ok());
  fs.FailOperation(FileOp::kWrite, "config.json", ENOSPC);
  Status s = fs.WriteFile(dir / "config.json", "{}");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("disk full while writing " + (dir / "config.json")));
  EXPECT_TRUE(fs.WriteFile(dir / "other.json", "{}").ok());
  fs.FailOperation(FileOp::kWrite, "copy.json", ENOSPC);
  EXPECT_THAT(fs.CopyFile(dir / "tokenizer.json", dir / "copy.json").message(),
              HasSubstr("disk full while writing " + (dir / "copy.json")));
  fs.ClearFaults();
  EXPECT_TRUE(fs.WriteFile(dir / "config.json", "{}").ok());
}

TEST(FaultInjectionTest, ReadFaultsCoverWholeFilesAndCopySources) {
  testing::ScopedTempDir dir;
  ASSERT_TRUE(WriteWholeFile(dir / "index.json", std::string(100, 'x')).ok());
  FaultInjectingFileSystem fs(FileSystem::Default());
  fs.FailReadsFrom(dir / "index.json", 60);
  auto read = fs.ReadFile(dir / "index.json");
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("cannot read " + (dir / "index.json")));
  test_util::ExpectError(fs.CopyFile(dir / "index.json", dir / "copy.json"), StatusCode::kIoError,
                         "cannot read " + (dir / "index.json"));
  fs.ClearFaults();
  fs.FailOperation(FileOp::kRead, "index.json", EIO);
  EXPECT_THAT(fs.ReadFile(dir / "index.json").status().message(), HasSubstr("Input/output error"));
  fs.ClearFaults();
  EXPECT_EQ(*fs.ReadFile(dir / "index.json"), std::string(100, 'x'));
}

// A range copied between two of its files goes through their reads and writes, so the faults of
// both apply (the kernel copy of the POSIX files would bypass them).
TEST(FaultInjectionTest, RangeCopiesSeeTheFaultsOfBothFiles) {
  testing::ScopedTempDir dir;
  ASSERT_TRUE(WriteWholeFile(dir / "in.bin", std::string(100, 'x')).ok());
  FaultInjectingFileSystem fs(FileSystem::Default());
  auto r = fs.OpenForRead(dir / "in.bin");
  auto w = fs.CreateForWrite(dir / "out.bin");
  ASSERT_TRUE(r.ok() && w.ok());
  fs.FailReadsFrom(dir / "in.bin", 60);
  Status s = (*w)->CopyFrom(0, **r, 40, 30);
  EXPECT_THAT(s.message(), HasSubstr("cannot read " + (dir / "in.bin")));
  fs.ClearFaults();
  fs.SetWriteLimit(20);
  s = (*w)->CopyFrom(0, **r, 40, 30);
  EXPECT_THAT(s.message(), HasSubstr("disk full while writing " + (dir / "out.bin")));
  fs.ClearFaults();
  ASSERT_TRUE((*w)->CopyFrom(0, **r, 40, 30).ok());
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ(*fs.ReadFile(dir / "out.bin"), std::string(30, 'x'));
}

TEST(FaultInjectionTest, WriteLimitCountsWholeFiles) {
  testing::ScopedTempDir dir;
  FaultInjectingFileSystem fs(FileSystem::Default());
  fs.SetWriteLimit(10);
  EXPECT_TRUE(fs.WriteFile(dir / "a", "123456").ok());
  EXPECT_THAT(fs.WriteFile(dir / "b", "123456").message(), HasSubstr("disk full while writing"));
  EXPECT_EQ(fs.bytes_written(), 6u);
}

TEST(FaultInjectionTest, FolderOperationsFailOnRequest) {
  testing::ScopedTempDir dir;
  FaultInjectingFileSystem fs(FileSystem::Default());
  fs.FailOperation(FileOp::kList, dir.path(), EIO);
  fs.FailOperation(FileOp::kCreateDirectory, "sub", EIO);
  fs.FailOperation(FileOp::kRename, "renamed", EIO);
  fs.FailOperation(FileOp::kSync, "a", EIO);
  fs.FailOperation(FileOp::kRemove, "a", EIO);
  EXPECT_THAT(fs.ListDirectory(dir.path()).status().message(), HasSubstr("cannot list"));
  EXPECT_THAT(fs.CreateDirectory(dir / "sub").message(), HasSubstr("cannot create folder"));
  ASSERT_TRUE(fs.WriteFile(dir / "a", "x").ok());
  EXPECT_THAT(fs.Rename(dir / "a", dir / "renamed").message(),
              HasSubstr("cannot rename " + (dir / "renamed")));
  EXPECT_THAT(fs.SyncPath(dir / "a").message(), HasSubstr("cannot sync"));
  EXPECT_THAT(fs.RemoveAll(dir / "a").message(), HasSubstr("cannot remove"));
  EXPECT_TRUE(fs.FileExists(dir / "a"));  // nothing happened
  fs.ClearFaults();
  EXPECT_TRUE(fs.CreateDirectory(dir / "sub").ok());
  EXPECT_TRUE(fs.Rename(dir / "a", dir / "renamed").ok());
  EXPECT_TRUE(fs.SyncPath(dir / "renamed").ok());
  EXPECT_TRUE(fs.RemoveAll(dir / "sub").ok());
  EXPECT_EQ(*fs.ListDirectory(dir.path()), std::vector<std::string>{"renamed"});
}

TEST(FaultInjectionTest, ResolvingALinkCanFail) {
  testing::ScopedTempDir dir;
  ASSERT_TRUE(WriteWholeFile(dir / "f.txt", "x").ok());
  ASSERT_EQ(::symlink("f.txt", (dir / "link").c_str()), 0);
  FaultInjectingFileSystem fs(FileSystem::Default());
  fs.FailOperation(FileOp::kResolve, "link", EIO);
  EXPECT_TRUE(fs.IsLink(dir / "link"));
  for (const Status& s : {fs.ReadLink(dir / "link").status(), fs.RealPath(dir / "link").status()}) {
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_THAT(s.message(), HasSubstr("cannot resolve " + (dir / "link")));
  }
  EXPECT_TRUE(fs.RealPath(dir / "f.txt").ok());
  fs.ClearFaults();
  auto text = fs.ReadLink(dir / "link");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "f.txt");
}

TEST(FaultInjectionTest, ProcFilesReadWholeAndTheirReadsCanFail) {
  FaultInjectingFileSystem fs(FileSystem::Default());
  auto status = fs.ReadFile("/proc/self/status");
  ASSERT_TRUE(status.ok()) << status.status().message();
  EXPECT_THAT(*status, HasSubstr("VmRSS"));
  fs.FailOperation(FileOp::kRead, "status", EIO);
  EXPECT_THAT(fs.ReadFile("/proc/self/status").status().message(),
              HasSubstr("cannot read /proc/self/status"));
}

}  // namespace
}  // namespace spk
