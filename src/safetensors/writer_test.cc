#include "safetensors/writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/test_util.h"
#include "safetensors/header.h"

namespace spk {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes HeaderOf(const SafetensorsLayout& layout) {
  return Bytes(layout.header_bytes().begin(), layout.header_bytes().end());
}

// The expected byte strings are the Rust crate's own tests (safetensors/src/tensor.rs:
// test_serialization, test_serialization_forced_alignement, test_empty), header part only.
TEST(WriterTest, MatchesReferenceBytesForOneTensor) {
  auto layout = SafetensorsLayout::Plan({{"attn.0", DType::kF32, {1, 2, 3}}}, {});
  ASSERT_TRUE(layout.ok());
  const Bytes expected = {64,  0,   0,  0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,
                          48,  34,  58, 123, 34,  100, 116, 121, 112, 101, 34,  58,  34,  70,  51,
                          50,  34,  44, 34,  115, 104, 97,  112, 101, 34,  58,  91,  49,  44,  50,
                          44,  51,  93, 44,  34,  100, 97,  116, 97,  95,  111, 102, 102, 115, 101,
                          116, 115, 34, 58,  91,  48,  44,  50,  52,  93,  125, 125};
  EXPECT_EQ(HeaderOf(*layout), expected);
  EXPECT_EQ(layout->data_start(), 72u);
  EXPECT_EQ(layout->file_size(), 72u + 24u);
}

TEST(WriterTest, PadsHeaderWithSpacesToAMultipleOfEight) {
  auto layout = SafetensorsLayout::Plan({{"attn0", DType::kF32, {1, 1, 2, 3}}}, {});
  ASSERT_TRUE(layout.ok());
  const std::string json = R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})"
                           "       ";
  ASSERT_EQ(json.size(), 72u);
  EXPECT_EQ(layout->header_bytes().substr(8), json);
  EXPECT_EQ(layout->header_bytes()[0], 72);
}

TEST(WriterTest, MatchesReferenceBytesForEmptyFiles) {
  auto empty = SafetensorsLayout::Plan({}, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(HeaderOf(*empty), (Bytes{8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32}));
  auto with_metadata = SafetensorsLayout::Plan({}, {{"framework", "pt"}});
  ASSERT_TRUE(with_metadata.ok());
  EXPECT_EQ(with_metadata->header_bytes().substr(8),
            std::string(R"({"__metadata__":{"framework":"pt"}})") + "     ");
  EXPECT_EQ(with_metadata->header_bytes()[0], 40);
}

TEST(WriterTest, KeepsCallerOrderAndComputesOffsets) {
  auto layout = SafetensorsLayout::Plan({{"z", DType::kU8, {3}},
                                         {"a", DType::kBF16, {2, 2}},
                                         {"s", DType::kI64, {}},
                                         {"e", DType::kF32, {0, 7}}});
  ASSERT_TRUE(layout.ok());
  const std::string json = layout->header_bytes().substr(8);
  EXPECT_EQ(json.rfind(R"({"__metadata__":{"format":"pt"},"z":{"dtype":"U8","shape":[3],)"
                       R"("data_offsets":[0,3]},"a":{"dtype":"BF16","shape":[2,2],)"
                       R"("data_offsets":[3,11]},"s":{"dtype":"I64","shape":[],)"
                       R"("data_offsets":[11,19]},"e":{"dtype":"F32","shape":[0,7],)"
                       R"("data_offsets":[19,19]}})",
                       0),
            0u);
  EXPECT_EQ(layout->data_start() % 8, 0u);
  EXPECT_EQ(*layout->AbsoluteOffset("a"), layout->data_start() + 3);
  EXPECT_EQ(layout->TensorBytes("a"), 8u);
  EXPECT_EQ(layout->TensorBytes("e"), 0u);
  EXPECT_EQ(layout->file_size(), layout->data_start() + 19);
  EXPECT_EQ(layout->AbsoluteOffset("missing").status().code(), StatusCode::kNotFound);

  // What we write, we read back as the same tensors.
  auto parsed = ParseSafetensorsHeader("planned", json, layout->file_size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->tensors.size(), 4u);
  EXPECT_EQ(parsed->tensors[1].name, "a");
  EXPECT_EQ(parsed->data_start, layout->data_start());
}

TEST(WriterTest, AlignsEveryHeaderLength) {
  for (int len = 1; len <= 16; ++len) {
    auto layout = SafetensorsLayout::Plan({{std::string(len, 'n'), DType::kU8, {1}}});
    ASSERT_TRUE(layout.ok());
    EXPECT_EQ(layout->data_start() % 8, 0u) << len;
    const std::string& h = layout->header_bytes();
    EXPECT_EQ(h.find_last_not_of(' '), h.find_last_of('}'));  // only spaces after the JSON
    EXPECT_LT(h.size() - 1 - h.find_last_of('}'), 8u);
  }
}

TEST(WriterTest, EscapesNamesLikeSerdeJson) {
  auto layout = SafetensorsLayout::Plan({{"a\"b\\c\n\x01/é\x7f", DType::kU8, {0}}}, {});
  ASSERT_TRUE(layout.ok());
  const std::string expected = "{\"a\\\"b\\\\c\\n\\u0001/\xc3\xa9\x7f\":{";
  EXPECT_EQ(layout->header_bytes().substr(8, expected.size()), expected);
}

TEST(WriterTest, RejectsDuplicateNames) {
  auto layout = SafetensorsLayout::Plan({{"w", DType::kU8, {1}}, {"w", DType::kU8, {1}}});
  ASSERT_FALSE(layout.ok());
  EXPECT_THAT(layout.status().message(), ::testing::HasSubstr("'w' appears twice"));
}

TEST(WriterTest, RejectsReservedNameInvalidUtf8AndBadSizes) {
  test_util::ExpectError(SafetensorsLayout::Plan({{"__metadata__", DType::kU8, {1}}}),
                         StatusCode::kInvalidInput, "cannot be named '__metadata__'");
  test_util::ExpectError(SafetensorsLayout::Plan({{"\xff", DType::kU8, {1}}}),
                         StatusCode::kInvalidInput, "is not valid UTF-8");
  test_util::ExpectError(SafetensorsLayout::Plan({{"w", DType::kU8, {-1}}}),
                         StatusCode::kInvalidInput, "tensor 'w': shape has a negative dimension");
  test_util::ExpectError(SafetensorsLayout::Plan({{"w", DType::kF4, {3}}}),
                         StatusCode::kInvalidInput,
                         "tensor 'w': 3 F4 elements do not fill whole bytes");
  test_util::ExpectError(SafetensorsLayout::Plan({{"w", DType::kF64, {int64_t{1} << 62}}}),
                         StatusCode::kInvalidInput,
                         "tensor 'w': shape has a negative dimension or its byte size overflows");
  EXPECT_TRUE(SafetensorsLayout::Plan({{"w", DType::kF4, {4}}}).ok());
}

TEST(WriterTest, SortLikeReferenceOrdersByDescendingDtypeThenName) {
  std::vector<TensorSpec> specs = {{"b", DType::kBF16, {1}}, {"a", DType::kU8, {1}},
                                   {"c", DType::kF32, {1}},  {"a", DType::kBF16, {1}},
                                   {"x", DType::kF4, {2}},   {"y", DType::kI64, {1}},
                                   {"m", DType::kF16, {1}},  {"B", DType::kBF16, {1}}};
  SortLikeReference(specs);
  std::vector<std::string> order;
  for (const TensorSpec& s : specs) order.push_back(s.name + ":" + std::string(DTypeName(s.dtype)));
  EXPECT_EQ(order, (std::vector<std::string>{"y:I64", "c:F32", "B:BF16", "a:BF16", "b:BF16",
                                             "m:F16", "a:U8", "x:F4"}));
}

}  // namespace
}  // namespace spk
