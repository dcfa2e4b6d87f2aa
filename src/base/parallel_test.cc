#include "base/parallel.h"

#include <gtest/gtest.h>

#include <vector>

namespace spk {
namespace {

TEST(ParallelForTest, RunsEveryItemOnce) {
  std::vector<int> hits(1000, 0);
  Status s = ParallelFor(4, hits.size(), [&](size_t i) {
    hits[i]++;
    return Status::Ok();
  });
  ASSERT_TRUE(s.ok());
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(ParallelForTest, ReportsTheLowestFailingItem) {
  Status s = ParallelFor(3, 100, [](size_t i) {
    if (i % 10 == 7) return Status::InvalidInput("item " + std::to_string(i));
    return Status::Ok();
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
}

TEST(ParallelForTest, SingleThreadIsDeterministicAndCancelStops) {
  Status s = ParallelFor(1, 100, [](size_t i) {
    return i >= 5 ? Status::InvalidInput("item " + std::to_string(i)) : Status::Ok();
  });
  EXPECT_EQ(s.message(), "item 5");
  std::atomic<bool> cancel{true};
  int ran = 0;
  s = ParallelFor(
      2, 10,
      [&](size_t) {
        ++ran;
        return Status::Ok();
      },
      &cancel);
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  EXPECT_EQ(ran, 0);
}

}  // namespace
}  // namespace spk
