#include "loader/span_recorder.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace feedscope {
namespace {

TEST(SpanRecorderTest, RingDropsWhenFullAndCountsIt) {
  SpanRing ring(4);
  for (int i = 0; i < 6; ++i) ring.push(Span{i, i + 1, i, Stage::read, 0});
  std::vector<Span> out;
  EXPECT_EQ(ring.drain(out), 4u);
  EXPECT_EQ(ring.dropped(), 2u);
  EXPECT_EQ(out.front().batch, 0);
  ring.push(Span{9, 10, 9, Stage::decode, 0});
  out.clear();
  EXPECT_EQ(ring.drain(out), 1u);
  EXPECT_EQ(out[0].stage, Stage::decode);
}

TEST(SpanRecorderTest, RejectsNonPowerOfTwoCapacity) {
  EXPECT_THROW(SpanRing(6), std::invalid_argument);
}

TEST(SpanRecorderTest, EachThreadGetsItsOwnLaneAndNothingIsLost) {
  SpanRegistry registry(1 << 12);
  constexpr int kThreads = 4, kSpans = 3000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kSpans; ++i) {
        ScopedSpan span(&registry, LaneRole::worker, Stage::decode, i);
        if (i % 500 == 0) std::this_thread::yield();
      }
    });
  // A concurrent reader drains while writers write.
  for (int i = 0; i < 50; ++i) registry.collect();
  for (auto& t : threads) t.join();
  registry.collect();
  EXPECT_EQ(registry.spans().size(), static_cast<std::size_t>(kThreads * kSpans));
  EXPECT_EQ(registry.dropped(), 0u);
  const auto lanes = registry.lanes();
  ASSERT_EQ(lanes.size(), static_cast<std::size_t>(kThreads));
  EXPECT_EQ(lanes[0].name, "worker 0");
  EXPECT_EQ(lanes[3].name, "worker 3");
}

TEST(SpanRecorderTest, NullRegistryRecordsNothing) {
  ScopedSpan span(nullptr, LaneRole::training, Stage::step, 0);
  SUCCEED();
}

TEST(SpanRecorderTest, StageNamesRoundTrip) {
  for (int i = 0; i < kStageCount; ++i) {
    const auto stage = static_cast<Stage>(i);
    EXPECT_EQ(stage_from_name(stage_name(stage)), stage);
  }
  EXPECT_FALSE(stage_from_name("fetch"));
  EXPECT_TRUE(is_worker_stage(Stage::decode));
  EXPECT_FALSE(is_worker_stage(Stage::wait));
}

}  // namespace
}  // namespace feedscope
