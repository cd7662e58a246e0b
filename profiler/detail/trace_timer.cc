#include "profiler/detail/trace_timer.h"

#include <algorithm>
#include <utility>

#include "loader/span_recorder.h"

namespace feedscope::detail {

TraceTimer::TraceTimer(std::chrono::nanoseconds period, NextChange next_change,
                       std::function<void()> tick)
    : period_(period),
      next_change_(std::move(next_change)),
      tick_(std::move(tick)),
      thread_([this] { run(); }) {}

TraceTimer::~TraceTimer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::chrono::nanoseconds TraceTimer::wait_from(std::int64_t now, std::int64_t change,
                                               std::chrono::nanoseconds period) {
  constexpr std::int64_t kAtLeastNs = 1'000'000;
  // change - now cannot overflow: both are CLOCK_MONOTONIC times or the largest time, and now >= 0.
  const std::int64_t until = change - now;
  return std::chrono::nanoseconds(std::clamp<std::int64_t>(until, kAtLeastNs, std::max(kAtLeastNs, period.count())));
}

void TraceTimer::run() {
  std::unique_lock lock(mutex_);
  const auto wait = [this] {
    const std::int64_t now = now_ns();
    return wait_from(now, next_change_(now), period_);
  };
  while (!wake_.wait_for(lock, wait(), [this] { return stopping_; })) {
    lock.unlock();
    tick_();
    lock.lock();
  }
}

}  // namespace feedscope::detail
