// RandomAccessFile::View and FileView (io/mapped_view.h): mapped views of the POSIX file system
// read the same bytes as ReadAt at any offset and length; a range past the end is an IoError
// naming the path; a real truncate(2) of a mapped file while its bytes are consumed is an IoError
// naming the path, not a crash (the SIGBUS guard), and a SIGBUS outside any view still kills;
// SPARKULATOR_READ=pread and wrapped file systems give buffered views that go through ReadAt.
#include "io/mapped_view.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "io/fault_injection.h"
#include "io/file.h"
#include "io/test_util.h"

namespace spk {
namespace {

using ::testing::HasSubstr;

const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

// A file of `size` bytes whose byte i is a function of i (not periodic in the page size).
std::vector<uint8_t> WritePattern(const std::string& path, size_t size) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>((i * 131 + i / 251) & 0xff);
  EXPECT_TRUE(FileSystem::Default()
                  ->WriteFile(path, {reinterpret_cast<const char*>(bytes.data()), bytes.size()})
                  .ok());
  return bytes;
}

std::unique_ptr<RandomAccessFile> Open(FileSystem* fs, const std::string& path) {
  auto file = fs->OpenForRead(path);
  EXPECT_TRUE(file.ok()) << file.status().message();
  return file.ok() ? std::move(*file) : nullptr;
}

// The bytes a view hands to Consume.
std::vector<uint8_t> Bytes(const FileView& view) {
  std::vector<uint8_t> out;
  const Status s = view.Consume([&](std::span<const uint8_t> bytes) {
    out.assign(bytes.begin(), bytes.end());
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(MappedViewTest, MapsAndReadsTheSameBytesAsReadAtAtOddOffsets) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "a.bin";
  const size_t size = 5 * kPage + 123;
  const std::vector<uint8_t> want = WritePattern(path, size);
  auto file = Open(FileSystem::Default(), path);
  ASSERT_NE(file, nullptr);
  const std::vector<std::pair<uint64_t, uint64_t>> ranges = {{0, size},
                                                             {1, 1},
                                                             {kPage - 1, 2},
                                                             {kPage, kPage},
                                                             {kPage + 7, 3 * kPage + 5},
                                                             {size - 1, 1},
                                                             {size - kPage - 3, kPage + 3},
                                                             {12345 % size, 999}};
  for (auto [offset, length] : ranges) {
    auto view = file->View(offset, length);
    ASSERT_TRUE(view.ok()) << view.status().message();
    EXPECT_TRUE(view->mapped()) << offset;
    EXPECT_EQ(view->size(), length);
    std::vector<uint8_t> read(length);
    ASSERT_TRUE(file->ReadAt(offset, read).ok());
    const std::vector<uint8_t> expected(want.begin() + offset, want.begin() + offset + length);
    EXPECT_EQ(read, expected) << offset;
    EXPECT_EQ(Bytes(*view), expected) << offset << " " << length;
  }
}

TEST(MappedViewTest, ViewsOutliveMovesAndWorkFromSeveralThreads) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "a.bin";
  const std::vector<uint8_t> want = WritePattern(path, 64 * kPage);
  auto file = Open(FileSystem::Default(), path);
  ASSERT_NE(file, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 16; ++i) {
        const uint64_t offset = static_cast<uint64_t>((t * 16 + i) * kPage / 2 + t);
        auto view = file->View(offset, 3 * kPage);
        if (!view.ok()) continue;
        FileView moved = std::move(*view);
        const std::vector<uint8_t> expected(want.begin() + offset,
                                            want.begin() + offset + 3 * kPage);
        if (Bytes(moved) == expected) ++good;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(good.load(), 64);
}

TEST(MappedViewTest, EmptyRangesAreEmptyViews) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "a.bin";
  WritePattern(path, 100);
  auto file = Open(FileSystem::Default(), path);
  ASSERT_NE(file, nullptr);
  for (uint64_t offset : {uint64_t{0}, uint64_t{50}, uint64_t{100}}) {
    auto view = file->View(offset, 0);
    ASSERT_TRUE(view.ok()) << view.status().message();
    EXPECT_EQ(view->size(), 0u);
    EXPECT_TRUE(Bytes(*view).empty());
  }
  testing::ScopedTempDir empty_dir;
  const std::string empty = empty_dir / "empty.bin";
  ASSERT_TRUE(FileSystem::Default()->WriteFile(empty, "").ok());
  auto empty_file = Open(FileSystem::Default(), empty);
  ASSERT_NE(empty_file, nullptr);
  auto view = empty_file->View(0, 0);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_TRUE(Bytes(*view).empty());
}

TEST(MappedViewTest, RangePastTheEndIsAnIoErrorNamingThePath) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "a.bin";
  WritePattern(path, 3 * kPage);
  auto file = Open(FileSystem::Default(), path);
  ASSERT_NE(file, nullptr);
  for (auto [offset, length] : std::vector<std::pair<uint64_t, uint64_t>>{
           {3 * kPage - 10, 11}, {3 * kPage + 1, 0}, {0, 4 * kPage}, {~uint64_t{0} - 2, 8}}) {
    auto view = file->View(offset, length);
    ASSERT_FALSE(view.ok()) << offset;
    EXPECT_EQ(view.status().code(), StatusCode::kIoError);
    EXPECT_THAT(view.status().message(), HasSubstr("unexpected end of file in " + path));
  }
}

// truncate(2) while mapped: Consume's callback runs to its end (it sees zeros where the pages were)
// and Consume returns the IoError, naming the path and where the file now ends.
TEST(MappedViewTest, TruncatedWhileConsumedIsAnIoErrorNotACrash) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "a.bin";
  const std::vector<uint8_t> want = WritePattern(path, 8 * kPage);
  auto file = Open(FileSystem::Default(), path);
  ASSERT_NE(file, nullptr);
  auto view = file->View(kPage + 5, 6 * kPage);
  ASSERT_TRUE(view.ok()) << view.status().message();
  ASSERT_TRUE(view->mapped());
  bool ran_to_end = false;
  uint64_t sum = 0;
  const Status s = view->Consume([&](std::span<const uint8_t> bytes) {
    sum += bytes[0];  // the first page, before the truncation
    EXPECT_EQ(::truncate(path.c_str(), static_cast<off_t>(3 * kPage)), 0);
    for (uint8_t b : bytes) sum += b;  // pages past the new end fault
    ran_to_end = true;
    return Status::Ok();
  });
  EXPECT_TRUE(ran_to_end);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.message();
  EXPECT_THAT(s.message(), HasSubstr("unexpected end of file in " + path));
  EXPECT_THAT(s.message(), HasSubstr("the file ends at byte " + std::to_string(3 * kPage)));
  // A view made after the truncation fails at once, and the process still handles a second fault.
  auto late = file->View(2 * kPage, 2 * kPage);
  ASSERT_FALSE(late.ok());
  EXPECT_THAT(late.status().message(), HasSubstr("unexpected end of file in " + path));
  auto before = file->View(0, 3 * kPage);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(::truncate(path.c_str(), 0), 0);
  const Status again = before->Consume([&](std::span<const uint8_t> bytes) {
    for (uint8_t b : bytes) sum += b;
    return Status::Ok();
  });
  EXPECT_EQ(again.code(), StatusCode::kIoError) << again.message();
  EXPECT_THAT(again.message(), HasSubstr(path));
}

// The guard only covers views being consumed: a SIGBUS anywhere else still ends the process (ours
// chains to the handler that was there before, or to the default action).
TEST(MappedViewDeathTest, SigbusOutsideAViewStillKills) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "a.bin";
  WritePattern(path, 2 * kPage);
  auto file = Open(FileSystem::Default(), path);
  ASSERT_NE(file, nullptr);
  ASSERT_TRUE(file->View(0, kPage).ok());  // installs the handler
  EXPECT_DEATH(
      {
        const int fd = ::open(path.c_str(), O_RDONLY);
        auto* p = static_cast<volatile const uint8_t*>(
            ::mmap(nullptr, 2 * kPage, PROT_READ, MAP_SHARED, fd, 0));
        ::ftruncate(::open(path.c_str(), O_WRONLY), 0);
        std::printf("%d\n", p[kPage]);
      },
      "");
}

TEST(MappedViewTest, PreadModeAndWrappedFilesGiveBufferedViewsThroughReadAt) {
  testing::ScopedTempDir dir;
  const std::string path = dir / "a.bin";
  const std::vector<uint8_t> want = WritePattern(path, 3 * kPage);
  {
    ScopedEnv pread("SPARKULATOR_READ", "pread");
    auto file = Open(FileSystem::Default(), path);
    ASSERT_NE(file, nullptr);
    auto view = file->View(7, 2 * kPage);
    ASSERT_TRUE(view.ok());
    EXPECT_FALSE(view->mapped());
    EXPECT_EQ(Bytes(*view), std::vector<uint8_t>(want.begin() + 7, want.begin() + 7 + 2 * kPage));
    EXPECT_THAT(file->View(kPage, 3 * kPage).status().message(),
                HasSubstr("unexpected end of file in " + path));
  }
  FaultInjectingFileSystem faulty(FileSystem::Default());
  faulty.FailReadsFrom(path, 2 * kPage);
  auto file = Open(&faulty, path);
  ASSERT_NE(file, nullptr);
  auto view = file->View(0, kPage);
  ASSERT_TRUE(view.ok());
  EXPECT_FALSE(view->mapped());
  EXPECT_EQ(Bytes(*view), std::vector<uint8_t>(want.begin(), want.begin() + kPage));
  auto failed = file->View(kPage, 2 * kPage);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("cannot read " + path));
}

}  // namespace
}  // namespace spk
