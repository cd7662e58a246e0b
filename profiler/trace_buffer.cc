#include "profiler/trace_buffer.h"

#include <algorithm>

namespace feedscope {

namespace {
// Reserved up front: address space, not memory, until the spans arrive, and no copy of 30 MB
// when the vector would otherwise double. Beyond it the vector grows as usual.
constexpr std::size_t kReserveAtMost = std::size_t{1} << 22;
}  // namespace

TraceBuffer::TraceBuffer(std::size_t max_spans, std::int64_t origin_ns)
    : head_capacity_(max_spans - max_spans / 2), tail_capacity_(max_spans / 2),
      origin_ns_(origin_ns) {
  spans_.reserve(std::min(max_spans, kReserveAtMost));
}

void TraceBuffer::add(const Span& span) {
  if (span.end_ns < origin_ns_) return;  // trace.json leaves these out too
  ++total_;
  if (spans_.size() < head_capacity_) {
    spans_.push_back(span);
    return;
  }
  first_not_in_head_ = std::min(first_not_in_head_, span.begin_ns);
  if (spans_.size() < head_capacity_ + tail_capacity_) {
    spans_.push_back(span);
    return;
  }
  evicted_ = true;
  if (tail_capacity_ == 0) {
    last_evicted_ = std::max(last_evicted_, span.begin_ns);
    return;
  }
  Span& oldest = spans_[head_capacity_ + tail_next_];
  last_evicted_ = std::max(last_evicted_, oldest.begin_ns);
  oldest = span;
  tail_next_ = (tail_next_ + 1) % tail_capacity_;
}

bool TraceBuffer::keep(const Span& s, bool in_head) const {
  if (!evicted_) return true;
  if (in_head) return s.begin_ns < first_not_in_head_ || s.begin_ns > last_evicted_;
  return s.begin_ns > last_evicted_;
}

std::span<const Span> TraceBuffer::finish() {
  if (finished_) return spans_;
  finished_ = true;
  const auto tail = spans_.begin() + static_cast<std::ptrdiff_t>(std::min(head_capacity_, spans_.size()));
  std::rotate(tail, tail + static_cast<std::ptrdiff_t>(tail_next_), spans_.end());
  tail_next_ = 0;
  std::size_t out = 0;
  for (std::size_t i = 0; i < spans_.size(); ++i)
    if (keep(spans_[i], i < head_capacity_)) spans_[out++] = spans_[i];
  spans_.resize(out);
  return spans_;
}

std::uint64_t TraceBuffer::kept() const {
  if (finished_) return spans_.size();
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < spans_.size(); ++i) n += keep(spans_[i], i < head_capacity_) ? 1 : 0;
  return n;
}

}  // namespace feedscope
