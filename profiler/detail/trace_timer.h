#pragma once
// The thread that keeps a CUPTI recording going: it calls `tick` every `period`, and sooner where
// sampled tracing switches before that (`next_change`, cupti_records.h's
// next_trace_sampling_change), so that a window lasts what the schedule says rather than a
// multiple of the period. The injection (`watch`) flushes, switches and writes its records from
// it; the in-process CUPTI source flushes and switches. Clock-free but for the wait, so a test
// drives it with a schedule of its own.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace feedscope::detail {

class TraceTimer {
 public:
  // The time of the next switch after `now` (CLOCK_MONOTONIC ns, loader/span_recorder.h's
  // now_ns); the largest time where none is due.
  using NextChange = std::function<std::int64_t(std::int64_t now)>;

  // Starts the thread; the first tick comes after a period, or at the first change.
  TraceTimer(std::chrono::nanoseconds period, NextChange next_change, std::function<void()> tick);
  // Wakes the thread and joins it: no tick runs after the destructor returns.
  ~TraceTimer();
  TraceTimer(const TraceTimer&) = delete;
  TraceTimer& operator=(const TraceTimer&) = delete;

  // How long the thread waits from `now`: until the change, within [1 ms, period]. A change
  // already due waits 1 ms, not 0, so a schedule that stays due cannot spin.
  static std::chrono::nanoseconds wait_from(std::int64_t now, std::int64_t change,
                                            std::chrono::nanoseconds period);

 private:
  void run();

  const std::chrono::nanoseconds period_;
  const NextChange next_change_;
  const std::function<void()> tick_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;     // last: it starts once the members above exist
};

}  // namespace feedscope::detail
