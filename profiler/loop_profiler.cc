#include "profiler/loop_profiler.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace feedscope {

LoopProfiler::LoopProfiler(SpanRegistry& spans, Options options, LoopListener* listener)
    : spans_(spans), options_(std::move(options)), listener_(listener) {
  if (options_.warmup < 0) throw std::invalid_argument("warmup must be >= 0");
  if (!options_.clock) options_.clock = &now_ns;
}

void LoopProfiler::finish_batch() noexcept {
  if (!batch_open_) return;
  batch_open_ = false;
  // A batch the loop consumed without a step scope still counts as a batch, with no samples.
  if (!batch_stepped_ && listener_) listener_->batch_done(0);
}

void LoopProfiler::note_event(std::int64_t ns) noexcept {
  if (first_event_ns_ == 0) {
    first_event_ns_ = ns;
    try {
      custom_stats_.set_origin(ns);
    } catch (...) {  // a lock that fails: the custom stages then count from the first span
    }
    if (listener_) listener_->loop_started(ns);
  }
  custom_stats_.advance(ns);
  if (listener_) listener_->advanced(ns);
}

void LoopProfiler::open_window(std::int64_t begin_ns) noexcept {
  warmup_done_ = true;
  measure_begin_ns_ = begin_ns;
  try {
    custom_stats_.open_window(begin_ns);
  } catch (...) {  // as above: statistics, never the user's loop
  }
  if (listener_) listener_->window_opened(begin_ns);
}

void LoopProfiler::fetched(std::int64_t begin_ns, std::int64_t end_ns, bool got_batch) noexcept {
  note_event(begin_ns);
  finish_batch();
  if (!got_batch) {
    // The fetch that finds the end delivers nothing to wait for: the window ends as it begins.
    last_event_ns_ = std::max(last_event_ns_, begin_ns);
    return;
  }
  // The window opens when the loop asks for its first measured batch, so that batch's wait counts
  // and the last warm-up step, which ended before, does not.
  if (!warmup_done_ && batches_ == options_.warmup) {
    batches_at_begin_ = batches_;
    steps_at_begin_ = steps_;
    samples_at_begin_ = samples_;
    open_window(begin_ns);
  }
  spans_.record(LaneRole::training, Stage::wait, batches_, begin_ns, end_ns);
  ++batches_;
  batch_open_ = true;
  batch_stepped_ = false;
  last_event_ns_ = std::max(last_event_ns_, end_ns);
}

void LoopProfiler::step_done(std::int64_t begin_ns, std::int64_t end_ns,
                             std::int64_t samples) noexcept {
  note_event(begin_ns);
  // A loop that uses step scopes without wrap(): warm-up counts in steps instead.
  if (!warmup_done_ && batches_ == 0 && steps_ == options_.warmup) {
    steps_at_begin_ = steps_;
    samples_at_begin_ = samples_;
    open_window(begin_ns);
  }
  const std::int64_t batch = batches_ > 0 ? batches_ - 1 : steps_;
  spans_.record(LaneRole::training, Stage::step, batch, begin_ns, end_ns);
  ++steps_;
  samples_ += samples;
  last_event_ns_ = std::max(last_event_ns_, end_ns);
  if (!listener_) return;
  // One batch_done per batch: further step scopes on the same batch (gradient accumulation)
  // add their samples to nothing the endpoint counts as a new batch.
  if (batches_ == 0 || (batch_open_ && !batch_stepped_)) listener_->batch_done(samples);
  batch_stepped_ = true;
}

LoopProfiler::StageId LoopProfiler::custom_stage(std::string_view name) {
  for (std::size_t i = 0; i < custom_by_id_.size(); ++i)
    if (custom_by_id_[i]->name == name) return static_cast<StageId>(i);
  if (name.empty()) throw std::invalid_argument("a custom stage needs a name");
  if (stage_from_name(name))
    throw std::invalid_argument("'" + std::string(name) +
                                "' is one of feedscope's fixed stages; name a custom stage "
                                "something else (e.g. 'my_" + std::string(name) + "')");
  if (custom_by_id_.size() >= std::numeric_limits<StageId>::max())
    throw std::invalid_argument("too many custom stages");
  auto ring = std::make_unique<SpanRing>(options_.custom_ring_capacity);
  std::lock_guard lock(mutex_);
  custom_.push_back(CustomStage{std::string(name), std::move(ring)});
  custom_by_id_.push_back(&custom_.back());
  return static_cast<StageId>(custom_by_id_.size() - 1);
}

void LoopProfiler::custom_done(StageId id, std::int64_t begin_ns, std::int64_t end_ns) noexcept {
  if (id >= custom_by_id_.size()) return;
  last_event_ns_ = std::max(last_event_ns_, end_ns);
  custom_by_id_[id]->ring->push(Span{begin_ns, end_ns, batches_ - 1, Stage::step, id});
}

void LoopProfiler::collect() {
  std::lock_guard lock(mutex_);
  drained_.clear();
  for (CustomStage& stage : custom_) stage.ring->drain(drained_);
  if (drained_.empty()) return;
  timed_.clear();
  // A custom span carries its stage's id in `lane`; all run on the one training lane.
  for (const Span& s : drained_) timed_.push_back({s.begin_ns, s.end_ns, s.lane, 0});
  custom_stats_.add(timed_);
}

LoopWindow LoopProfiler::window() const noexcept {
  LoopWindow w;
  w.warmup_done = warmup_done_;
  if (warmup_done_) {
    w.begin_ns = measure_begin_ns_;
    w.batches = batches_ - batches_at_begin_;
    w.steps = steps_ - steps_at_begin_;
    w.samples = samples_ - samples_at_begin_;
  } else {
    // Stopped inside warm-up: report what ran rather than an empty window.
    w.begin_ns = first_event_ns_;
    w.batches = batches_;
    w.steps = steps_;
    w.samples = samples_;
  }
  w.end_ns = std::max(last_event_ns_, w.begin_ns);
  return w;
}

std::vector<StageStats> LoopProfiler::custom_stage_stats(std::int64_t begin_ns,
                                                         std::int64_t end_ns) {
  std::vector<std::string> names;
  {
    std::lock_guard lock(mutex_);
    for (const CustomStage& stage : custom_) names.push_back(stage.name);
  }
  return custom_stats_.finish(begin_ns, end_ns, names);
}

}  // namespace feedscope
