// The thread that keeps a CUPTI recording going (profiler/detail/trace_timer.h): it ticks every
// period, sooner where a sampled window switches, and never after it is gone. The waits are real;
// each test's period is far longer than the time it allows, so that only the change or the stop
// can have woken the thread, however loaded the machine.
#include "profiler/detail/trace_timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <thread>

#include "loader/span_recorder.h"

namespace feedscope::detail {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

TEST(TraceTimerTest, TheWaitIsUntilTheChangeWithinAMillisecondAndThePeriod) {
  constexpr auto period = 200ms;
  EXPECT_EQ(TraceTimer::wait_from(1'000, 1'000 + 5'000'000, period), 5ms);
  EXPECT_EQ(TraceTimer::wait_from(1'000, kNever, period), period) << "no change due: the period";
  EXPECT_EQ(TraceTimer::wait_from(10'000'000, 1'000, period), 1ms) << "one already due: no spin";
  EXPECT_EQ(TraceTimer::wait_from(0, 0, 0ns), 1ms);
}

// A schedule of three switches 20 ms apart wakes the thread three times, long before its hour.
TEST(TraceTimerTest, ASwitchWakesTheThreadBeforeItsPeriod) {
  std::mutex mutex;
  std::condition_variable ticked;
  int ticks = 0;
  std::atomic<int> switches_left{3};
  {
    TraceTimer timer(
        1h,
        [&](std::int64_t now) { return switches_left.load() > 0 ? now + 20'000'000 : kNever; },
        [&] {
          switches_left.fetch_sub(1);
          std::lock_guard lock(mutex);
          ++ticks;
          ticked.notify_all();
        });
    std::unique_lock lock(mutex);
    EXPECT_TRUE(ticked.wait_for(lock, 60s, [&] { return ticks >= 3; }));
  }
  std::lock_guard lock(mutex);
  EXPECT_EQ(ticks, 3) << "after the last switch only the hour's period would wake it";
}

// Destruction wakes a thread in its hour-long wait and returns with no tick run after it.
TEST(TraceTimerTest, StoppingWakesTheWaitAndNoTickFollows) {
  std::atomic<int> ticks{0};
  const std::int64_t begin = now_ns();
  {
    TraceTimer timer(1h, [](std::int64_t) { return kNever; }, [&] { ticks.fetch_add(1); });
  }
  EXPECT_LT(now_ns() - begin, 60'000'000'000) << "the stop, not the period, ended the wait";
  EXPECT_EQ(ticks.load(), 0);
}

// A switch that stays due (a schedule behind the clock) ticks at most once a millisecond.
TEST(TraceTimerTest, ASwitchThatStaysDueDoesNotSpin) {
  std::atomic<int> ticks{0};
  const std::int64_t begin = now_ns();
  {
    TraceTimer timer(1h, [](std::int64_t now) { return now - 1; }, [&] { ticks.fetch_add(1); });
    std::this_thread::sleep_for(100ms);
  }
  const double elapsed_ms = static_cast<double>(now_ns() - begin) / 1e6;
  EXPECT_GE(ticks.load(), 1);
  EXPECT_LE(ticks.load(), elapsed_ms + 1) << "one tick per millisecond at most";
}

}  // namespace
}  // namespace feedscope::detail
