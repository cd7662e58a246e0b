#pragma once
// What a run keeps of its stage spans, in memory that stays bounded however long it runs (a
// wrapped training loop may run for days at thousands of spans a second): the stage statistics
// over the measured window (WindowedStageStats), at most trace_max_spans spans for trace.json
// (TraceBuffer), and, for the GPU trace summary, the `step` windows up to a cap. The spans
// themselves are dropped once digested.
#include <cstdint>
#include <limits>
#include <mutex>
#include <span>
#include <vector>

#include "loader/span_recorder.h"
#include "profiler/gpu_trace.h"
#include "profiler/report.h"
#include "profiler/stage_accumulator.h"
#include "profiler/trace_buffer.h"

namespace feedscope {

// Threading contract: add() on one collecting thread; set_origin(), advance() and open_window()
// on the training thread (see WindowedStageStats); the readers once the last add() has returned.
class SpanDigest {
 public:
  struct Options {
    std::size_t trace_max_spans = 1'000'000;  // 32 MB of spans
    bool keep_steps = false;                  // only the GPU trace summary needs them
    std::size_t max_steps = std::size_t{1} << 20;  // 16 MiB of step windows
  };

  // `origin_ns`: the run's start; spans before it count nowhere.
  SpanDigest(std::int64_t origin_ns, Options options);

  void add(const std::vector<Span>& spans);

  // The measured window's bounds, as WindowedStageStats takes them. set_origin() moves the stage
  // statistics' origin only: trace.json keeps the run's start.
  void set_origin(std::int64_t origin_ns) { stats_.set_origin(origin_ns); }
  void advance(std::int64_t floor_ns) noexcept { stats_.advance(floor_ns); }
  void open_window(std::int64_t begin_ns);

  // The fixed stages' statistics over [begin_ns, end_ns); see WindowedStageStats::finish().
  std::vector<StageStats> stage_stats(std::int64_t begin_ns, std::int64_t end_ns);

  // The `step` windows that begin in [begin_ns, end_ns). When the cap left some out, the kept
  // ones are every step that began before complete_until_ns.
  struct Steps {
    std::vector<StepWindow> windows;
    std::int64_t complete_until_ns = std::numeric_limits<std::int64_t>::max();
  };
  Steps steps(std::int64_t begin_ns, std::int64_t end_ns) const;

  // The spans for trace.json, in place (TraceBuffer::finish()): valid while the digest lives.
  std::span<const Span> trace_spans();
  // report.json's `trace`, times in seconds after `origin_ns` (trace.json's zero).
  TraceSummary trace_summary(std::int64_t origin_ns);
  // Spans the stage statistics hold back for the training thread's floor (tests of the bound).
  std::size_t held() const { return stats_.held(); }

 private:
  WindowedStageStats stats_;
  const bool keep_steps_;
  const std::size_t max_steps_;
  std::vector<TimedSpan> batch_;  // the collecting thread's, reused

  // Below state is shared between the collecting thread and the training thread (open_window),
  // guarded by mutex_.
  mutable std::mutex mutex_;
  TraceBuffer trace_;
  std::vector<StepWindow> steps_;
  bool opened_ = false;
  std::int64_t window_begin_ns_ = 0;
  bool compacted_ = false;  // warm-up's steps dropped to make room
  std::int64_t steps_refused_from_ns_ = std::numeric_limits<std::int64_t>::max();
};

}  // namespace feedscope
