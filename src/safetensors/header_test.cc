#include "safetensors/header.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace spk {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kFile = "model-00001.safetensors";

// Parses `json` as the header of a file whose data buffer holds `data_bytes` bytes.
Result<SafetensorsHeader> Parse(std::string_view json, uint64_t data_bytes) {
  return ParseSafetensorsHeader(kFile, json, 8 + json.size() + data_bytes);
}

// Expects rejection with a message naming the file and containing every piece of `parts`.
void ExpectRejected(std::string_view json, uint64_t data_bytes,
                    std::initializer_list<std::string_view> parts) {
  auto r = Parse(json, data_bytes);
  ASSERT_FALSE(r.ok()) << "accepted: " << json;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  EXPECT_THAT(r.status().message(), HasSubstr(std::string(kFile))) << r.status().message();
  for (std::string_view part : parts) {
    EXPECT_THAT(r.status().message(), HasSubstr(std::string(part))) << r.status().message();
  }
}

TEST(HeaderTest, AcceptsValidHeaderAndSortsByOffset) {
  auto h = Parse(R"({"__metadata__":{"format":"pt","b":"x"},)"
                 R"("z":{"dtype":"F32","shape":[2],"data_offsets":[2,10]},)"
                 R"("scalar":{"dtype":"BF16","shape":[],"data_offsets":[0,2]},)"
                 R"("empty":{"dtype":"I64","shape":[3,0],"data_offsets":[10,10]}})",
                 10);
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->tensors.size(), 3u);
  EXPECT_EQ(h->tensors[0].name, "scalar");
  EXPECT_EQ(h->tensors[0].num_elements(), 1u);
  EXPECT_EQ(h->tensors[1].name, "z");
  EXPECT_EQ(h->tensors[1].dtype, DType::kF32);
  EXPECT_EQ(h->tensors[2].name, "empty");
  EXPECT_EQ(h->tensors[2].num_elements(), 0u);
  EXPECT_EQ(h->tensors[2].shape, (std::vector<int64_t>{3, 0}));
  using Pair = std::pair<std::string, std::string>;
  EXPECT_EQ(h->metadata, (std::vector<Pair>{{"format", "pt"}, {"b", "x"}}));
  ASSERT_NE(h->Find("z"), nullptr);
  EXPECT_EQ(h->Find("z")->nbytes(), 8u);
  EXPECT_EQ(h->Find("nope"), nullptr);
}

TEST(HeaderTest, AcceptsEmptyHeaderWithPadding) {
  auto h = Parse("{}      ", 0);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->tensors.empty());
  EXPECT_EQ(h->data_start, 16u);
}

TEST(HeaderTest, RejectsHeaderRunningPastFileEnd) {
  auto r = ParseSafetensorsHeader(kFile, "{}", 9);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("runs past the end of the file"));
}

TEST(HeaderTest, RejectsInvalidUtf8) {
  ExpectRejected("{\"__metadata__\":{\"a\":\"\xff\"}}", 0, {"not valid UTF-8", "0xff"});
}

TEST(HeaderTest, RejectsOverlongUtf8) {
  ExpectRejected("{\"__metadata__\":{\"a\":\"\xc0\xaf\"}}", 0, {"not valid UTF-8"});
}

TEST(HeaderTest, RejectsEncodedSurrogate) {
  ExpectRejected("{\"__metadata__\":{\"a\":\"\xed\xa0\x80\"}}", 0, {"not valid UTF-8"});
}

TEST(HeaderTest, RejectsByteOrderMark) { ExpectRejected("\xEF\xBB\xBF{}", 0, {"byte order mark"}); }

TEST(HeaderTest, RejectsInvalidJson) { ExpectRejected(R"({"a":)", 0, {"invalid JSON"}); }

TEST(HeaderTest, RejectsTrailingCharactersAfterJson) {
  ExpectRejected(std::string_view("{}\0", 3), 0, {"invalid JSON"});
}

TEST(HeaderTest, RejectsNonObjectTopLevel) {
  ExpectRejected("[1,2]", 0, {"must be a JSON object", "array"});
}

TEST(HeaderTest, RejectsDuplicateTensorNames) {
  ExpectRejected(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                 R"("w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
                 2, {"'w' appears twice"});
}

TEST(HeaderTest, RejectsDuplicateFieldInTensorEntry) {
  ExpectRejected(R"({"w":{"dtype":"U8","dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 2,
                 {"'dtype' appears twice"});
}

TEST(HeaderTest, RejectsMetadataValueThatIsNotAString) {
  ExpectRejected(R"({"__metadata__":{"format":1}})", 0, {"__metadata__", "'format'", "string"});
}

TEST(HeaderTest, RejectsMetadataThatIsNotAnObject) {
  ExpectRejected(R"({"__metadata__":["pt"]})", 0, {"__metadata__ must be an object"});
}

TEST(HeaderTest, AcceptsNullMetadataLikeTheReference) {
  auto h = Parse(R"({"__metadata__":null})", 0);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->metadata.empty());
}

TEST(HeaderTest, RejectsUnknownDtype) {
  ExpectRejected(R"({"w":{"dtype":"bf16","shape":[1],"data_offsets":[0,2]}})", 2,
                 {"tensor 'w'", "unknown dtype \"bf16\""});
}

TEST(HeaderTest, RejectsMissingDtype) {
  ExpectRejected(R"({"w":{"shape":[1],"data_offsets":[0,2]}})", 2,
                 {"tensor 'w'", "missing field \"dtype\""});
}

TEST(HeaderTest, RejectsMissingShape) {
  ExpectRejected(R"({"w":{"dtype":"U8","data_offsets":[0,2]}})", 2,
                 {"tensor 'w'", "missing field \"shape\""});
}

TEST(HeaderTest, RejectsMissingDataOffsets) {
  ExpectRejected(R"({"w":{"dtype":"U8","shape":[2]}})", 2,
                 {"tensor 'w'", "missing field \"data_offsets\""});
}

TEST(HeaderTest, RejectsDtypeThatIsNotAString) {
  ExpectRejected(R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,2]}})", 2,
                 {"tensor 'w'", "dtype must be a string"});
}

TEST(HeaderTest, RejectsNegativeDimension) {
  ExpectRejected(R"({"w":{"dtype":"U8","shape":[-2],"data_offsets":[0,2]}})", 2,
                 {"tensor 'w'", "non-negative integers"});
}

TEST(HeaderTest, RejectsFloatDimensionAndNegativeZero) {
  ExpectRejected(R"({"w":{"dtype":"U8","shape":[2.0],"data_offsets":[0,2]}})", 2,
                 {"tensor 'w'", "non-negative integers"});
  ExpectRejected(R"({"w":{"dtype":"U8","shape":[-0],"data_offsets":[0,0]}})", 0, {"tensor 'w'"});
}

TEST(HeaderTest, RejectsShapeThatIsNotAnArray) {
  ExpectRejected(R"({"w":{"dtype":"U8","shape":2,"data_offsets":[0,2]}})", 2,
                 {"tensor 'w'", "shape must be an array"});
}

TEST(HeaderTest, RejectsDimensionAboveInt64) {
  ExpectRejected(R"({"w":{"dtype":"U8","shape":[0,9223372036854775808],"data_offsets":[0,0]}})", 0,
                 {"tensor 'w'", "larger than 2^63-1"});
}

TEST(HeaderTest, RejectsDataOffsetsWithThreeElements) {
  ExpectRejected(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2,2]}})", 2,
                 {"tensor 'w'", "two non-negative integers"});
}

TEST(HeaderTest, RejectsEntryThatIsNotAnObject) {
  ExpectRejected(R"({"w":["U8",[2],[0,2]]})", 2, {"tensor 'w'", "must be an object"});
}

TEST(HeaderTest, IgnoresUnknownFieldsLikeTheReference) {
  auto h = Parse(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"extra":1}})", 2);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->tensors[0].nbytes(), 2u);
}

TEST(HeaderTest, RejectsOffsetsThatEndBeforeTheyBegin) {
  ExpectRejected(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}})", 4,
                 {"tensor 'w'", "[4, 2] end before they begin"});
}

TEST(HeaderTest, RejectsGapAtStartOfBuffer) {
  ExpectRejected(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", 4,
                 {"tensor 'w'", "gap of 2 bytes", "start of the data buffer"});
}

TEST(HeaderTest, RejectsGapBetweenTensors) {
  ExpectRejected(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                 R"("b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}})",
                 5, {"tensor 'b'", "gap of 1 bytes", "tensor 'a'"});
}

TEST(HeaderTest, RejectsOverlappingTensors) {
  ExpectRejected(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                 R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                 6, {"tensor 'b'", "overlap tensor 'a'"});
}

TEST(HeaderTest, RejectsReusedRange) {
  ExpectRejected(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                 R"("b":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})",
                 4, {"tensor 'b'", "overlap tensor 'a'"});
}

TEST(HeaderTest, AcceptsEmptyTensorsSharingAnOffsetLikeTheReference) {
  auto h = Parse(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
                 R"("b":{"dtype":"F32","shape":[0,5],"data_offsets":[0,0]},)"
                 R"("c":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
                 2);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->tensors[2].name, "c");
}

TEST(HeaderTest, RejectsEmptyTensorInsideAnother) {
  ExpectRejected(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                 R"("e":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}})",
                 4, {"tensor 'e'", "overlap"});
}

TEST(HeaderTest, RejectsSizeMismatchWithExactMessage) {
  auto r = Parse(
      R"({"layers.0.mlp.up_proj.weight":{"dtype":"BF16","shape":[4,4],"data_offsets":[0,10]}})",
      10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "model-00001.safetensors: tensor 'layers.0.mlp.up_proj.weight': data_offsets [0, 10] "
            "hold 10 bytes but shape [4, 4] of BF16 needs 32");
}

TEST(HeaderTest, RejectsShapeWhoseSizeOverflows) {
  ExpectRejected(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0,
                 {"tensor 'w'", "overflows"});
}

TEST(HeaderTest, RejectsOverflowEvenWithALaterZeroLikeTheReference) {
  ExpectRejected(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})",
                 0, {"tensor 'w'", "overflows"});
}

TEST(HeaderTest, RejectsSubByteTensorEndingInsideAByte) {
  ExpectRejected(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2,
                 {"tensor 'w'", "12 bits", "byte boundary"});
  ExpectRejected(R"({"w":{"dtype":"F6_E2M3","shape":[3],"data_offsets":[0,3]}})", 3,
                 {"tensor 'w'", "18 bits"});
}

TEST(HeaderTest, AcceptsSubByteTensorsFillingWholeBytes) {
  auto h = Parse(R"({"a":{"dtype":"F4","shape":[2,2],"data_offsets":[0,2]},)"
                 R"("b":{"dtype":"F6_E3M2","shape":[4],"data_offsets":[2,5]}})",
                 5);
  ASSERT_TRUE(h.ok()) << h.status().message();
}

TEST(HeaderTest, RejectsTrailingBytesAfterLastTensor) {
  ExpectRejected(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 3,
                 {"1 unexpected bytes after the last tensor 'w'"});
}

TEST(HeaderTest, RejectsTrailingBytesWithNoTensors) {
  ExpectRejected("{}", 8, {"8 unexpected bytes"});
}

TEST(HeaderTest, RejectsDataBufferShorterThanOffsets) {
  ExpectRejected(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 3,
                 {"tensor 'w'", "holds only 3 bytes", "truncated"});
}

}  // namespace
}  // namespace spk
