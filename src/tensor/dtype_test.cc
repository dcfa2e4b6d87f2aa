#include "tensor/dtype.h"

#include <gtest/gtest.h>

namespace spk {
namespace {

TEST(DTypeTest, NamesRoundTripForEveryDType) {
  for (int i = 0; i <= static_cast<int>(DType::kU64); ++i) {
    DType d = static_cast<DType>(i);
    auto parsed = DTypeFromName(DTypeName(d));
    ASSERT_TRUE(parsed.has_value()) << DTypeName(d);
    EXPECT_EQ(*parsed, d);
  }
}

TEST(DTypeTest, WidthsAndUnknownNames) {
  EXPECT_EQ(DTypeBits(DType::kBF16), 16u);
  EXPECT_EQ(DTypeBits(DType::kF4), 4u);
  EXPECT_EQ(DTypeBits(DType::kF6E3M2), 6u);
  EXPECT_EQ(DTypeBits(DType::kC64), 64u);
  EXPECT_FALSE(DTypeFromName("bf16").has_value());
  EXPECT_FALSE(DTypeFromName("F8_E4M3FN").has_value());
  EXPECT_TRUE(IsQuantizableFloat(DType::kF16));
  EXPECT_FALSE(IsQuantizableFloat(DType::kF64));
}

}  // namespace
}  // namespace spk
