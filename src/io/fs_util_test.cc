#include "io/fs_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "base/test_util.h"
#include "io/test_util.h"

namespace spk {
namespace {

TEST(FsUtilTest, WriteReadCopyList) {
  testing::ScopedTempDir dir;
  std::string data(3 << 20, '\0');  // bigger than one read/write buffer
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 % 251);
  ASSERT_TRUE(WriteWholeFile(dir / "b.bin", data).ok());
  ASSERT_TRUE(CopyFile(dir / "b.bin", dir / "a.bin").ok());
  auto copied = ReadWholeFile(dir / "a.bin");
  ASSERT_TRUE(copied.ok());
  EXPECT_EQ(*copied, data);
  std::filesystem::create_directory(dir / "sub");
  auto names = ListDirectory(dir.path());
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"a.bin", "b.bin", "sub"}));
  EXPECT_TRUE(FileExists(dir / "a.bin"));
  EXPECT_FALSE(FileExists(dir / "sub"));
  EXPECT_TRUE(IsDirectory(dir / "sub"));
  EXPECT_FALSE(IsDirectory(dir / "a.bin"));
}

TEST(FsUtilTest, ErrorsNameThePath) {
  testing::ScopedTempDir dir;
  auto missing = ReadWholeFile(dir / "missing.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), ::testing::HasSubstr("missing.json"));
  test_util::ExpectError(CopyFile(dir / "missing.json", dir / "x"), StatusCode::kNotFound,
                         "no such file: " + (dir / "missing.json"));
  EXPECT_EQ(ListDirectory(dir / "nodir").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace spk
