#include "profiler/stage_accumulator.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>

namespace feedscope {

const std::vector<std::string>& fixed_stage_names() {
  static const std::vector<std::string> names(kStageNames.begin(), kStageNames.end());
  return names;
}

void StageAccumulator::add(const TimedSpan& span) {
  if (span.slot >= slots_.size()) slots_.resize(span.slot + 1u);
  Slot& s = slots_[span.slot];
  const std::int64_t ns = std::max<std::int64_t>(span.end_ns - span.begin_ns, 0);
  ++s.count;
  s.busy_ns += ns;
  const std::size_t word = span.lane / 64u;
  if (word >= s.lanes.size()) s.lanes.resize(word + 1, 0);
  s.lanes[word] |= std::uint64_t{1} << (span.lane % 64u);
  s.durations_ns.add(static_cast<double>(ns));
}

void StageAccumulator::merge(const StageAccumulator& other) {
  if (other.slots_.size() > slots_.size()) slots_.resize(other.slots_.size());
  for (std::size_t i = 0; i < other.slots_.size(); ++i) {
    const Slot& from = other.slots_[i];
    Slot& to = slots_[i];
    to.count += from.count;
    to.busy_ns += from.busy_ns;
    if (from.lanes.size() > to.lanes.size()) to.lanes.resize(from.lanes.size(), 0);
    for (std::size_t w = 0; w < from.lanes.size(); ++w) to.lanes[w] |= from.lanes[w];
    to.durations_ns.merge(from.durations_ns);
  }
}

std::vector<StageStats> StageAccumulator::stats(const std::vector<std::string>& names,
                                                double wall_s) const {
  std::vector<StageStats> out;
  out.reserve(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    StageStats st;
    st.name = names[i];
    if (i < slots_.size() && slots_[i].count > 0) {
      const Slot& s = slots_[i];
      st.count = s.count;
      for (std::uint64_t w : s.lanes) st.lanes += std::popcount(w);
      st.busy_s = static_cast<double>(s.busy_ns) / 1e9;
      st.mean_ms = static_cast<double>(s.busy_ns) / 1e6 / static_cast<double>(s.count);
      st.p50_ms = s.durations_ns.quantile(0.50) / 1e6;
      st.p95_ms = s.durations_ns.quantile(0.95) / 1e6;
      st.share = st.busy_s / (wall_s * std::max(1, st.lanes));
    }
    out.push_back(std::move(st));
  }
  return out;
}

WindowedStageStats::WindowedStageStats(std::int64_t origin_ns)
    : floor_(origin_ns), floor_written_(origin_ns), origin_(origin_ns), held_floor_(origin_ns) {}

void WindowedStageStats::set_origin(std::int64_t origin_ns) {
  std::lock_guard lock(mutex_);
  origin_ = origin_ns;
  floor_written_ = origin_ns;
  floor_.store(origin_ns, std::memory_order_relaxed);
  held_floor_ = origin_ns;
  std::erase_if(held_, [origin_ns](const TimedSpan& s) { return s.begin_ns < origin_ns; });
}

void WindowedStageStats::advance(std::int64_t floor_ns) noexcept {
  // A floor may only rise: a lower one would let spans already placed belong elsewhere.
  if (floor_ns <= floor_written_) return;
  floor_written_ = floor_ns;
  // Relaxed is enough: the reader takes it under mutex_, which open_window() takes as well, so a
  // floor newer than an unseen open_window() cannot be read.
  floor_.store(floor_ns, std::memory_order_relaxed);
}

void WindowedStageStats::open_window(std::int64_t begin_ns) {
  std::lock_guard lock(mutex_);
  opened_ = true;
  begin_ = begin_ns;
}

void WindowedStageStats::place(const TimedSpan& span) {
  if (span.begin_ns < origin_) return;
  if (opened_ && span.begin_ns >= begin_)
    inside_.add(span);
  else
    before_.add(span);
}

void WindowedStageStats::place_held(std::int64_t floor) {
  if (floor <= held_floor_) return;
  held_floor_ = floor;
  std::erase_if(held_, [&](const TimedSpan& s) {
    if (s.begin_ns >= floor) return false;
    place(s);
    return true;
  });
}

void WindowedStageStats::add(std::span<const TimedSpan> spans) {
  std::lock_guard lock(mutex_);
  const std::int64_t floor = floor_.load(std::memory_order_relaxed);
  place_held(floor);
  for (const TimedSpan& s : spans) {
    if (s.begin_ns < floor)
      place(s);
    else if (s.begin_ns >= origin_)
      held_.push_back(s);
  }
}

std::vector<StageStats> WindowedStageStats::finish(std::int64_t begin_ns, std::int64_t end_ns,
                                                   const std::vector<std::string>& names) {
  std::lock_guard lock(mutex_);
  const bool measured = opened_ && begin_ns == begin_;
  if (!measured && begin_ns > origin_)
    throw std::invalid_argument("stage statistics: the window must begin where warm-up ended (" +
                                std::to_string(begin_) + ") or at the origin (" +
                                std::to_string(origin_) + "), not at " + std::to_string(begin_ns));
  // The end is known now: what still waits is placed by it.
  for (const TimedSpan& s : held_)
    if (s.begin_ns < end_ns) place(s);
  held_.clear();
  held_floor_ = std::numeric_limits<std::int64_t>::max();
  const double wall_s = static_cast<double>(std::max<std::int64_t>(end_ns - begin_ns, 1)) / 1e9;
  if (measured) return inside_.stats(names, wall_s);
  StageAccumulator whole = before_;
  whole.merge(inside_);
  return whole.stats(names, wall_s);
}

std::size_t WindowedStageStats::held() const {
  std::lock_guard lock(mutex_);
  return held_.size();
}

}  // namespace feedscope
