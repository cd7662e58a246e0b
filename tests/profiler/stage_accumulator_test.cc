#include "profiler/stage_accumulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "profiler/stage_stats.h"
#include "tests/support/durations.h"

namespace feedscope {
namespace {

using testing::kMs;

std::vector<TimedSpan> timed(const std::vector<Span>& spans) {
  std::vector<TimedSpan> out;
  for (const Span& s : spans) out.push_back(by_stage(s));
  return out;
}

// The streaming statistics against compute_stage_stats() over the same spans: count, busy, mean,
// lanes and share exactly (up to float rounding), p50 and p95 within the histogram's error.
void expect_matches_exact(const std::vector<StageStats>& streamed,
                          const std::vector<StageStats>& exact) {
  ASSERT_EQ(streamed.size(), exact.size());
  for (std::size_t i = 0; i < exact.size(); ++i) {
    const StageStats& s = streamed[i];
    const StageStats& e = exact[i];
    SCOPED_TRACE(e.name);
    EXPECT_EQ(s.name, e.name);
    EXPECT_EQ(s.count, e.count);
    EXPECT_EQ(s.lanes, e.lanes);
    EXPECT_NEAR(s.busy_s, e.busy_s, 1e-9 * std::max(1.0, e.busy_s));
    EXPECT_NEAR(s.mean_ms, e.mean_ms, 1e-9 * std::max(1.0, e.mean_ms));
    EXPECT_NEAR(s.share, e.share, 1e-9);
    EXPECT_NEAR(s.p50_ms, e.p50_ms, e.p50_ms * LogHistogram::kRelativeError);
    EXPECT_NEAR(s.p95_ms, e.p95_ms, e.p95_ms * LogHistogram::kRelativeError);
  }
}

// Spans of every stage on `lanes` lanes, beginning anywhere in [0, span_ns), durations from
// 100 ns to 100 ms (lognormal).
std::vector<Span> random_spans(std::size_t n, std::int64_t span_ns, int lanes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> begin(0, span_ns - 1);
  std::lognormal_distribution<double> duration(std::log(200e3), 2.0);
  std::uniform_int_distribution<int> stage(0, kStageCount - 1);
  std::uniform_int_distribution<int> lane(0, lanes - 1);
  std::vector<Span> out;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t b = begin(rng);
    const auto d = std::clamp<std::int64_t>(static_cast<std::int64_t>(duration(rng)), 100, 100 * kMs);
    out.push_back({b, b + d, static_cast<std::int64_t>(i), static_cast<Stage>(stage(rng)),
                   static_cast<std::uint16_t>(lane(rng))});
  }
  return out;
}

TEST(StageAccumulatorTest, AgreesWithTheExactStatisticsOnRandomSpans) {
  const std::vector<Span> spans = random_spans(50000, 2000 * kMs, 70, 1);
  StageAccumulator acc;
  for (const Span& s : spans) acc.add(by_stage(s));
  expect_matches_exact(acc.stats(fixed_stage_names(), 2.0), compute_stage_stats(spans, 0, 2000 * kMs));
}

TEST(StageAccumulatorTest, NamesPickTheSlotsAndEmptySlotsAreZero) {
  StageAccumulator acc;
  acc.add({0, 3 * kMs, 2, 0});
  acc.add({0, 5 * kMs, 2, 0});
  const auto st = acc.stats({"a", "b", "c", "d"}, 1.0);
  ASSERT_EQ(st.size(), 4u);
  EXPECT_EQ(st[0].count, 0);
  EXPECT_EQ(st[0].lanes, 0);
  EXPECT_EQ(st[2].name, "c");
  EXPECT_EQ(st[2].count, 2);
  EXPECT_DOUBLE_EQ(st[2].mean_ms, 4.0);
  EXPECT_EQ(st[3].count, 0);
}

// Feeds `spans` in chunks of random size and order, as the collector drains them, with the
// training thread's calls interleaved at the given points.
class WindowedStageStatsTest : public ::testing::Test {
 protected:
  static constexpr std::int64_t kOrigin = 1000 * kMs;
};

TEST_F(WindowedStageStatsTest, SpansCountByTheirBeginWhateverOrderTheyArriveIn) {
  // A run of 10 s: warm-up ends at 3 s, the run at 9 s. Spans arrive in drain batches while the
  // training thread advances its floor, late ones (long spans, slow rings) mixed in.
  const std::int64_t begin = kOrigin + 3000 * kMs, end = kOrigin + 9000 * kMs;
  std::vector<Span> spans = random_spans(200000, 10000 * kMs, 5, 2);
  for (Span& s : spans) s.begin_ns += kOrigin - 200 * kMs, s.end_ns += kOrigin - 200 * kMs;
  // Drain order: by end time (a span is pushed when it ends), then shuffled within 50 ms.
  std::mt19937_64 rng(5);
  std::vector<std::pair<std::int64_t, Span>> order;
  std::uniform_int_distribution<std::int64_t> jitter(0, 50 * kMs);
  for (const Span& s : spans) order.push_back({s.end_ns + jitter(rng), s});
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

  WindowedStageStats w(kOrigin);
  std::size_t next = 0;
  bool opened = false;
  std::size_t max_held = 0;
  // The training thread's clock in steps of 10 ms; each drain takes what was pushed until then.
  for (std::int64_t now = kOrigin; now <= end + 500 * kMs; now += 10 * kMs) {
    if (now <= end) w.advance(now);
    if (!opened && now + 10 * kMs > begin) {
      w.open_window(begin);
      opened = true;
    }
    std::vector<TimedSpan> batch;
    while (next < order.size() && order[next].first <= now) batch.push_back(by_stage(order[next++].second));
    w.add(batch);
    max_held = std::max(max_held, w.held());
  }
  std::vector<TimedSpan> rest;
  for (; next < order.size(); ++next) rest.push_back(by_stage(order[next].second));
  w.add(rest);
  expect_matches_exact(w.finish(begin, end, fixed_stage_names()), compute_stage_stats(spans, begin, end));
  // Only what began after the floor waits: a small share of the 200,000.
  EXPECT_LT(max_held, 20000u);
}

TEST_F(WindowedStageStatsTest, BoundaryCases) {
  const std::int64_t b = kOrigin + 100 * kMs, e = kOrigin + 200 * kMs;
  const std::vector<Span> spans = {
      {kOrigin - 5 * kMs, kOrigin + 5 * kMs, 0, Stage::decode, 0},  // before the origin: never
      {b - 1, b + 50 * kMs, 1, Stage::decode, 0},                  // one ns before the window
      {b, b + kMs, 2, Stage::decode, 1},                            // exactly at its begin: counts
      {e - 1, e + 500 * kMs, 3, Stage::decode, 0},                  // ends long after: counts
      {e, e + kMs, 4, Stage::decode, 1},                            // exactly at its end: not
      {e + 10 * kMs, e + 11 * kMs, 5, Stage::decode, 1},            // after the end: not
  };
  WindowedStageStats w(kOrigin);
  // Every span arrives before the window's bounds are known, but after a floor that does not
  // pass them: they wait, and finish() places them.
  w.advance(b - 10 * kMs);
  w.add(timed(spans));
  EXPECT_EQ(w.held(), 5u) << "all but the one before the origin wait for the floor";
  w.open_window(b);
  w.advance(e);
  const auto st = w.finish(b, e, fixed_stage_names());
  expect_matches_exact(st, compute_stage_stats(spans, b, e));
  EXPECT_EQ(find_stage(st, Stage::decode)->count, 2);
  EXPECT_EQ(find_stage(st, Stage::decode)->lanes, 2);
}

TEST_F(WindowedStageStatsTest, ASpanThatBeganInWarmupButArrivesLateStaysOut) {
  const std::int64_t b = kOrigin + 100 * kMs, e = kOrigin + 300 * kMs;
  WindowedStageStats w(kOrigin);
  w.advance(kOrigin + 50 * kMs);
  w.open_window(b);
  w.advance(kOrigin + 250 * kMs);
  // Drained after the window opened (a 180 ms decode that began in warm-up), and one inside.
  const std::vector<Span> spans = {{kOrigin + 90 * kMs, kOrigin + 270 * kMs, 0, Stage::decode, 0},
                                   {kOrigin + 120 * kMs, kOrigin + 121 * kMs, 1, Stage::decode, 0}};
  w.add(timed(spans));
  EXPECT_EQ(w.held(), 0u) << "both began before the floor: placed at once";
  const auto st = w.finish(b, e, fixed_stage_names());
  EXPECT_EQ(find_stage(st, Stage::decode)->count, 1);
}

TEST_F(WindowedStageStatsTest, ARunThatEndsInWarmupCountsEverythingFromTheOrigin) {
  const std::vector<Span> spans = random_spans(5000, 500 * kMs, 3, 9);
  std::vector<Span> shifted;
  for (Span s : spans) shifted.push_back({s.begin_ns + kOrigin, s.end_ns + kOrigin, s.batch, s.stage, s.lane});
  const std::int64_t e = kOrigin + 400 * kMs;
  {
    WindowedStageStats never_opened(kOrigin);
    never_opened.advance(kOrigin + 200 * kMs);
    never_opened.add(timed(shifted));
    expect_matches_exact(never_opened.finish(kOrigin, e, fixed_stage_names()),
                         compute_stage_stats(shifted, kOrigin, e));
  }
  {
    // Warm-up's last step ended, then the run stopped before a measured one: `feedscope run`
    // falls back to the whole run although the window had opened.
    WindowedStageStats opened(kOrigin);
    opened.advance(kOrigin + 200 * kMs);
    opened.open_window(kOrigin + 250 * kMs);
    opened.add(timed(shifted));
    expect_matches_exact(opened.finish(kOrigin, e, fixed_stage_names()),
                         compute_stage_stats(shifted, kOrigin, e));
  }
}

TEST_F(WindowedStageStatsTest, SetOriginMovesWhereAWindowThatNeverOpensBegins) {
  WindowedStageStats w(kOrigin);
  const std::vector<Span> spans = {{kOrigin + 10 * kMs, kOrigin + 11 * kMs, 0, Stage::step, 0},
                                   {kOrigin + 30 * kMs, kOrigin + 31 * kMs, 1, Stage::step, 0}};
  w.add(timed(spans));
  w.set_origin(kOrigin + 20 * kMs);  // a wrapped loop's first event
  w.advance(kOrigin + 20 * kMs);
  const std::int64_t e = kOrigin + 40 * kMs;
  const auto st = w.finish(kOrigin + 20 * kMs, e, fixed_stage_names());
  EXPECT_EQ(find_stage(st, Stage::step)->count, 1);
}

TEST_F(WindowedStageStatsTest, AWindowBeginThatWasNeverAnnouncedIsRefused) {
  WindowedStageStats w(kOrigin);
  w.open_window(kOrigin + 100 * kMs);
  EXPECT_THROW(w.finish(kOrigin + 50 * kMs, kOrigin + 200 * kMs, fixed_stage_names()),
               std::invalid_argument);
}

TEST_F(WindowedStageStatsTest, ACollectorThreadAndATrainingThreadAgreeWithTheExactStatistics) {
  // The two threads of a run, for real: one feeds drain batches while the other advances, opens
  // the window and ends it. Whatever the interleaving, the answer is the exact one.
  const std::vector<Span> spans = random_spans(300000, 3000 * kMs, 4, 13);
  std::vector<Span> by_end = spans;
  std::sort(by_end.begin(), by_end.end(), [](const Span& a, const Span& b) { return a.end_ns < b.end_ns; });
  const std::int64_t begin = 1000 * kMs, end = 2500 * kMs;
  WindowedStageStats w(0);
  std::atomic<std::int64_t> clock{0};  // the spans' time the training thread has reached
  std::thread collector([&] {
    std::size_t next = 0;
    std::vector<TimedSpan> batch;
    while (next < by_end.size()) {
      batch.clear();
      const std::int64_t now = clock.load();
      while (next < by_end.size() && (by_end[next].end_ns <= now || now >= end))
        batch.push_back(by_stage(by_end[next++]));
      w.add(batch);
      std::this_thread::yield();
    }
  });
  for (std::int64_t now = 0; now < end; now += kMs) {
    w.advance(now);
    if (now == begin) w.open_window(begin);
    clock.store(now);
    if (now % (50 * kMs) == 0) std::this_thread::yield();
  }
  clock.store(end);
  collector.join();
  expect_matches_exact(w.finish(begin, end, fixed_stage_names()), compute_stage_stats(spans, begin, end));
}

}  // namespace
}  // namespace feedscope
