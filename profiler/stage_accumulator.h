#pragma once
// Stage statistics fed span by span, in memory that does not grow with the number of spans: a
// run of days keeps a count, a sum, the lanes seen and a duration histogram per stage, never the
// spans. The numbers are compute_stage_stats()'s (stage_stats.h): count, busy_s, mean_ms, lanes
// and share exactly, p50_ms and p95_ms within LogHistogram::kRelativeError (0.79 %).
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "loader/span_recorder.h"
#include "profiler/report.h"
#include "sampler/log_histogram.h"

namespace feedscope {

// A span as the accumulators group it: `slot` is what statistics are kept per (the stage, or a
// custom stage's id), `lane` the thread that ran it.
struct TimedSpan {
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::uint16_t slot = 0;
  std::uint16_t lane = 0;
};

inline TimedSpan by_stage(const Span& span) {
  return {span.begin_ns, span.end_ns, static_cast<std::uint16_t>(span.stage), span.lane};
}

// The seven fixed stage names, in pipeline order: the slot names of by_stage() spans.
const std::vector<std::string>& fixed_stage_names();

// Statistics per slot of every span added. Not thread-safe: one writer, or a lock around it.
class StageAccumulator {
 public:
  void add(const TimedSpan& span);
  void merge(const StageAccumulator& other);
  void clear() { slots_.clear(); }

  // One entry per name, slot i named names[i] (slots without a name are left out); share is
  // busy / (wall_s x lanes).
  std::vector<StageStats> stats(const std::vector<std::string>& names, double wall_s) const;

 private:
  struct Slot {
    std::int64_t count = 0;
    std::int64_t busy_ns = 0;
    std::vector<std::uint64_t> lanes;  // bitmap of the lanes seen
    LogHistogram durations_ns;
  };
  std::vector<Slot> slots_;
};

// Statistics over a window whose bounds the training thread decides while another thread feeds
// it spans, drained from the rings late and in no particular order: a span counts when it begins
// inside [begin, end), as in compute_stage_stats(), however late it arrives. The begin (the end of
// warm-up) and the end are known only when they happen.
//
// The training thread keeps saying how far it has got: advance(t) promises that every bound
// still to come is at or after t. A span that begins before that floor can be placed at once
// (before the window, or by its begin once the window is open); only the spans that began after
// it, about one step's worth, wait as they are until the floor passes them or finish() places
// them. A window that never opens (the run ended in warm-up) is the whole run from the origin.
//
// Threading contract: add() on one collecting thread; set_origin(), advance() and open_window()
// on the training thread; finish() once the last add() has returned. The class is otherwise
// thread-safe: its state is behind one mutex, taken once per add() call, not per span.
class WindowedStageStats {
 public:
  // Spans that begin before `origin_ns` never count.
  explicit WindowedStageStats(std::int64_t origin_ns);
  WindowedStageStats(const WindowedStageStats&) = delete;
  WindowedStageStats& operator=(const WindowedStageStats&) = delete;

  // Moves the origin, before the first advance() (a wrapped loop's origin is its first event).
  void set_origin(std::int64_t origin_ns);
  // Every bound still to come (the window's begin, its end) is at or after `floor_ns`.
  // Never blocks or allocates; one thread.
  void advance(std::int64_t floor_ns) noexcept;
  // Warm-up is over: the window begins at `begin_ns`, at or after every floor given so far.
  void open_window(std::int64_t begin_ns);

  void add(std::span<const TimedSpan> spans);

  // Statistics over [begin_ns, end_ns), one entry per name. `begin_ns` is the opened window's
  // begin, or (a run that stopped in warm-up) at or before the origin: the whole run. Any other
  // begin throws std::invalid_argument, since the spans before it were not kept apart.
  std::vector<StageStats> finish(std::int64_t begin_ns, std::int64_t end_ns,
                                 const std::vector<std::string>& names);

  // Spans waiting for the floor to pass them: what the memory bound rests on.
  std::size_t held() const;

 private:
  void place(const TimedSpan& span);  // mutex_ held
  void place_held(std::int64_t floor);  // mutex_ held

  // Written by the training thread only, read under mutex_ by the collecting one.
  std::atomic<std::int64_t> floor_;
  std::int64_t floor_written_;  // the training thread's copy, to keep floor_ monotonic

  // Below state is shared between the two threads, guarded by mutex_.
  mutable std::mutex mutex_;
  std::int64_t origin_;
  bool opened_ = false;
  std::int64_t begin_ = 0;
  std::int64_t held_floor_;  // the floor the held spans were last placed against
  StageAccumulator before_;  // [origin, begin): counts only if the window never opens
  StageAccumulator inside_;  // [begin, floor)
  std::vector<TimedSpan> held_;
};

}  // namespace feedscope
