// The pieces of a split job that need no checkpoint: --part's parsing, the split of shards over
// parts, and the part record (tests/python/test_distributed.py runs whole jobs, merges and
// refusals on real folders, Slurm and xargs).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "quantize/quantize.h"
#include "safetensors/resume_record.h"

namespace spk {
namespace {

TEST(ShardPartTest, ParsesIOverNAndRefusesTheRest) {
  auto part = ParsePart("2/3");
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->index, 2);
  EXPECT_EQ(part->count, 3);
  for (const char* bad :
       {"", "3", "0/3", "4/3", "a/3", "1/", "/3", "-1/3", "1/3/4", "9999999/9999999"}) {
    EXPECT_EQ(ParsePart(bad).status().code(), StatusCode::kUsage) << bad;
  }
}

TEST(ShardPartTest, EveryShardGoesToOnePartAndTheBytesAreEven) {
  const std::vector<uint64_t> bytes = {100, 5, 60, 40, 50, 45, 10};
  std::vector<size_t> seen;
  std::vector<uint64_t> load;
  for (int i = 1; i <= 3; ++i) {
    std::vector<size_t> mine = PartOfShards(bytes, i, 3);
    EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
    seen.insert(seen.end(), mine.begin(), mine.end());
    load.push_back(0);
    for (size_t s : mine) load.back() += bytes[s];
  }
  std::sort(seen.begin(), seen.end());
  std::vector<size_t> all(bytes.size());
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(seen, all);
  // 310 bytes over 3 parts: the largest-first greedy split gives 100, 105, 105.
  std::sort(load.begin(), load.end());
  EXPECT_EQ(load, (std::vector<uint64_t>{100, 105, 105}));
  // More parts than shards: the extra parts write none.
  EXPECT_TRUE(PartOfShards({7}, 2, 2).empty());
}

TEST(ShardPartTest, APartRecordRoundTripsAndRefusesWhatCouldMisleadMerge) {
  PartRecord r;
  r.job = std::string(32, 'b');
  r.part = 2;
  r.parts = 3;
  r.all_shards = {"a.safetensors", "b.safetensors"};
  r.shards["b.safetensors"] = {9, std::string(32, 'c')};
  auto back = ParsePartRecord(SerializePartRecord(r), "p");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->all_shards, r.all_shards);
  EXPECT_EQ(back->part, 2);
  const std::string job = "\"job\":\"" + std::string(32, 'b') + "\"";
  for (const std::string& bad : {
           "{\"version\":1," + job + ",\"part\":4,\"parts\":3,\"all_shards\":[],\"shards\":{}}",
           "{\"version\":1," + job + ",\"part\":0,\"parts\":3,\"all_shards\":[],\"shards\":{}}",
           "{\"version\":1," + job +
               ",\"part\":1,\"parts\":1,\"all_shards\":[\"../x\"],\"shards\":{}}",
           "{\"version\":1," + job +
               ",\"part\":1,\"parts\":1,\"all_shards\":[\"a\"],\"shards\":{\"b\":{\"size\":1,"
               "\"xxh3_128\":\"" +
               std::string(32, '0') + "\"}}}",
       }) {
    auto parsed = ParsePartRecord(bad, "part.json");
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidInput) << bad;
  }
}

}  // namespace
}  // namespace spk
