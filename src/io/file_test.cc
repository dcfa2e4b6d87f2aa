#include "io/file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <thread>
#include <vector>

#include "base/test_util.h"
#include "io/fs_util.h"
#include "io/test_util.h"

namespace spk {
namespace {

using ::testing::HasSubstr;

TEST(PosixFileTest, WriteThenReadBack) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "a.bin";
  auto w = FileSystem::Default()->CreateForWrite(path);
  ASSERT_TRUE(w.ok()) << w.status().message();
  const std::vector<uint8_t> tail = {5, 6, 7};
  const std::vector<uint8_t> head = {1, 2, 3, 4};
  ASSERT_TRUE((*w)->WriteAt(4, tail).ok());  // out of order, as the quantizer's workers write
  ASSERT_TRUE((*w)->WriteAt(0, head).ok());
  ASSERT_TRUE((*w)->Sync().ok());
  ASSERT_TRUE((*w)->Close().ok());
  test_util::ExpectError((*w)->WriteAt(0, head), StatusCode::kInternal,
                         "write to closed file " + path);

  auto r = FileSystem::Default()->OpenForRead(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->size(), 7u);
  EXPECT_EQ((*r)->path(), path);
  std::vector<uint8_t> out(3);
  ASSERT_TRUE((*r)->ReadAt(3, out).ok());
  EXPECT_EQ(out, (std::vector<uint8_t>{4, 5, 6}));
}

TEST(PosixFileTest, ShortReadIsAnErrorNamingThePath) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "short.bin";
  ASSERT_TRUE(WriteWholeFile(path, "abcd").ok());
  auto r = FileSystem::Default()->OpenForRead(path);
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> out(8);
  Status s = (*r)->ReadAt(2, out);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr("ends at byte 4"));
}

// A range of one file written into another at an offset, in the kernel (the default) and
// through user memory (SPARKULATOR_READ=pread): the same bytes, nothing else touched.
TEST(PosixFileTest, CopyFromWritesTheSourceRangeAtTheOffset) {
  testing::ScopedTempDir dir;
  std::string source_bytes(3 << 20, '\0');  // more than the 1 MiB chunks of the copy by hand
  for (size_t i = 0; i < source_bytes.size(); ++i) source_bytes[i] = static_cast<char>(i * 7 + 3);
  ASSERT_TRUE(WriteWholeFile(dir / "src.bin", source_bytes).ok());
  for (const char* read_mode : {"", "pread"}) {
    SCOPED_TRACE(read_mode);
    testing::ScopedReadMode mode(read_mode);
    auto r = FileSystem::Default()->OpenForRead(dir / "src.bin");
    ASSERT_TRUE(r.ok());
    auto w = FileSystem::Default()->CreateForWrite(dir / "dst.bin");
    ASSERT_TRUE(w.ok());
    const std::vector<uint8_t> head = {9, 9, 9, 9, 9};
    ASSERT_TRUE((*w)->WriteAt(0, head).ok());
    const uint64_t from = 1000, length = source_bytes.size() - 5000;
    ASSERT_TRUE((*w)->CopyFrom(5, **r, from, length).ok());
    ASSERT_TRUE((*w)->Close().ok());
    auto written = FileSystem::Default()->ReadFile(dir / "dst.bin");
    ASSERT_TRUE(written.ok());
    EXPECT_EQ(*written, std::string(5, '\x09') + source_bytes.substr(from, length));
  }
}

// A source that ends before the range (truncated after it was opened) is the short-read error
// naming the source, by either path.
TEST(PosixFileTest, CopyFromAShortSourceNamesIt) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "src.bin";
  for (const char* read_mode : {"", "pread"}) {
    SCOPED_TRACE(read_mode);
    testing::ScopedReadMode mode(read_mode);
    ASSERT_TRUE(WriteWholeFile(path, std::string(4096, 'x')).ok());
    auto r = FileSystem::Default()->OpenForRead(path);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(::truncate(path.c_str(), 100), 0);
    auto w = FileSystem::Default()->CreateForWrite(dir / "dst.bin");
    ASSERT_TRUE(w.ok());
    const Status s = (*w)->CopyFrom(0, **r, 0, 4096);
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_THAT(s.message(), HasSubstr(path));
    EXPECT_THAT(s.message(), HasSubstr("ends at byte 100"));
  }
}

TEST(PosixFileTest, MissingFileIsNotFound) {
  testing::ScopedTempDir dir;
  auto r = FileSystem::Default()->OpenForRead(dir / "nope");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("nope"));
}

TEST(PosixFileTest, ConcurrentDisjointWritesAndReads) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "c.bin";
  auto w = FileSystem::Default()->CreateForWrite(path);
  ASSERT_TRUE(w.ok());
  constexpr int kThreads = 4, kChunk = 4096;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> chunk(kChunk, static_cast<uint8_t>(t + 1));
      EXPECT_TRUE((*w)->WriteAt(uint64_t{kChunk} * t, chunk).ok());
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE((*w)->Close().ok());
  auto r = FileSystem::Default()->OpenForRead(path);
  ASSERT_TRUE(r.ok());
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> chunk(kChunk);
      EXPECT_TRUE((*r)->ReadAt(uint64_t{kChunk} * t, chunk).ok());
      EXPECT_EQ(chunk, std::vector<uint8_t>(kChunk, static_cast<uint8_t>(t + 1)));
    });
  }
  for (auto& th : threads) th.join();
}

TEST(PosixFileTest, EnospcMessageSaysDiskFull) {
  Status s = IoErrorFromErrno("cannot write", "/out/x.safetensors", ENOSPC);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("disk full while writing /out/x.safetensors"));
}

TEST(PosixFileSystemTest, FoldersRenamesAndRemoval) {
  testing::ScopedTempDir dir;
  FileSystem* fs = FileSystem::Default();
  EXPECT_EQ(fs->KindOf(dir / "t"), FileKind::kMissing);
  ASSERT_TRUE(fs->CreateDirectory(dir / "t").ok());
  EXPECT_EQ(fs->CreateDirectory(dir / "t").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(fs->KindOf(dir / "t"), FileKind::kDirectory);
  ASSERT_TRUE(fs->CreateDirectory(dir / "t/nested").ok());
  ASSERT_TRUE(fs->WriteFile(dir / "t/nested/a.json", "{}").ok());
  EXPECT_EQ(fs->KindOf(dir / "t/nested/a.json"), FileKind::kFile);
  EXPECT_TRUE(fs->SyncPath(dir / "t/nested/a.json").ok());
  EXPECT_TRUE(fs->SyncPath(dir / "t").ok());
  ASSERT_TRUE(fs->Rename(dir / "t", dir / "u").ok());
  EXPECT_EQ(*fs->ReadFile(dir / "u/nested/a.json"), "{}");
  EXPECT_THAT(fs->Rename(dir / "t", dir / "v").message(),
              HasSubstr("cannot rename " + (dir / "t")));
  ASSERT_TRUE(fs->RemoveAll(dir / "u").ok());
  EXPECT_EQ(fs->KindOf(dir / "u"), FileKind::kMissing);
  EXPECT_TRUE(fs->RemoveAll(dir / "u").ok());  // missing is fine
  EXPECT_THAT(fs->SyncPath(dir / "u").message(), HasSubstr(dir / "u"));
}

TEST(PosixFileTest, LinksAreSeenReadAndResolved) {
  testing::ScopedTempDir dir;
  FileSystem* fs = FileSystem::Default();
  ASSERT_TRUE(fs->CreateDirectory(dir / "real").ok());
  ASSERT_TRUE(fs->WriteFile(dir / "real/f.txt", "x").ok());
  ASSERT_EQ(::symlink("real/f.txt", (dir / "link").c_str()), 0);
  ASSERT_EQ(::symlink("nowhere", (dir / "dangling").c_str()), 0);
  EXPECT_TRUE(fs->IsLink(dir / "link"));
  EXPECT_TRUE(fs->IsLink(dir / "dangling"));
  EXPECT_FALSE(fs->IsLink(dir / "real/f.txt"));
  EXPECT_FALSE(fs->IsLink(dir / "missing"));
  auto text = fs->ReadLink(dir / "link");
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, "real/f.txt");
  EXPECT_EQ(fs->ReadLink(dir / "real/f.txt").status().code(), StatusCode::kInvalidInput);
  auto real = fs->RealPath(dir / "link");
  auto expected = fs->RealPath(dir / "real/./f.txt");
  ASSERT_TRUE(real.ok() && expected.ok());
  EXPECT_EQ(*real, *expected);
  EXPECT_EQ(real->front(), '/');
  EXPECT_EQ(Basename(*real), "f.txt");
  auto dangling = fs->RealPath(dir / "dangling");
  EXPECT_EQ(dangling.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(dangling.status().message(), HasSubstr("dangling"));
  EXPECT_TRUE(fs->Exists(dir / "link"));
  EXPECT_FALSE(fs->Exists(dir / "dangling"));
}

TEST(PosixFileTest, CreateDirectoriesMakesEveryMissingFolder) {
  testing::ScopedTempDir dir;
  FileSystem* fs = FileSystem::Default();
  ASSERT_TRUE(fs->CreateDirectories(dir / "a/b/c").ok());
  EXPECT_TRUE(fs->IsDirectory(dir / "a/b/c"));
  EXPECT_TRUE(fs->CreateDirectories(dir / "a/b").ok());  // already there
  ASSERT_TRUE(fs->WriteFile(dir / "file", "x").ok());
  Status s = fs->CreateDirectories(dir / "file/sub");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("file/sub"));
}

TEST(PosixFileTest, ReadFileReadsProcFilesWhoseStatSizeIsZero) {
  auto status = FileSystem::Default()->ReadFile("/proc/self/status");
  ASSERT_TRUE(status.ok()) << status.status().message();
  EXPECT_THAT(*status, HasSubstr("VmRSS"));
}

TEST(PathTest, SplitsAndJoinsAsStdFilesystem) {
  EXPECT_EQ(Basename("a/b/c.json"), "c.json");
  EXPECT_EQ(Basename("c.json"), "c.json");
  EXPECT_EQ(Basename("a/b/"), "");
  EXPECT_EQ(Dirname("a/b/c.json"), "a/b");
  EXPECT_EQ(Dirname("a//c.json"), "a");
  EXPECT_EQ(Dirname("c.json"), "");
  EXPECT_EQ(Dirname("/c.json"), "/");
  EXPECT_EQ(JoinPath("", "x.svg"), "x.svg");
  EXPECT_EQ(JoinPath("a", "x.svg"), "a/x.svg");
  EXPECT_EQ(JoinPath("/", "x.svg"), "/x.svg");
}

}  // namespace
}  // namespace spk
