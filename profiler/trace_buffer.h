#pragma once
// The spans trace.json shows, at most a fixed number whatever the run's length. Half the budget
// keeps the first spans (start-up and warm-up: how the pipeline filled), the other half is a ring
// of the latest (the steady state, and how the run ended, which matters most when it was stopped
// or slowed down late). What falls between is counted, not kept. Because spans arrive in drain
// order rather than time order, the kept set is trimmed to a clean cut: every span that began
// before omitted_from_ns(), none that began between, and every span that began after
// omitted_to_ns(), so no track in the trace shows part of the gap.
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "loader/span_recorder.h"

namespace feedscope {

// Not thread-safe: one writer, or a lock around it.
class TraceBuffer {
 public:
  // Spans that end before `origin_ns` are not counted (trace.json starts at the run's start).
  // `max_spans` 0 keeps none.
  TraceBuffer(std::size_t max_spans, std::int64_t origin_ns);

  // Never allocates once max_spans spans are held.
  void add(const Span& span);

  // The kept spans, the first ones then the latest, each part in arrival order: put in order and
  // trimmed in place, no copy. Call after the last add(); later calls return the same.
  std::span<const Span> finish();

  std::size_t max_spans() const noexcept { return head_capacity_ + tail_capacity_; }
  std::uint64_t total() const noexcept { return total_; }  // every span offered from the origin on
  std::uint64_t kept() const;                              // finish().size()
  // Whether any span was left out; then the spans that began in [omitted_from_ns(),
  // omitted_to_ns()] are all left out, and no other.
  bool omitted() const noexcept { return evicted_; }
  std::int64_t omitted_from_ns() const noexcept { return first_not_in_head_; }
  std::int64_t omitted_to_ns() const noexcept { return last_evicted_; }

 private:
  bool keep(const Span& s, bool in_head) const;

  std::size_t head_capacity_;
  std::size_t tail_capacity_;
  std::int64_t origin_ns_;
  // The first head_capacity_ spans, then the tail: a ring once full, tail_next_ its oldest.
  std::vector<Span> spans_;
  std::size_t tail_next_ = 0;
  bool finished_ = false;
  std::uint64_t total_ = 0;
  bool evicted_ = false;
  std::int64_t first_not_in_head_ = std::numeric_limits<std::int64_t>::max();  // min begin
  std::int64_t last_evicted_ = std::numeric_limits<std::int64_t>::min();       // max begin
};

}  // namespace feedscope
