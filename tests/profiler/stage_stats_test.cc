#include "profiler/stage_stats.h"

#include <gtest/gtest.h>
#include "tests/support/durations.h"

namespace feedscope {
namespace {

using testing::kMs;

TEST(StageStatsTest, PercentileInterpolatesLikeNumpy) {
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 0.95), 4.8);
  EXPECT_DOUBLE_EQ(percentile({7}, 0.95), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 0.5), 0);
}

TEST(StageStatsTest, BusyMeanShareAndLanesPerStage) {
  std::vector<Span> spans;
  // Two worker lanes decode 10 ms each, five times; the training thread waits 2 ms per step.
  for (int i = 0; i < 5; ++i) {
    spans.push_back({i * 20 * kMs, i * 20 * kMs + 10 * kMs, i, Stage::decode, 0});
    spans.push_back({i * 20 * kMs, i * 20 * kMs + 10 * kMs, i, Stage::decode, 1});
    spans.push_back({i * 20 * kMs, i * 20 * kMs + 2 * kMs, i, Stage::wait, 2});
  }
  const auto stats = compute_stage_stats(spans, 0, 100 * kMs);
  ASSERT_EQ(stats.size(), static_cast<std::size_t>(kStageCount));
  const StageStats* decode = find_stage(stats, Stage::decode);
  EXPECT_EQ(decode->count, 10);
  EXPECT_EQ(decode->lanes, 2);
  EXPECT_NEAR(decode->busy_s, 0.1, 1e-12);
  EXPECT_NEAR(decode->mean_ms, 10, 1e-9);
  EXPECT_NEAR(decode->share, 0.5, 1e-9) << "100 ms busy over 2 lanes x 100 ms";
  const StageStats* wait = find_stage(stats, Stage::wait);
  EXPECT_NEAR(wait->share, 0.1, 1e-9);
  EXPECT_EQ(find_stage(stats, Stage::h2d)->count, 0);
}

TEST(StageStatsTest, OnlySpansStartingInsideTheWindowCount) {
  std::vector<Span> spans = {{-5 * kMs, 1 * kMs, 0, Stage::step, 0},  // warm-up
                             {1 * kMs, 3 * kMs, 1, Stage::step, 0},
                             {10 * kMs, 12 * kMs, 2, Stage::step, 0}};  // after the end
  const auto stats = compute_stage_stats(spans, 0, 10 * kMs);
  EXPECT_EQ(find_stage(stats, Stage::step)->count, 1);
}

}  // namespace
}  // namespace feedscope
