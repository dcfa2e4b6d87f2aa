#include "bench/schedule.h"

#include <gtest/gtest.h>

#include <string>

namespace spk::bench {
namespace {

std::string Letters(const std::vector<Turn>& turns) {
  std::string s;
  for (const Turn& t : turns) s.push_back(static_cast<char>('A' + t.arm));
  return s;
}

TEST(AbbaSchedule, TwoArms) {
  auto turns = AbbaSchedule(2, 4);
  EXPECT_EQ(Letters(turns), "ABBAABBA");
  EXPECT_EQ(turns[2].block, 1u);
  EXPECT_EQ(turns[7].block, 3u);
  EXPECT_EQ(Letters(AbbaSchedule(2, 4, /*start_reversed=*/true)), "BAABBAAB");
}

TEST(AbbaSchedule, ThreeArmsAndEdgeCases) {
  EXPECT_EQ(Letters(AbbaSchedule(3, 3)), "ABCCBAABC");
  EXPECT_EQ(Letters(AbbaSchedule(1, 3)), "AAA");
  EXPECT_TRUE(AbbaSchedule(2, 0).empty());
}

TEST(AbbaSchedule, EveryArmOncePerBlock) {
  auto turns = AbbaSchedule(4, 5);
  ASSERT_EQ(turns.size(), 20u);
  for (size_t b = 0; b < 5; ++b) {
    int seen = 0;
    for (const Turn& t : turns) {
      if (t.block == b) seen |= 1 << t.arm;
    }
    EXPECT_EQ(seen, 0xF);
  }
}

}  // namespace
}  // namespace spk::bench
