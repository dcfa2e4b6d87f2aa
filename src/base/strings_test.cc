#include "base/strings.h"

#include <gtest/gtest.h>

namespace spk {
namespace {

TEST(ReplaceAll, EveryOccurrenceLeftToRightWithoutRescanning) {
  EXPECT_EQ(ReplaceAll("layers.0.qkv_proj", "qkv_proj", "q_proj"), "layers.0.q_proj");
  EXPECT_EQ(ReplaceAll("a.b.a", "a", "aa"), "aa.b.aa");  // what is put in is not replaced again
  EXPECT_EQ(ReplaceAll("aaa", "aa", "b"), "ba");         // Python: 'aaa'.replace('aa', 'b')
  EXPECT_EQ(ReplaceAll("abc", "x", "y"), "abc");
  EXPECT_EQ(ReplaceAll("abc", "", "y"), "abc");
  EXPECT_EQ(ReplaceAll("", "a", "b"), "");
}

}  // namespace
}  // namespace spk
