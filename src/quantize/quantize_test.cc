// The streaming quantize job under failure and under different thread counts: a disk that fills
// up, a read error, a source truncated while it is read (real truncation of the file on disk), and
// a real small tmpfs when the test may mount one. Every failure must be an IoError with a message
// that names the file, and must leave neither the destination nor the temporary folder behind.
// The output bytes must not depend on the thread count, nor on how the source is read (mapped, or
// copied with pread under SPARKULATOR_READ=pread).
#include "quantize/quantize.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/fault_injection.h"
#include "io/fault_test_util.h"
#include "io/file.h"
#include "io/test_util.h"
#include "plan/example.h"
#include "quant/scheme.h"

namespace spk {
namespace {

namespace fs = std::filesystem;

// A small DFlash checkpoint: several tensors, row blocks and copied tensors; with `shards` > 1 an
// index, and a tokenizer.json to copy.
std::string MakeSource(const spk::testing::ScopedTempDir& dir, int shards = 1) {
  ExampleOptions options;
  options.dir = dir / "src";
  options.shards = shards;
  options.hidden = 256;
  options.intermediate = 768;
  options.layers = 2;
  const Status s = WriteExampleCheckpoint(options, FileSystem::Default());
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(FileSystem::Default()->WriteFile(options.dir + "/tokenizer.json", "{}").ok());
  return options.dir;
}

QuantizeOptions Options(const std::string& src, const std::string& dst) {
  QuantizeOptions options;
  options.source = src;
  options.destination = dst;
  return options;
}

// Names in `parent` other than `keep`: what a failed run left behind.
std::vector<std::string> Leftovers(const std::string& parent, const std::string& keep) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(parent)) {
    const std::string name = entry.path().filename().string();
    if (name != keep) names.push_back(name);
  }
  return names;
}

std::map<std::string, std::string> ReadFolder(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    files[entry.path().filename().string()] =
        std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return files;
}

void ExpectFailedCleanly(const Result<QuantizeSummary>& result, const std::string& parent,
                         const std::string& needle) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kIoError) << result.status().message();
  EXPECT_NE(result.status().message().find(needle), std::string::npos) << result.status().message();
  EXPECT_TRUE(Leftovers(parent, "src").empty());
}

TEST(QuantizeTest, OutputBytesDoNotDependOnThreadCount) {
  spk::testing::ScopedTempDir dir;
  const std::string src = MakeSource(dir);
  std::map<std::string, std::string> first;
  for (int threads : {1, 2, 3, 8}) {
    const std::string dst = dir / ("out" + std::to_string(threads));
    auto result = QuantizeCheckpoint(RunContext{.fs = FileSystem::Default(), .threads = threads},
                                     Options(src, dst));
    ASSERT_TRUE(result.ok()) << result.status().message();
    std::map<std::string, std::string> files = ReadFolder(dst);
    ASSERT_TRUE(files.count("model.safetensors")) << threads;
    EXPECT_GT(files["model.safetensors"].size(), 100000u);
    if (first.empty()) {
      first = files;
    } else {
      EXPECT_TRUE(files == first) << "threads " << threads << " wrote different bytes";
    }
  }
}

// Mapped reads (the kernels read the page cache) and pread copies write the same bytes, for the
// integer, FP8, NVFP4 (whose global scale reads the rows too) and MX schemes.
TEST(QuantizeTest, MappedAndPreadReadsWriteTheSameBytes) {
  spk::testing::ScopedTempDir dir;
  const std::string src = MakeSource(dir, /*shards=*/2);
  for (const char* name : {"w4a16", "w8a16-asym", "w4a16-asym", "fp8-dynamic", "fp8-block",
                           "nvfp4a16", "mxfp4a16", "w8a8"}) {
    const QuantScheme* scheme = FindScheme(name);
    ASSERT_NE(scheme, nullptr) << name;
    std::map<std::string, std::string> outputs[2];
    int k = 0;
    for (const char* mode : {"", "pread"}) {
      testing::ScopedReadMode read_mode(mode);
      const std::string dst = dir / (std::string(name) + (*mode ? "_pread" : "_mmap"));
      QuantizeOptions options = Options(src, dst);
      options.plan.scheme = scheme;
      options.plan.group_size = scheme->default_group_size;
      auto result =
          QuantizeCheckpoint(RunContext{.fs = FileSystem::Default(), .threads = 2}, options);
      ASSERT_TRUE(result.ok()) << name << " " << mode << ": " << result.status().message();
      outputs[k++] = ReadFolder(dst);
    }
    ASSERT_TRUE(outputs[0].count("model-00001-of-00002.safetensors")) << name;
    EXPECT_GT(outputs[0]["model-00001-of-00002.safetensors"].size(), 10000u) << name;
    EXPECT_TRUE(outputs[0] == outputs[1]) << name << ": mapped and pread reads differ";
  }
}

// By default every shard is fsynced and its blocks' writeback started as they are written;
// --no-fsync (kPageCache) does neither, and the two write the same bytes.
TEST(QuantizeTest, DurabilityDecidesSyncsButNotBytes) {
  spk::testing::ScopedTempDir dir;
  const std::string src = MakeSource(dir);
  FaultInjectingFileSystem synced_fs(FileSystem::Default());
  auto synced =
      QuantizeCheckpoint(RunContext{.fs = &synced_fs, .threads = 2}, Options(src, dir / "synced"));
  ASSERT_TRUE(synced.ok()) << synced.status().message();
  EXPECT_EQ(synced_fs.syncs(), synced->shards);
  EXPECT_GT(synced_fs.writeback_hints(), synced->shards);

  FaultInjectingFileSystem cached_fs(FileSystem::Default());
  QuantizeOptions options = Options(src, dir / "cached");
  options.durability = Durability::kPageCache;
  auto cached = QuantizeCheckpoint(RunContext{.fs = &cached_fs, .threads = 2}, options);
  ASSERT_TRUE(cached.ok()) << cached.status().message();
  EXPECT_EQ(cached_fs.syncs(), 0u);
  EXPECT_EQ(cached_fs.writeback_hints(), 0u);
  EXPECT_TRUE(ReadFolder(dir / "synced") == ReadFolder(dir / "cached"));
}

TEST(QuantizeTest, DiskFullMidWayIsAnIoErrorAndLeavesNothing) {
  spk::testing::ScopedTempDir dir;
  const std::string src = MakeSource(dir);
  FaultInjectingFileSystem faulty(FileSystem::Default());
  faulty.SetWriteLimit(200000);  // the output is about 1 MB
  auto result =
      QuantizeCheckpoint(RunContext{.fs = &faulty, .threads = 2}, Options(src, dir / "dst"));
  ExpectFailedCleanly(result, dir.path(), "disk full while writing");
  EXPECT_GT(faulty.bytes_written(), 0u);
}

TEST(QuantizeTest, ReadErrorIsAnIoErrorAndLeavesNothing) {
  spk::testing::ScopedTempDir dir;
  const std::string src = MakeSource(dir);
  const std::string shard = src + "/model.safetensors";
  FaultInjectingFileSystem faulty(FileSystem::Default());
  faulty.FailReadsFrom(shard, fs::file_size(shard) / 2);
  auto result =
      QuantizeCheckpoint(RunContext{.fs = &faulty, .threads = 2}, Options(src, dir / "dst"));
  ExpectFailedCleanly(result, dir.path(), "cannot read " + shard);
}

// Truncates the real file on disk to half its size once a few reads have gone through, as
// another process truncating the source while we read it would.
class TruncatingFileSystem final : public FileSystemWrapper {
 public:
  // Truncates `victim` to `truncate_to` bytes (-1: half its size) at its read or view number
  // `reads_before` + 1 (only views count when `views_only`).
  TruncatingFileSystem(std::string victim, int reads_before, int64_t truncate_to = -1,
                       bool views_only = false)
      : FileSystemWrapper(FileSystem::Default()),
        victim_(std::move(victim)),
        reads_left_(reads_before),
        views_only_(views_only),
        truncate_to_(truncate_to >= 0 ? static_cast<uint64_t>(truncate_to)
                                      : std::filesystem::file_size(victim_) / 2) {}

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    SPK_ASSIGN_OR_RETURN(auto file, target()->OpenForRead(path));
    if (path != victim_) return file;
    return std::unique_ptr<RandomAccessFile>(new File(std::move(file), this));
  }

 private:
  class File final : public RandomAccessFile {
   public:
    File(std::unique_ptr<RandomAccessFile> base, TruncatingFileSystem* owner)
        : base_(std::move(base)), owner_(owner) {}
    const std::string& path() const override { return base_->path(); }
    uint64_t size() const override { return base_->size(); }
    Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
      if (!owner_->views_only_ && owner_->reads_left_.fetch_sub(1) == 0) Truncate();
      return base_->ReadAt(offset, out);
    }
    // A mapped view is truncated after it is made, so that the pages vanish under the kernels
    // that read them (the SIGBUS guard of io/mapped_view.h); under SPARKULATOR_READ=pread the
    // view was read already and the next read finds the end.
    Result<FileView> View(uint64_t offset, uint64_t length) const override {
      Result<FileView> view = base_->View(offset, length);
      if (owner_->reads_left_.fetch_sub(1) == 0) Truncate();
      return view;
    }

   private:
    void Truncate() const {
      EXPECT_EQ(::truncate(path().c_str(), static_cast<off_t>(owner_->truncate_to_)), 0);
    }

    std::unique_ptr<RandomAccessFile> base_;
    TruncatingFileSystem* owner_;
  };

  std::string victim_;
  std::atomic<int> reads_left_;
  bool views_only_;
  uint64_t truncate_to_;
};

TEST(QuantizeTest, SourceTruncatedWhileReadIsAnIoErrorAndLeavesNothing) {
  for (const char* mode : {"", "pread"}) {
    testing::ScopedReadMode read_mode(mode);
    spk::testing::ScopedTempDir dir;
    const std::string src = MakeSource(dir);
    TruncatingFileSystem truncating(src + "/model.safetensors", 3);
    auto result =
        QuantizeCheckpoint(RunContext{.fs = &truncating, .threads = 1}, Options(src, dir / "dst"));
    ExpectFailedCleanly(result, dir.path(), "unexpected end of file in " + src);
  }
}

// Truncated to nothing under the mapping a worker is quantizing from: the fault is caught, the
// run fails with the shard and the tensor named, and leaves nothing (both read modes).
TEST(QuantizeTest, SourceTruncatedUnderAMappedBlockIsAnIoErrorAndLeavesNothing) {
  for (const char* mode : {"", "pread"}) {
    for (int threads : {1, 2}) {
      testing::ScopedReadMode read_mode(mode);
      spk::testing::ScopedTempDir dir;
      const std::string src = MakeSource(dir);
      TruncatingFileSystem truncating(src + "/model.safetensors", 0, /*truncate_to=*/0,
                                      /*views_only=*/true);
      auto result = QuantizeCheckpoint(RunContext{.fs = &truncating, .threads = threads},
                                       Options(src, dir / "dst"));
      ExpectFailedCleanly(result, dir.path(), "unexpected end of file in " + src);
      EXPECT_NE(result.status().message().find("tensor '"), std::string::npos)
          << result.status().message();
    }
  }
}

// A real file system that fills up: a 256 KiB tmpfs. Needs the right to mount (root in a
// container that allows it); skipped otherwise.
TEST(QuantizeTest, RealSmallTmpfsFillsUpCleanly) {
  spk::testing::ScopedTempDir dir;
  const std::string src = MakeSource(dir);
  const std::string mount_point = dir / "tmpfs";
  fs::create_directories(mount_point);
  if (::mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=256k") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  auto result = QuantizeCheckpoint(RunContext{.fs = FileSystem::Default(), .threads = 2},
                                   Options(src, mount_point + "/dst"));
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(mount_point)) {
    left.push_back(entry.path().filename().string());
  }
  ::umount2(mount_point.c_str(), MNT_DETACH);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kIoError);
  EXPECT_NE(result.status().message().find("disk full while writing " + mount_point),
            std::string::npos)
      << result.status().message();
  EXPECT_TRUE(left.empty()) << left.front();
}

// Faults at config.json, the index and tokenizer.json, reading the source or writing the output.
TEST(QuantizeTest, FaultsAtConfigIndexAndCopiedFilesNameThePathAndLeaveNothing) {
  spk::testing::ScopedTempDir dir;
  const std::string src = MakeSource(dir, /*shards=*/2);
  test_util::ExpectEachFileFaultFailsCleanly(
      src, dir.path(), {"src"}, [&](FileSystem* fs, const std::string& dst) {
        return QuantizeCheckpoint(RunContext{.fs = fs, .threads = 2}, Options(src, dst)).status();
      });
}

}  // namespace
}  // namespace spk
