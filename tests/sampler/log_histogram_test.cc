#include "sampler/log_histogram.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "sampler/statistics.h"

namespace feedscope {
namespace {

// The promise: every quantile within kRelativeError of percentile() over the same values.
void expect_quantiles_match(const LogHistogram& h, const std::vector<double>& values) {
  for (const double q : {0.0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0}) {
    const double exact = percentile(values, q);
    EXPECT_NEAR(h.quantile(q), exact, exact * LogHistogram::kRelativeError + 1e-300)
        << "q " << q << " over " << values.size() << " values";
  }
}

TEST(LogHistogramTest, QuantilesOfRandomValuesAreWithinTheStatedError) {
  std::mt19937_64 rng(7);
  // Durations in ns as spans have them: lognormal around 50 us, from a few ns to seconds.
  std::lognormal_distribution<double> durations(std::log(50e3), 2.0);
  for (const std::size_t n : {1, 2, 3, 10, 1000, 100000}) {
    LogHistogram h;
    std::vector<double> values;
    for (std::size_t i = 0; i < n; ++i) {
      const double v = std::round(durations(rng));
      values.push_back(v);
      h.add(v);
    }
    EXPECT_EQ(h.count(), n);
    double sum = 0;
    for (double v : values) sum += v;
    EXPECT_DOUBLE_EQ(h.sum(), sum);
    expect_quantiles_match(h, values);
  }
}

TEST(LogHistogramTest, RatiosAndByteCountsAsTheSamplerHasThem) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> ratio(0.0, 1.0);
  std::uniform_real_distribution<double> bytes(1e3, 5e10);
  LogHistogram r, b;
  std::vector<double> rs, bs;
  for (int i = 0; i < 5000; ++i) {
    rs.push_back(ratio(rng)), r.add(rs.back());
    bs.push_back(bytes(rng)), b.add(bs.back());
  }
  expect_quantiles_match(r, rs);
  expect_quantiles_match(b, bs);
}

TEST(LogHistogramTest, ConstantAndExtremeValuesComeBackExactly) {
  LogHistogram h;
  for (int i = 0; i < 100; ++i) h.add(2e6);
  // Clamped to the exact min and max: a constant stage reports its value, not a bucket's middle.
  EXPECT_DOUBLE_EQ(h.quantile(0.5), 2e6);
  EXPECT_DOUBLE_EQ(h.quantile(0.95), 2e6);
  EXPECT_DOUBLE_EQ(h.mean(), 2e6);

  LogHistogram odd;
  odd.add(0);
  odd.add(-5);  // counts as 0
  odd.add(std::numeric_limits<double>::quiet_NaN());
  odd.add(1e-20);  // below the smallest bucket: 0
  odd.add(1e30);   // past the largest: the top bucket, max stays exact
  EXPECT_EQ(odd.count(), 5u);
  EXPECT_DOUBLE_EQ(odd.min(), 0);
  EXPECT_DOUBLE_EQ(odd.max(), 1e30);
  EXPECT_DOUBLE_EQ(odd.quantile(0), 0);
  EXPECT_DOUBLE_EQ(odd.quantile(1), 1e30);
  EXPECT_DOUBLE_EQ(odd.quantile(0.5), 0);

  const LogHistogram empty;
  EXPECT_EQ(empty.quantile(0.5), 0);
  EXPECT_EQ(empty.mean(), 0);
}

TEST(LogHistogramTest, MergeEqualsAddingEverythingToOne) {
  std::mt19937_64 rng(3);
  std::exponential_distribution<double> d(1e-4);
  LogHistogram a, b, all;
  std::vector<double> values;
  for (int i = 0; i < 20000; ++i) {
    const double v = d(rng);
    values.push_back(v);
    (i % 3 == 0 ? a : b).add(v);
    all.add(v);
  }
  LogHistogram merged = a;  // a copy, so `a` itself is left as it was
  merged.merge(b);
  EXPECT_EQ(merged.count(), all.count());
  EXPECT_DOUBLE_EQ(merged.min(), all.min());
  EXPECT_DOUBLE_EQ(merged.max(), all.max());
  for (const double q : {0.1, 0.5, 0.95}) EXPECT_DOUBLE_EQ(merged.quantile(q), all.quantile(q));
  expect_quantiles_match(merged, values);
  EXPECT_EQ(a.count(), 6667u);
}

}  // namespace
}  // namespace feedscope
