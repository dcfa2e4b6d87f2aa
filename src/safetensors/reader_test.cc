#include "safetensors/reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/endian.h"
#include "base/test_util.h"
#include "io/fault_injection.h"
#include "io/fs_util.h"
#include "io/test_util.h"
#include "safetensors/test_files.h"

namespace spk {
namespace {

using ::testing::HasSubstr;

TEST(ReaderTest, ReadsTensorsAndSlices) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "model.safetensors";
  testing::WriteTestSafetensors(path, {{"a", DType::kBF16, {2, 3}}, {"b", DType::kF32, {4}}});
  auto reader = SafetensorsReader::Open(FileSystem::Default(), path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_EQ(reader->path(), path);
  const TensorEntry* b = reader->header().Find("b");
  ASSERT_NE(b, nullptr);
  std::vector<uint8_t> all(b->nbytes());
  ASSERT_TRUE(reader->ReadTensor(*b, all).ok());
  for (size_t k = 0; k < all.size(); ++k) EXPECT_EQ(all[k], testing::PatternByte(1, k));
  std::vector<uint8_t> slice(4);
  ASSERT_TRUE(reader->ReadTensorBytes(*b, 8, slice).ok());
  EXPECT_EQ(slice[0], testing::PatternByte(1, 8));
  test_util::ExpectError(reader->ReadTensorBytes(*b, 13, slice), StatusCode::kInternal,
                         "tensor 'b': slice at byte 13 of 4 bytes lies outside its 16 bytes");
  std::vector<uint8_t> wrong(3);
  test_util::ExpectError(reader->ReadTensor(*b, wrong), StatusCode::kInternal,
                         "tensor 'b': read buffer of 3 bytes for a tensor of 16");
}

TEST(ReaderTest, RejectsFileShorterThanEightBytes) {
  testing::ScopedTempDir dir;
  ASSERT_TRUE(WriteWholeFile(dir / "x.safetensors", "1234").ok());
  auto r = SafetensorsReader::Open(FileSystem::Default(), dir / "x.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(r.status().message(), HasSubstr("x.safetensors: file is 4 bytes"));
}

std::string WithLength(uint64_t n, std::string_view rest) {
  std::string bytes(8, '\0');
  StoreLE64(bytes.data(), n);
  return bytes + std::string(rest);
}

TEST(ReaderTest, RejectsHeaderLengthAboveLimit) {
  testing::ScopedTempDir dir;
  ASSERT_TRUE(WriteWholeFile(dir / "x.safetensors", WithLength(100'000'001, "{}")).ok());
  auto r = SafetensorsReader::Open(FileSystem::Default(), dir / "x.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("larger than the limit"));
  EXPECT_THAT(r.status().message(), HasSubstr("x.safetensors"));
}

TEST(ReaderTest, RejectsHeaderLengthBeyondFile) {
  testing::ScopedTempDir dir;
  ASSERT_TRUE(WriteWholeFile(dir / "x.safetensors", WithLength(3, "{}")).ok());
  auto r = SafetensorsReader::Open(FileSystem::Default(), dir / "x.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("runs past the end of the file"));
}

TEST(ReaderTest, ValidatesHeaderAgainstFileSize) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "x.safetensors";
  testing::WriteTestSafetensors(path, {{"w", DType::kU8, {4}}});
  auto bytes = ReadWholeFile(path);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(WriteWholeFile(path, *bytes + "!").ok());  // one trailing byte
  auto r = SafetensorsReader::Open(FileSystem::Default(), path);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("unexpected bytes after the last tensor 'w'"));
}

TEST(ReaderTest, TruncatedFileIsRejectedAtOpen) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "x.safetensors";
  testing::WriteTestSafetensors(path, {{"w", DType::kF32, {16}}});
  auto intact = SafetensorsReader::Open(FileSystem::Default(), path);
  ASSERT_TRUE(intact.ok());
  FaultInjectingFileSystem fs(FileSystem::Default());
  fs.TruncateFile(path, intact->header().data_start + 10);  // 10 of the 64 data bytes remain
  auto r = SafetensorsReader::Open(&fs, path);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("tensor 'w'"));
  EXPECT_THAT(r.status().message(), HasSubstr("truncated"));
}

TEST(ReaderTest, ReadErrorNamesFileAndTensor) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "x.safetensors";
  testing::WriteTestSafetensors(path, {{"w", DType::kF32, {16}}});
  FaultInjectingFileSystem fs(FileSystem::Default());
  auto reader = SafetensorsReader::Open(&fs, path);
  ASSERT_TRUE(reader.ok());
  fs.FailReadsFrom(path, reader->header().data_start + 32);
  const TensorEntry& w = reader->header().tensors[0];
  std::vector<uint8_t> out(w.nbytes());
  Status s = reader->ReadTensor(w, out);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'w'"));
  EXPECT_THAT(s.message(), HasSubstr(path));
  std::vector<uint8_t> first_half(32);
  EXPECT_TRUE(reader->ReadTensorBytes(w, 0, first_half).ok());
}

}  // namespace
}  // namespace spk
