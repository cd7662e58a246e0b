#include "profiler/growth_shape.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

namespace feedscope {
namespace {

constexpr double kMiB = 1 << 20;

// Readings every half second for `seconds`, of `mib(t)` MiB on top of 640 MiB, with a small
// deterministic ripple (an allocator's steps).
GrowthShape shape_of(double seconds, const std::function<double(double)>& mib) {
  std::vector<double> t, v;
  for (int i = 0; i <= static_cast<int>(seconds * 2); ++i) {
    t.push_back(i * 0.5);
    v.push_back((640 + mib(i * 0.5) + 0.2 * std::sin(i * 1.7)) * kMiB);
  }
  return growth_shape(t, v);
}

TEST(GrowthShapeTest, ThirtyMiBInTwentySecondsThenFlatLevelsOff) {
  const GrowthShape g = shape_of(60, [](double t) { return 30 * std::min(t, 20.0) / 20; });
  EXPECT_TRUE(g.levels_off);
  EXPECT_NEAR(g.knee_s, 20, 1.0);
  EXPECT_NEAR(g.rise_per_s / kMiB, 1.5, 0.05);
  EXPECT_LT(g.flat_residuals, 0.01 * g.line_residuals);
}

TEST(GrowthShapeTest, SteadyGrowthForSixtySecondsDoesNotBend) {
  const GrowthShape g = shape_of(60, [](double t) { return 1.0 * t; });
  EXPECT_FALSE(g.levels_off);
}

TEST(GrowthShapeTest, WarmUpThatSlowsLevelsOffAndGrowthThatGoesOnDoesNot) {
  // An allocator's warm-up approaching its size (tau 20 s): both halves of a minute grow at a third
  // of the whole's rate or more, so only the shape tells it from a leak.
  EXPECT_TRUE(shape_of(60, [](double t) { return 120 * (1 - std::exp(-t / 20)); }).levels_off);
  // Growth that slows but goes on (a cache filling ever more slowly, sqrt(t)): still growing at
  // more than a third of its early rate.
  EXPECT_FALSE(shape_of(60, [](double t) { return 20 * std::sqrt(t); }).levels_off);
}

TEST(GrowthShapeTest, TooFewReadingsNeverLevelOff) {
  EXPECT_FALSE(shape_of(3, [](double t) { return 30 * std::min(t, 1.0); }).levels_off);
}

}  // namespace
}  // namespace feedscope
