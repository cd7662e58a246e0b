#pragma once
// The timing core of the wrap API (DESIGN.md user story 3): times a user's own training loop,
// `wait` for every batch the loop fetches and `step` for every step scope, on the training lane of
// a SpanRegistry, plus user-named extra stages, and turns the measured window (warm-up excluded)
// into stage statistics. No torch, no exporters: feedscope::Session (include/feedscope/session.h)
// puts reports and metrics on top of it; the scopes and the wrapped range are the public
// feedscope/loop.h's.
#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <feedscope/loop.h>

#include "loader/span_recorder.h"
#include "profiler/report.h"
#include "profiler/stage_accumulator.h"

namespace feedscope {

// Told when a batch is done (its step ended, or the loop moved on without a step scope), on the
// training thread. Implementations must not block or throw: they run inside the user's loop.
class LoopListener {
 public:
  virtual ~LoopListener() = default;
  virtual void batch_done(std::int64_t samples) noexcept = 0;
  // The loop's first event, at `begin_ns`: where the window begins if warm-up never ends.
  virtual void loop_started(std::int64_t /*begin_ns*/) noexcept {}
  // Every event of the loop: whatever bound of the measured window is still to come (its begin,
  // its end) is at or after `now_ns` (WindowedStageStats::advance()).
  virtual void advanced(std::int64_t /*now_ns*/) noexcept {}
  // Warm-up is over: the measured window opens at `begin_ns`. Once per run.
  virtual void window_opened(std::int64_t /*begin_ns*/) noexcept {}
};

// The measured window: from the end of the last warm-up batch to the loop's last event.
struct LoopWindow {
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t batches = 0;  // measured batches (waits that delivered one)
  std::int64_t steps = 0;    // measured step scopes
  std::int64_t samples = 0;  // samples the measured step scopes counted
  bool warmup_done = false;  // false: the loop ended inside warm-up (the window is the whole run)
};

// Threading contract: one training thread calls the recording API (LoopEvents, the scopes, the
// iterator of wrap()); a collector thread may call collect() meanwhile; window(), spans() and
// custom_stage_stats() are for after the loop, or any thread once collect() ran. Spans go to
// per-thread rings: no lock, allocation or std::function per span. A custom stage allocates its
// ring once, when its name is first used.
class LoopProfiler final : public LoopEvents {
 public:
  using Clock = std::int64_t (*)() noexcept;  // now_ns() or a test's clock

  struct Options {
    std::int64_t warmup = 0;  // loop iterations (batches) left out of the measured window
    Clock clock = &now_ns;
    std::size_t custom_ring_capacity = 1 << 14;  // per custom stage; power of two
  };

  // `spans` gets the wait/step spans on the calling thread's training lane; it must outlive
  // the profiler. `listener` may be null.
  LoopProfiler(SpanRegistry& spans, Options options, LoopListener* listener = nullptr);
  LoopProfiler(const LoopProfiler&) = delete;
  LoopProfiler& operator=(const LoopProfiler&) = delete;

  std::int64_t now() const noexcept override { return options_.clock(); }

  // The loop asked for its next batch at `begin_ns` and got one (or learned there is none) at
  // `end_ns`. Called by the wrapped iterator; public for loops that fetch by hand.
  void fetched(std::int64_t begin_ns, std::int64_t end_ns, bool got_batch) noexcept override;

  // Records one `step` of `samples` samples; a StepScope calls it.
  void step_done(std::int64_t begin_ns, std::int64_t end_ns, std::int64_t samples) noexcept override;

  using StepScope = feedscope::StepScope;
  using StageScope = feedscope::StageScope;

  StepScope step(std::int64_t samples = 0) noexcept { return StepScope(this, samples); }

  // The range with every fetch timed as `wait`; see WrappedRange. An lvalue range is held by
  // reference, a temporary one by value.
  template <typename Range>
  auto wrap(Range&& range);

  // A user-named stage ("augment", "loss"). Names are case-sensitive; the 7 fixed stage names
  // are refused (they mean what DESIGN.md says). Looking a name up costs a short linear scan,
  // no allocation after its first use; hold the id for the tightest loops.
  // Throws std::invalid_argument for an empty or fixed stage name (setup, not the hot path).
  StageId custom_stage(std::string_view name);

  StageScope scope(StageId id) noexcept { return StageScope(this, id); }
  StageScope scope(std::string_view name) { return StageScope(this, custom_stage(name)); }
  void custom_done(StageId id, std::int64_t begin_ns, std::int64_t end_ns) noexcept override;

  // Drains the custom stages' rings into their statistics (the wait/step spans stay in the
  // SpanRegistry, whose own drain() takes them). Any one thread at a time.
  void collect();

  // The measured window as of now: the loop's last event ends it.
  LoopWindow window() const noexcept;
  // The training-thread batches fetched so far, warm-up included.
  std::int64_t batches() const noexcept { return batches_; }

  // Statistics of each custom stage over the measured window [window().begin_ns, end_ns), in
  // order of first use; `share` is busy / window (one training lane). Kept as the spans are
  // collected, in memory that does not grow with their number (p50/p95 within 0.79 %, see
  // WindowedStageStats); `begin_ns` must be window().begin_ns. collect() first.
  std::vector<StageStats> custom_stage_stats(std::int64_t begin_ns, std::int64_t end_ns);

 private:
  struct CustomStage {
    std::string name;
    std::unique_ptr<SpanRing> ring;
  };

  void finish_batch() noexcept;
  // Tells the custom statistics and the listener how far the loop has got.
  void note_event(std::int64_t ns) noexcept;
  void open_window(std::int64_t begin_ns) noexcept;

  SpanRegistry& spans_;
  Options options_;
  LoopListener* listener_;

  // Training thread only.
  std::int64_t batches_ = 0;
  std::int64_t steps_ = 0;
  std::int64_t samples_ = 0;
  std::int64_t pending_samples_ = 0;
  bool batch_open_ = false;      // a batch was delivered and not yet reported done
  bool batch_stepped_ = false;   // a step scope ended since that batch was delivered
  std::int64_t measure_begin_ns_ = 0;
  bool warmup_done_ = false;
  std::int64_t first_event_ns_ = 0;
  std::int64_t last_event_ns_ = 0;
  std::int64_t batches_at_begin_ = 0, steps_at_begin_ = 0, samples_at_begin_ = 0;
  std::vector<CustomStage*> custom_by_id_;  // lookups without the lock

  // Below state is shared with the collecting thread, guarded by mutex_.
  mutable std::mutex mutex_;
  std::deque<CustomStage> custom_;
  std::vector<Span> drained_;     // collect()'s, reused
  std::vector<TimedSpan> timed_;  // collect()'s, reused

  // Thread-safe on its own: fed by collect(), its bounds set by the training thread. Origin 0
  // until the first event, as window() has it; custom spans wait for that event to be placed.
  WindowedStageStats custom_stats_{0};
};

template <typename Range>
auto LoopProfiler::wrap(Range&& range) {
  return WrappedRange<Range>(this, std::forward<Range>(range));
}

}  // namespace feedscope
