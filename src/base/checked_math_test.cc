#include "base/checked_math.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace spk {
namespace {

TEST(CheckedMathTest, ElementCountDetectsOverflowAndNegatives) {
  uint64_t n = 0;
  std::vector<int64_t> ok = {4096, 12288};
  ASSERT_TRUE(CheckedElementCount(ok, &n));
  EXPECT_EQ(n, 4096u * 12288u);
  std::vector<int64_t> scalar = {};
  ASSERT_TRUE(CheckedElementCount(scalar, &n));
  EXPECT_EQ(n, 1u);
  std::vector<int64_t> huge = {1LL << 40, 1LL << 40};
  EXPECT_FALSE(CheckedElementCount(huge, &n));
  std::vector<int64_t> negative = {3, -1};
  EXPECT_FALSE(CheckedElementCount(negative, &n));
}

TEST(CheckedMathTest, ByteSize) {
  uint64_t b = 0;
  ASSERT_TRUE(CheckedByteSize(10, 16, &b));
  EXPECT_EQ(b, 20u);
  EXPECT_FALSE(CheckedByteSize(3, 4, &b));  // 12 bits is not whole bytes
  EXPECT_FALSE(CheckedByteSize(std::numeric_limits<uint64_t>::max() / 2, 16, &b));
}

}  // namespace
}  // namespace spk
