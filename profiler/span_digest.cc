#include "profiler/span_digest.h"

#include <algorithm>

namespace feedscope {

SpanDigest::SpanDigest(std::int64_t origin_ns, Options options)
    : stats_(origin_ns), keep_steps_(options.keep_steps), max_steps_(options.max_steps),
      trace_(options.trace_max_spans, origin_ns) {}

void SpanDigest::add(const std::vector<Span>& spans) {
  batch_.clear();
  for (const Span& s : spans) batch_.push_back(by_stage(s));
  stats_.add(batch_);
  std::lock_guard lock(mutex_);
  for (const Span& s : spans) {
    trace_.add(s);
    if (!keep_steps_ || s.stage != Stage::step) continue;
    if (steps_.size() >= max_steps_ && opened_ && !compacted_) {
      // Warm-up's steps are kept until room runs out (a run that stops in warm-up reports them),
      // then dropped once: every later step begins in the window.
      std::erase_if(steps_, [this](const StepWindow& w) { return w.begin_ns < window_begin_ns_; });
      compacted_ = true;
    }
    if (steps_.size() < max_steps_)
      steps_.push_back({s.begin_ns, s.end_ns});
    else
      steps_refused_from_ns_ = std::min(steps_refused_from_ns_, s.begin_ns);
  }
}

void SpanDigest::open_window(std::int64_t begin_ns) {
  stats_.open_window(begin_ns);
  std::lock_guard lock(mutex_);
  opened_ = true;
  window_begin_ns_ = begin_ns;
}

std::vector<StageStats> SpanDigest::stage_stats(std::int64_t begin_ns, std::int64_t end_ns) {
  return stats_.finish(begin_ns, end_ns, fixed_stage_names());
}

SpanDigest::Steps SpanDigest::steps(std::int64_t begin_ns, std::int64_t end_ns) const {
  std::lock_guard lock(mutex_);
  Steps out;
  out.complete_until_ns = steps_refused_from_ns_;
  for (const StepWindow& w : steps_)
    if (w.begin_ns >= begin_ns && w.begin_ns < end_ns) out.windows.push_back(w);
  return out;
}

std::span<const Span> SpanDigest::trace_spans() {
  std::lock_guard lock(mutex_);
  return trace_.finish();
}

TraceSummary SpanDigest::trace_summary(std::int64_t origin_ns) {
  std::lock_guard lock(mutex_);
  TraceSummary t;
  t.max_spans = trace_.max_spans();
  t.spans_total = trace_.total();
  t.spans_kept = trace_.finish().size();
  if (trace_.omitted()) {
    // Clamped like trace.json's timestamps: a span that began before the origin shows at 0.
    const auto seconds = [origin_ns](std::int64_t ns) {
      return static_cast<double>(std::max<std::int64_t>(ns - origin_ns, 0)) / 1e9;
    };
    t.omitted_from_s = seconds(trace_.omitted_from_ns());
    t.omitted_to_s = seconds(trace_.omitted_to_ns());
  }
  return t;
}

}  // namespace feedscope
