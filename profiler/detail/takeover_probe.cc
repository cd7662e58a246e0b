#include "profiler/detail/takeover_probe.h"

namespace feedscope::detail {

void TakeoverProbe::probed(std::int64_t now, std::uint64_t buffers) {
  pending_ = true;
  probed_ns_ = now;
  buffers_at_probe_ = buffers;
}

TakeoverProbe::Change TakeoverProbe::check(std::int64_t now, std::uint64_t buffers,
                                           bool at_exit) {
  const bool timed_out = at_exit || now - probed_ns_ >= timeout_ns_;
  if (silent_) {
    if (buffers > buffers_when_silent_) {
      silent_ = false;
      pending_ = false;
      return Change::came_back;
    }
    if (pending_ && timed_out) pending_ = false;  // still silent: said once
    return Change::none;
  }
  if (!pending_) return Change::none;
  if (buffers > buffers_at_probe_) {  // the callbacks are ours: the answer or any other buffer
    pending_ = false;
    return Change::none;
  }
  if (!timed_out) return Change::none;
  pending_ = false;
  silent_ = true;
  silent_since_ns_ = probed_ns_;
  buffers_when_silent_ = buffers;
  return Change::went_silent;
}

}  // namespace feedscope::detail
