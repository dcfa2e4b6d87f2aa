#include "quant/params.h"

#include <gtest/gtest.h>

#include <string>

namespace spk {
namespace {

TEST(ParamsTest, ValidateParamsRejectsUnsupported) {
  EXPECT_EQ(ValidateParams({.bits = 1}).code(), StatusCode::kUsage);
  EXPECT_EQ(ValidateParams({.bits = 9}).code(), StatusCode::kUsage);
  for (int bits = 2; bits <= 8; ++bits) EXPECT_TRUE(ValidateParams({.bits = bits}).ok()) << bits;
  EXPECT_EQ(ValidateParams({.bits = 4, .group_size = 0}).code(), StatusCode::kUsage);
  EXPECT_EQ(ValidateParams({.bits = 4, .group_size = -2}).code(), StatusCode::kUsage);
  EXPECT_TRUE(ValidateParams({.bits = 8, .group_size = -1}).ok());
}

TEST(ParamsTest, RangesAndGroups) {
  EXPECT_EQ(QMin(4), -8);
  EXPECT_EQ(QMax(4), 7);
  EXPECT_EQ(QMin(8), -128);
  EXPECT_EQ(QMax(8), 127);
  EXPECT_TRUE(GroupFits(4096, 128));
  EXPECT_FALSE(GroupFits(4000, 128));
  EXPECT_TRUE(GroupFits(4000, kChannelWise));
  EXPECT_FALSE(GroupFits(0, kChannelWise));
  EXPECT_FALSE(GroupFits(128, 0));
  EXPECT_EQ(GroupWidth(4096, 128), 128);
  EXPECT_EQ(GroupWidth(4096, -1), 4096);
  EXPECT_EQ(GroupsPerRow(4096, 128), 32);
  EXPECT_EQ(GroupsPerRow(4096, -1), 1);
}

TEST(ParamsTest, Shapes) {
  EXPECT_EQ(PackedShape(4096, 11008, 4), (std::vector<int64_t>{4096, 1376}));
  EXPECT_EQ(PackedShape(4096, 11008, 8), (std::vector<int64_t>{4096, 2752}));
  EXPECT_EQ(PackedShape(3, 12, 4), (std::vector<int64_t>{3, 2}));  // ceil, as pack_to_int32
  EXPECT_EQ(ScaleShape(4096, 11008, 128), (std::vector<int64_t>{4096, 86}));
  EXPECT_EQ(ScaleShape(4096, 11008, -1), (std::vector<int64_t>{4096, 1}));
  EXPECT_EQ(ZeroPointShape(4096, 11008, 4, 128), (std::vector<int64_t>{512, 86}));
  EXPECT_EQ(ZeroPointShape(4096, 11008, 8, -1), (std::vector<int64_t>{1024, 1}));
  EXPECT_EQ(ZeroPointShape(5, 256, 4, 128), (std::vector<int64_t>{1, 2}));
  // Widths that do not divide 32: ceil(cols * bits / 32) words, zero points ceil(rows * bits / 32).
  EXPECT_EQ(PackedShape(200, 256, 3), (std::vector<int64_t>{200, 24}));
  EXPECT_EQ(PackedShape(13, 100, 3), (std::vector<int64_t>{13, 10}));  // 300 bits: 20 unused
  EXPECT_EQ(PackedShape(13, 100, 5), (std::vector<int64_t>{13, 16}));
  EXPECT_EQ(PackedShape(13, 100, 7), (std::vector<int64_t>{13, 22}));
  EXPECT_EQ(ZeroPointShape(200, 256, 3, 128), (std::vector<int64_t>{19, 2}));  // 600 bits
  EXPECT_EQ(ZeroPointShape(13, 100, 6, -1), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(ZeroPointShape(96, 384, 2, 128), (std::vector<int64_t>{6, 3}));
  EXPECT_EQ(PackedWords(0, 4), 0);
  EXPECT_EQ(PackedWords(9, 4), 2);
}

}  // namespace
}  // namespace spk
