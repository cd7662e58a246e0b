#include "loader/sample_rng.h"

#include <gtest/gtest.h>

#include <set>

namespace feedscope {
namespace {

TEST(SampleRngTest, StreamsDependOnTheKeysOnly) {
  SampleRng a(1, 2, 3), b(1, 2, 3), c(1, 3, 2), d(2, 2, 3);
  const std::uint64_t first = a.next();
  EXPECT_EQ(first, b.next());
  EXPECT_NE(first, c.next());
  EXPECT_NE(first, d.next());
  SampleRng r(9);
  double sum = 0;
  int counts[5] = {};
  for (int i = 0; i < 50000; ++i) {
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    const auto k = r.randint(-2, 2);
    ASSERT_GE(k, -2);
    ASSERT_LE(k, 2);
    ++counts[k + 2];
  }
  EXPECT_NEAR(sum / 50000, 0.5, 0.01);
  for (const int n : counts) EXPECT_NEAR(n / 50000.0, 0.2, 0.015);
}

TEST(SampleRngTest, RandintCoversTheWholeRangeIncludingLargeOnes) {
  SampleRng r(4);
  std::set<std::int64_t> seen;
  for (int i = 0; i < 2000; ++i) seen.insert(r.randint(0, 9));
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 9);
  for (int i = 0; i < 1000; ++i) {
    const auto v = r.randint(-(std::int64_t{1} << 62), std::int64_t{1} << 62);
    ASSERT_GE(v, -(std::int64_t{1} << 62));
    ASSERT_LE(v, std::int64_t{1} << 62);
  }
  EXPECT_EQ(r.randint(7, 7), 7);
}

}  // namespace
}  // namespace feedscope
