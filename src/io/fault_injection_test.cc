#include "io/fault_injection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

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

}  // namespace
}  // namespace spk
