#include "safetensors/index.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace spk {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kLabel = "model.safetensors.index.json";

void ExpectRejected(std::string_view json, std::string_view part) {
  auto r = ParseShardIndex(kLabel, json);
  ASSERT_FALSE(r.ok()) << "accepted: " << json;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(r.status().message(), HasSubstr(std::string(kLabel)));
  EXPECT_THAT(r.status().message(), HasSubstr(std::string(part)));
}

TEST(ShardIndexTest, ParsesTransformersIndex) {
  auto r = ParseShardIndex(kLabel, R"({"metadata":{"total_parameters":12,"total_size":48},
      "weight_map":{"a.weight":"model-00001-of-00002.safetensors",
                    "b.weight":"model-00002-of-00002.safetensors"}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->total_size, 48u);
  EXPECT_EQ(r->weight_map.at("b.weight"), "model-00002-of-00002.safetensors");
  EXPECT_EQ(r->extra_metadata, nlohmann::json({{"total_parameters", 12}}));
}

TEST(ShardIndexTest, AcceptsMissingMetadataAndIntegralFloatTotalSize) {
  auto r = ParseShardIndex(kLabel, R"({"weight_map":{}})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->total_size, 0u);
  auto f = ParseShardIndex(kLabel, R"({"metadata":{"total_size":1024.0},"weight_map":{}})");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->total_size, 1024u);
  ExpectRejected(R"({"metadata":{"total_size":-1},"weight_map":{}})", "total_size");
}

TEST(ShardIndexTest, RejectsSlashInShardName) {
  ExpectRejected(R"({"weight_map":{"w":"sub/model.safetensors"}})", "tensor 'w'");
}

TEST(ShardIndexTest, RejectsAbsolutePath) {
  ExpectRejected(R"({"weight_map":{"w":"/etc/passwd"}})", "plain file name");
}

TEST(ShardIndexTest, RejectsDotDot) {
  ExpectRejected(R"({"weight_map":{"w":".."}})", "not a file name");
  ExpectRejected(R"({"weight_map":{"w":"../x.safetensors"}})", "'/'");
}

TEST(ShardIndexTest, RejectsBackslash) {
  ExpectRejected(R"({"weight_map":{"w":"..\\x.safetensors"}})", "'\\'");
}

TEST(ShardIndexTest, RejectsEmptyName) { ExpectRejected(R"({"weight_map":{"w":""}})", "is empty"); }

TEST(ShardIndexTest, RejectsNonStringValue) {
  ExpectRejected(R"({"weight_map":{"w":3}})", "must be a file name string");
}

TEST(ShardIndexTest, RejectsMissingWeightMap) {
  ExpectRejected(R"({"metadata":{"total_size":0}})", "missing \"weight_map\"");
  ExpectRejected(R"({"weight_map":["a"]})", "missing \"weight_map\"");
}

TEST(ShardIndexTest, RejectsDuplicateTensor) {
  ExpectRejected(R"({"weight_map":{"w":"a.safetensors","w":"b.safetensors"}})",
                 "'w' appears twice");
}

TEST(ShardIndexTest, RejectsInvalidJson) { ExpectRejected(R"({"weight_map":)", "invalid JSON"); }

// Expected text is Python's json.dumps(index, indent=2, sort_keys=True) + "\n" for the same index.
TEST(ShardIndexTest, SerializesLikeTransformers) {
  ShardIndex index;
  index.total_size = 48;
  index.extra_metadata = {{"total_parameters", 12}, {"note", "caf\u00e9 \U0001F600"}};
  index.weight_map = {{"b.weight", "model-00002-of-00002.safetensors"},
                      {"a.weight", "model-00001-of-00002.safetensors"}};
  EXPECT_EQ(SerializeShardIndex(index),
            "{\n  \"metadata\": {\n    \"note\": \"caf\\u00e9 \\ud83d\\ude00\",\n"
            "    \"total_parameters\": 12,\n    \"total_size\": 48\n  },\n"
            "  \"weight_map\": {\n    \"a.weight\": \"model-00001-of-00002.safetensors\",\n"
            "    \"b.weight\": \"model-00002-of-00002.safetensors\"\n  }\n}\n");
}

TEST(ShardIndexTest, RoundTrips) {
  ShardIndex index;
  index.total_size = 123456789012;
  index.weight_map = {{"x", "m1.safetensors"}, {"y\"q", "m2.safetensors"}};
  auto back = ParseShardIndex(kLabel, SerializeShardIndex(index));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->total_size, index.total_size);
  EXPECT_EQ(back->weight_map, index.weight_map);
  EXPECT_EQ(SerializeShardIndex(*back), SerializeShardIndex(index));
}

}  // namespace
}  // namespace spk
