#include "profiler/trace_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "tests/support/durations.h"

namespace feedscope {
namespace {

using testing::kMs;

Span span_at(std::int64_t begin_ns, std::int64_t batch) {
  return {begin_ns, begin_ns + kMs / 2, batch, Stage::collate, 0};
}

std::vector<std::int64_t> batches(std::span<const Span> spans) {
  std::vector<std::int64_t> out;
  for (const Span& s : spans) out.push_back(s.batch);
  return out;
}

TEST(TraceBufferTest, UnderTheCapEverySpanIsKeptInArrivalOrder) {
  TraceBuffer t(10, 0);
  for (int i = 0; i < 10; ++i) t.add(span_at(i * kMs, i));
  EXPECT_EQ(t.total(), 10u);
  EXPECT_EQ(t.kept(), 10u);
  EXPECT_FALSE(t.omitted());
  EXPECT_EQ(batches(t.finish()), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(TraceBufferTest, PastTheCapTheFirstHalfAndTheLatestHalfAreKeptAndTheRestCounted) {
  TraceBuffer t(6, 0);
  for (int i = 0; i < 100; ++i) t.add(span_at(i * kMs, i));
  EXPECT_EQ(t.total(), 100u);
  EXPECT_EQ(t.max_spans(), 6u);
  ASSERT_TRUE(t.omitted());
  EXPECT_EQ(t.omitted_from_ns(), 3 * kMs);
  EXPECT_EQ(t.omitted_to_ns(), 96 * kMs);
  EXPECT_EQ(t.kept(), 6u);
  EXPECT_EQ(batches(t.finish()), (std::vector<std::int64_t>{0, 1, 2, 97, 98, 99}));
  EXPECT_EQ(batches(t.finish()), (std::vector<std::int64_t>{0, 1, 2, 97, 98, 99})) << "idempotent";
  EXPECT_EQ(t.kept(), 6u);
}

TEST(TraceBufferTest, OutOfOrderArrivalsAreTrimmedToACleanCut) {
  // Spans arrive as the collector drains them: per lane in order, lanes interleaved late.
  std::mt19937_64 rng(17);
  std::vector<Span> all;
  for (int i = 0; i < 20000; ++i) all.push_back(span_at(i * 10'000 + static_cast<int>(rng() % 5000), i));
  std::vector<Span> arrival = all;
  // Shuffle within windows of 300 spans: what several lanes drained 100 ms apart look like.
  for (std::size_t i = 0; i < arrival.size(); i += 300)
    std::shuffle(arrival.begin() + i, arrival.begin() + std::min(i + 300, arrival.size()), rng);
  TraceBuffer t(1000, 0);
  for (const Span& s : arrival) t.add(s);
  ASSERT_TRUE(t.omitted());
  const std::int64_t from = t.omitted_from_ns(), to = t.omitted_to_ns();
  EXPECT_LT(from, to);
  const std::span<const Span> kept = t.finish();
  EXPECT_LE(kept.size(), 1000u);
  EXPECT_EQ(kept.size(), t.kept());
  EXPECT_EQ(t.total(), 20000u);
  // The promise: every span that began before `from` or after `to`, and no other.
  std::set<std::int64_t> kept_batches;
  for (const Span& s : kept) EXPECT_TRUE(kept_batches.insert(s.batch).second) << "kept twice";
  for (const Span& s : all) {
    const bool outside = s.begin_ns < from || s.begin_ns > to;
    EXPECT_EQ(kept_batches.count(s.batch), outside ? 1u : 0u) << "batch " << s.batch << " at " << s.begin_ns;
  }
  // The cut loses only spans that arrived out of place around an edge: at most a shuffle
  // window's worth at each.
  EXPECT_GE(kept.size(), 1000u - 2 * 300u);
}

TEST(TraceBufferTest, SmallCapsAndSpansBeforeTheOrigin) {
  TraceBuffer none(0, 0);
  for (int i = 0; i < 5; ++i) none.add(span_at(i * kMs, i));
  EXPECT_EQ(none.total(), 5u);
  EXPECT_EQ(none.kept(), 0u);
  EXPECT_TRUE(none.omitted());
  EXPECT_TRUE(none.finish().empty());

  TraceBuffer one(1, 0);
  for (int i = 0; i < 5; ++i) one.add(span_at(i * kMs, i));
  EXPECT_EQ(batches(one.finish()), (std::vector<std::int64_t>{0}));

  TraceBuffer later(4, 10 * kMs);
  later.add({0, 5 * kMs, 0, Stage::read, 0});              // ended before the origin: not counted
  later.add({9 * kMs, 11 * kMs, 1, Stage::read, 0});       // still running at it: counted
  EXPECT_EQ(later.total(), 1u);
  EXPECT_EQ(batches(later.finish()), (std::vector<std::int64_t>{1}));
}

}  // namespace
}  // namespace feedscope
