// DequantizeCheckpoint through the CheckpointWriter: the same bytes whatever --threads and
// --no-fsync say (fsyncs only without it), and faults at config.json, the index and a copied
// tokenizer.json fail with the path named and nothing left behind.
#include "dequantize/dequantize.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "io/fault_injection.h"
#include "io/fault_test_util.h"
#include "io/test_util.h"
#include "plan/example.h"
#include "quantize/quantize.h"

namespace spk {
namespace {

// A two-shard example with a tokenizer.json, quantized to w4a16 into `dir`/q; returns that path.
std::string MakeQuantized(const spk::testing::ScopedTempDir& dir) {
  ExampleOptions example;
  example.dir = dir / "src";
  example.shards = 2;
  EXPECT_TRUE(WriteExampleCheckpoint(example, FileSystem::Default()).ok());
  EXPECT_TRUE(FileSystem::Default()->WriteFile(example.dir + "/tokenizer.json", "{}").ok());
  QuantizeOptions quantize;
  quantize.source = example.dir;
  quantize.destination = dir / "q";
  auto q = QuantizeCheckpoint(RunContext{}, quantize);
  EXPECT_TRUE(q.ok()) << q.status().message();
  return quantize.destination;
}

std::map<std::string, std::string> ReadFolder(const std::string& dir) {
  std::map<std::string, std::string> files;
  const std::vector<std::string> names = *FileSystem::Default()->ListDirectory(dir);
  for (const std::string& name : names) {
    files[name] = *FileSystem::Default()->ReadFile(dir + "/" + name);
  }
  return files;
}

TEST(DequantizeTest, BytesDoNotDependOnThreadsOrFsync) {
  spk::testing::ScopedTempDir dir;
  const std::string q = MakeQuantized(dir);
  FaultInjectingFileSystem synced_fs(FileSystem::Default());
  auto synced = DequantizeCheckpoint({.fs = &synced_fs, .threads = 1},
                                     {.source = q, .destination = dir / "one"});
  ASSERT_TRUE(synced.ok()) << synced.status().message();
  EXPECT_EQ(synced->shards, 2u);
  EXPECT_GT(synced->dequantized_modules, 0u);
  EXPECT_EQ(synced_fs.syncs(), synced->shards);

  FaultInjectingFileSystem cached_fs(FileSystem::Default());
  DequantizeOptions options{
      .source = q, .destination = dir / "four", .durability = Durability::kPageCache};
  auto cached = DequantizeCheckpoint({.fs = &cached_fs, .threads = 4}, options);
  ASSERT_TRUE(cached.ok()) << cached.status().message();
  EXPECT_EQ(cached_fs.syncs(), 0u);
  EXPECT_EQ(cached_fs.writeback_hints(), 0u);
  std::map<std::string, std::string> one = ReadFolder(dir / "one");
  EXPECT_TRUE(one == ReadFolder(dir / "four"));
  EXPECT_EQ(one.count("tokenizer.json"), 1u);
  EXPECT_EQ(one.count("model.safetensors.index.json"), 1u);
}

TEST(DequantizeTest, FaultsAtConfigIndexAndCopiedFilesNameThePathAndLeaveNothing) {
  spk::testing::ScopedTempDir dir;
  const std::string q = MakeQuantized(dir);
  test_util::ExpectEachFileFaultFailsCleanly(
      q, dir.path(), {"src", "q"}, [&](FileSystem* fs, const std::string& dst) {
        return DequantizeCheckpoint({.fs = fs, .threads = 2}, {.source = q, .destination = dst})
            .status();
      });
}

}  // namespace
}  // namespace spk
