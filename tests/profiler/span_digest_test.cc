#include "profiler/span_digest.h"

#include <malloc.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "profiler/stage_stats.h"
#include "tests/support/durations.h"

namespace feedscope {
namespace {

using testing::kMs;

constexpr std::int64_t kRunBegin = 5000 * kMs;

Span step_at(std::int64_t begin_ns, std::int64_t batch) {
  return {begin_ns, begin_ns + kMs / 2, batch, Stage::step, 0};
}

TEST(SpanDigestTest, KeepsTheStepWindowsOnlyWhenAskedAndFiltersThemByTheWindow) {
  SpanDigest::Options o;
  SpanDigest without(kRunBegin, o);
  without.add({step_at(kRunBegin + kMs, 0)});
  EXPECT_TRUE(without.steps(kRunBegin, kRunBegin + 100 * kMs).windows.empty());

  o.keep_steps = true;
  SpanDigest d(kRunBegin, o);
  std::vector<Span> spans;
  for (int i = 0; i < 10; ++i) spans.push_back(step_at(kRunBegin + i * kMs, i));
  spans.push_back({kRunBegin, kRunBegin + kMs, 0, Stage::wait, 0});  // not a step
  d.add(spans);
  const SpanDigest::Steps s = d.steps(kRunBegin + 3 * kMs, kRunBegin + 8 * kMs);
  ASSERT_EQ(s.windows.size(), 5u);
  EXPECT_EQ(s.windows.front().begin_ns, kRunBegin + 3 * kMs);
  EXPECT_EQ(s.complete_until_ns, std::numeric_limits<std::int64_t>::max());
}

TEST(SpanDigestTest, PastTheStepCapWarmupStepsGoFirstThenTheLaterOnesAreCountedOut) {
  SpanDigest::Options o;
  o.keep_steps = true;
  o.max_steps = 10;
  SpanDigest d(kRunBegin, o);
  for (int i = 0; i < 6; ++i) d.add({step_at(kRunBegin + i * kMs, i)});  // warm-up
  d.open_window(kRunBegin + 6 * kMs);
  for (int i = 6; i < 30; ++i) d.add({step_at(kRunBegin + i * kMs, i)});
  const SpanDigest::Steps s = d.steps(kRunBegin + 6 * kMs, kRunBegin + 30 * kMs);
  // The six warm-up steps made room for measured ones: steps 6..15 kept, 16.. left out.
  ASSERT_EQ(s.windows.size(), 10u);
  EXPECT_EQ(s.windows.front().begin_ns, kRunBegin + 6 * kMs);
  EXPECT_EQ(s.windows.back().begin_ns, kRunBegin + 15 * kMs);
  EXPECT_EQ(s.complete_until_ns, kRunBegin + 16 * kMs);
}

TEST(SpanDigestTest, TheTraceSummarySaysWhatTraceJsonHolds) {
  SpanDigest::Options o;
  o.trace_max_spans = 4;
  SpanDigest d(kRunBegin, o);
  for (int i = 0; i < 10; ++i) d.add({{kRunBegin + i * kMs, kRunBegin + i * kMs + 1, i, Stage::read, 0}});
  const TraceSummary t = d.trace_summary(kRunBegin);
  EXPECT_EQ(t.max_spans, 4u);
  EXPECT_EQ(t.spans_total, 10u);
  EXPECT_EQ(t.spans_kept, 4u);
  ASSERT_TRUE(t.omitted_from_s && t.omitted_to_s);
  EXPECT_DOUBLE_EQ(*t.omitted_from_s, 2e-3);
  EXPECT_DOUBLE_EQ(*t.omitted_to_s, 7e-3);
  const std::span<const Span> kept = d.trace_spans();
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_EQ(kept[0].batch, 0);
  EXPECT_EQ(kept[3].batch, 9);
}

// Bytes malloc has handed out and not had back, over every arena and mmapped chunk.
std::int64_t heap_in_use() {
  const struct mallinfo2 m = ::mallinfo2();
  return static_cast<std::int64_t>(m.uordblks + m.hblkhd);
}

TEST(SpanDigestTest, MillionsOfSpansThroughTheRegistryKeepMemoryBounded) {
  // What a long run does: threads record into the registry's rings, a collector drains them into
  // the digest, the training thread moves the window's floor on. The registry must keep nothing
  // and the digest no more than its caps, however many spans go through.
  constexpr std::size_t kTraceCap = 100'000;
  constexpr int kBatches = 20'000;       // of 1,000 spans: 20 million spans, 640 MB if kept
  constexpr int kSettledBatch = 2'000;   // the trace buffer full, the histograms' buckets made
  constexpr std::int64_t kGrowthBound = 2 << 20;
  SpanRegistry registry;
  SpanDigest::Options o;
  o.trace_max_spans = kTraceCap;
  o.keep_steps = true;
  SpanDigest digest(0, o);
  std::vector<Span> drained;
  std::int64_t t = 0;
  std::int64_t settled = 0;
  std::int64_t window_begin = 0;
  for (int b = 0; b < kBatches; ++b) {
    digest.advance(t);
    if (b == 10) digest.open_window(window_begin = t);
    for (int i = 0; i < 1000; ++i, t += 1000)
      registry.record(LaneRole::worker, i % 2 ? Stage::decode : Stage::read, b, t, t + 500 + i);
    registry.record(LaneRole::worker, Stage::step, b, t, t + 900);
    drained.clear();
    registry.drain(drained);
    ASSERT_EQ(drained.size(), 1001u);
    digest.add(drained);
    if (b == kSettledBatch) settled = heap_in_use();
  }
  const std::int64_t last = heap_in_use();
  EXPECT_EQ(registry.dropped(), 0u);
  // Only the spans that began since the last floor wait: the last batch's and the step before.
  EXPECT_LE(digest.held(), 1002u);
  const auto stats = digest.stage_stats(window_begin, t);
  EXPECT_EQ(find_stage(stats, Stage::read)->count, (kBatches - 10) * 500);
  EXPECT_EQ(find_stage(stats, Stage::step)->count, kBatches - 10);
  EXPECT_EQ(digest.steps(window_begin, t).windows.size(), static_cast<std::size_t>(kBatches - 10));
  std::printf("20 million spans: heap in use %.2f MiB after %d batches, %.2f MiB after %d\n",
              static_cast<double>(settled) / (1 << 20), kSettledBatch,
              static_cast<double>(last) / (1 << 20), kBatches);
  const TraceSummary trace = digest.trace_summary(0);
  EXPECT_EQ(trace.spans_total, static_cast<std::uint64_t>(kBatches) * 1001u);
  EXPECT_LE(trace.spans_kept, kTraceCap);
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan build: its allocator is not the one mallinfo2 reads";
#endif
  EXPECT_LT(last - settled, kGrowthBound) << "the heap grew while 18 million more spans went through";
}

}  // namespace
}  // namespace feedscope
