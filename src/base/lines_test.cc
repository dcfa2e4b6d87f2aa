#include "base/lines.h"

#include <gtest/gtest.h>

namespace spk {
namespace {

TEST(SplitLines, FinalLineWithoutNewlineIsALine) {
  EXPECT_EQ(SplitLines("a\nbb\nc"), (std::vector<std::string_view>{"a", "bb", "c"}));
  EXPECT_EQ(SplitLines("a\nbb\n"), (std::vector<std::string_view>{"a", "bb"}));
}

TEST(SplitLines, EmptyLinesAndCarriageReturnsAreKept) {
  EXPECT_EQ(SplitLines("\n\nx\r\n"), (std::vector<std::string_view>{"", "", "x\r"}));
  EXPECT_TRUE(SplitLines("").empty());
}

}  // namespace
}  // namespace spk
