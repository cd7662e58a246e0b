#include "profiler/loop_profiler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <ranges>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "profiler/stage_stats.h"
#include "tests/support/durations.h"

namespace feedscope {
namespace {

using testing::kMs;

// The spans' clock, moved by the tests: durations are exact and nothing sleeps.
std::atomic<std::int64_t> g_now{0};
std::int64_t fake_now() noexcept { return g_now.load(); }

class LoopProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override { g_now = 1000 * kMs; }
  LoopProfiler::Options options(std::int64_t warmup = 0) {
    LoopProfiler::Options o;
    o.warmup = warmup;
    o.clock = &fake_now;
    return o;
  }
  // Stage statistics over the profiler's measured window.
  std::vector<StageStats> stats(LoopProfiler& p) {
    spans_.collect();
    const LoopWindow w = p.window();
    return compute_stage_stats(spans_.spans(), w.begin_ns, w.end_ns);
  }
  std::int64_t stage_count(LoopProfiler& p, Stage stage) {
    const std::vector<StageStats> st = stats(p);
    return find_stage(st, stage)->count;
  }
  SpanRegistry spans_;
};

TEST_F(LoopProfilerTest, WrapOverAVectorTimesOneWaitPerElementAndLeavesOutWarmup) {
  LoopProfiler p(spans_, options(3));
  const std::vector<int> data = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<int> seen;
  for (const int& x : p.wrap(data)) {
    auto step = p.step(2);
    g_now += kMs;
    seen.push_back(x);
  }
  EXPECT_EQ(seen, data);
  const LoopWindow w = p.window();
  EXPECT_TRUE(w.warmup_done);
  EXPECT_EQ(w.batches, 7);
  EXPECT_EQ(w.steps, 7);
  EXPECT_EQ(w.samples, 14);
  const auto st = stats(p);
  EXPECT_EQ(find_stage(st, Stage::wait)->count, 7);
  EXPECT_EQ(find_stage(st, Stage::step)->count, 7);
  EXPECT_DOUBLE_EQ(find_stage(st, Stage::step)->busy_s, 7e-3);
  EXPECT_DOUBLE_EQ(w.end_ns - w.begin_ns, 7 * kMs);  // the fetches took no (fake) time
  EXPECT_EQ(p.batches(), 10);
}

TEST_F(LoopProfilerTest, WrapOverAGeneratorRangeHoldsTheTemporaryAndTimesEachElement) {
  LoopProfiler p(spans_, options(0));
  std::vector<int> seen;
  for (int x : p.wrap(std::views::iota(0, 6) | std::views::transform([](int i) { return i * i; }))) {
    auto step = p.step();
    g_now += kMs;
    seen.push_back(x);
  }
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 4, 9, 16, 25}));
  EXPECT_EQ(stage_count(p, Stage::wait), 6);
}

TEST_F(LoopProfilerTest, AnEmptyRangeMeasuresNothing) {
  LoopProfiler p(spans_, options(0));
  for (int x : p.wrap(std::vector<int>{})) ADD_FAILURE() << x;
  const LoopWindow w = p.window();
  EXPECT_EQ(w.batches, 0);
  EXPECT_EQ(w.steps, 0);
  EXPECT_EQ(stage_count(p, Stage::wait), 0);
}

// An input range whose ++ blocks until the test lets it go, as a loader whose queue is empty
// blocks the training thread; the test moves the clock while the iterator is blocked.
class Gate {
 public:
  void pass() {
    std::unique_lock lock(m_);
    waiting_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return permits_ > 0; });
    --permits_;
    waiting_ = false;
  }
  // Waits until the consumer is blocked, runs `while_blocked`, then lets it through.
  template <typename F>
  void release(F while_blocked) {
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return waiting_ && permits_ == 0; });
    while_blocked();
    ++permits_;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool waiting_ = false;
  int permits_ = 0;
};

struct SlowRange {
  struct iterator {
    using iterator_category = std::input_iterator_tag;
    using value_type = int;
    using difference_type = std::ptrdiff_t;
    int operator*() const { return i; }
    iterator& operator++() {
      gate->pass();
      ++i;
      return *this;
    }
    bool operator!=(const iterator& o) const { return i != o.i; }
    Gate* gate;
    int i;
  };
  iterator begin() { return {&gate, 0}; }
  iterator end() { return {&gate, n}; }
  Gate gate;
  int n;
};

TEST_F(LoopProfilerTest, ABlockedFetchShowsUpAsWaitNotStep) {
  LoopProfiler p(spans_, options(0));
  SlowRange range{{}, 5};
  std::thread training([&] {
    for (int x : p.wrap(range)) {
      (void)x;
      auto step = p.step(1);
      g_now += kMs;
    }
  });
  // Every ++ (four to the next element, one that finds the end) blocks for 5 ms of the clock.
  for (int i = 0; i < 5; ++i) range.gate.release([] { g_now += 5 * kMs; });
  training.join();
  const auto st = stats(p);
  const StageStats* wait = find_stage(st, Stage::wait);
  EXPECT_EQ(wait->count, 5);
  // begin() found its element at once; the four fetches after it waited 5 ms each. The fetch
  // that found the end is no batch's wait and closes the window as it begins.
  EXPECT_DOUBLE_EQ(wait->busy_s, 20e-3);
  EXPECT_DOUBLE_EQ(find_stage(st, Stage::step)->busy_s, 5e-3);
  const LoopWindow w = p.window();
  EXPECT_EQ(w.end_ns - w.begin_ns, 25 * kMs);
}

// Like torch::data::DataLoader's iterator: begin() fetches nothing, the first comparison with
// the end sentinel does.
struct LazyRange {
  struct iterator {
    void fetch() const {
      if (!fetched) {
        g_now += 3 * kMs;
        fetched = true;
      }
    }
    int operator*() const { fetch(); return i; }
    iterator& operator++() { ++i; fetched = false; return *this; }
    bool operator!=(const iterator& o) const { fetch(); return i != o.i; }
    int i;
    mutable bool fetched = false;
  };
  iterator begin() { return {0}; }
  iterator end() { return {n, true}; }
  int n;
};

TEST_F(LoopProfilerTest, ALazyFirstBatchCountsAsTheFirstWait) {
  LoopProfiler p(spans_, options(0));
  int n = 0;
  for (int x : p.wrap(LazyRange{3})) {
    auto step = p.step();
    n += x >= 0;
  }
  EXPECT_EQ(n, 3);
  const std::vector<StageStats> st = stats(p);  // find_stage points into it
  const StageStats* wait = find_stage(st, Stage::wait);
  EXPECT_EQ(wait->count, 3);
  EXPECT_DOUBLE_EQ(wait->busy_s, 9e-3);
}

TEST_F(LoopProfilerTest, StepScopeIsMoveOnlyAndRecordsOnce) {
  static_assert(!std::is_copy_constructible_v<LoopProfiler::StepScope>);
  static_assert(!std::is_copy_assignable_v<LoopProfiler::StepScope>);
  static_assert(std::is_nothrow_move_constructible_v<LoopProfiler::StepScope>);
  LoopProfiler p(spans_, options(0));
  {
    auto a = p.step(8);
    g_now += 2 * kMs;
    auto b = std::move(a);
    b.set_samples(16);
    g_now += kMs;
  }
  {
    auto c = p.step(4);
    g_now += kMs;
    c.end();
    c.end();
  }
  const LoopWindow w = p.window();
  EXPECT_EQ(w.steps, 2);
  EXPECT_EQ(w.samples, 20);
  const std::vector<StageStats> st = stats(p);  // find_stage points into it
  const StageStats* step = find_stage(st, Stage::step);
  EXPECT_EQ(step->count, 2);
  EXPECT_DOUBLE_EQ(step->busy_s, 4e-3);
}

TEST_F(LoopProfilerTest, StepsWithoutWrapCountWarmupInSteps) {
  LoopProfiler p(spans_, options(2));
  for (int i = 0; i < 5; ++i) {
    auto step = p.step(10);
    g_now += kMs;
  }
  const LoopWindow w = p.window();
  EXPECT_EQ(w.steps, 3);
  EXPECT_EQ(w.samples, 30);
  EXPECT_EQ(stage_count(p, Stage::step), 3);
}

TEST_F(LoopProfilerTest, ALoopThatEndsInWarmupReportsWhatRan) {
  LoopProfiler p(spans_, options(10));
  for (int x : p.wrap(std::vector<int>{1, 2, 3})) {
    auto step = p.step(x);
    g_now += kMs;
  }
  const LoopWindow w = p.window();
  EXPECT_FALSE(w.warmup_done);
  EXPECT_EQ(w.steps, 3);
  EXPECT_EQ(w.samples, 6);
}

TEST_F(LoopProfilerTest, ABreakEndsTheWindowAtTheLastStep) {
  LoopProfiler p(spans_, options(0));
  for (int x : p.wrap(std::vector<int>{1, 2, 3, 4})) {
    {
      auto step = p.step();
      g_now += kMs;
    }
    if (x == 2) break;
  }
  const std::int64_t last = g_now;
  g_now += 100 * kMs;  // after the loop: not the loop's time
  const LoopWindow w = p.window();
  EXPECT_EQ(w.end_ns, last);
  EXPECT_EQ(w.steps, 2);
}

TEST_F(LoopProfilerTest, CustomScopesAreTimedByNameAndFixedNamesAreRefused) {
  LoopProfiler p(spans_, options(1));
  for (int x : p.wrap(std::vector<int>{1, 2, 3, 4})) {
    (void)x;
    auto step = p.step();
    {
      auto aug = p.scope("augment");
      g_now += 2 * kMs;
    }
    auto loss = p.scope("loss");
    g_now += kMs;
  }
  EXPECT_THROW(p.scope("wait"), std::invalid_argument);
  EXPECT_THROW(p.scope(""), std::invalid_argument);
  EXPECT_EQ(p.custom_stage("augment"), p.custom_stage("augment"));
  p.collect();
  const LoopWindow w = p.window();
  const auto custom = p.custom_stage_stats(w.begin_ns, w.end_ns);
  ASSERT_EQ(custom.size(), 2u);
  EXPECT_EQ(custom[0].name, "augment");
  EXPECT_EQ(custom[0].count, 3);  // warm-up's left out
  EXPECT_DOUBLE_EQ(custom[0].busy_s, 6e-3);
  EXPECT_DOUBLE_EQ(custom[0].mean_ms, 2.0);
  EXPECT_EQ(custom[1].name, "loss");
  EXPECT_EQ(custom[1].count, 3);
  EXPECT_DOUBLE_EQ(custom[1].share, 3e-3 / 9e-3);
  // Custom spans never pose as fixed stages.
  EXPECT_EQ(stage_count(p, Stage::step), 3);
}

struct CountingListener : LoopListener {
  void batch_done(std::int64_t samples) noexcept override {
    ++batches;
    this->samples += samples;
  }
  void window_opened(std::int64_t begin_ns) noexcept override {
    ++opened;
    opened_at = begin_ns;
  }
  int batches = 0, opened = 0;
  std::int64_t samples = 0, opened_at = 0;
};

TEST_F(LoopProfilerTest, TheListenerHearsEachBatchOnceAndTheWindowOpenOnce) {
  CountingListener listener;
  LoopProfiler p(spans_, options(2), &listener);
  int i = 0;
  for (int x : p.wrap(std::vector<int>{1, 2, 3, 4, 5})) {
    // Every other batch without a step scope: it still counts, with no samples.
    if (i++ % 2 == 0) {
      auto a = p.step(x);
      a.end();
      auto b = p.step(100);  // a second step on the same batch: not a second batch
    }
    g_now += kMs;
  }
  EXPECT_EQ(listener.batches, 5);
  EXPECT_EQ(listener.samples, 1 + 3 + 5);
  EXPECT_EQ(listener.opened, 1);
  EXPECT_EQ(listener.opened_at, p.window().begin_ns);
}

}  // namespace
}  // namespace feedscope
