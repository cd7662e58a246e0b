#pragma once
// Whether feedscope's CUPTI buffer callbacks are still its own: another client (torch.profiler's
// kineto) that registers its own callbacks gets every buffer from then on, ours included, and
// nothing tells the client it replaced. So the injection library asks CUPTI for a record now and
// then (a probe: the buffer it lands in must come back) and watches the buffers that reach its
// callbacks. It never forces a flush for an answer: a forced flush hands over a buffer with an
// activity still running, CUPTI's walk of a buffer stops at that incomplete record, and the
// records behind it would be lost. Pure: the count and the time are passed in.
#include <cstdint>

namespace feedscope::detail {

// Not thread-safe: the injection's flush thread, then its exit handler after the join.
class TakeoverProbe {
 public:
  enum class Change {
    none,
    // No buffer reached the callbacks for a whole timeout after a probe (or by the forced flush
    // at exit): another client took them, or CUPTI holds back the buffer in use while an activity
    // in it runs all that time (a default flush hands over only buffers whose records are whole).
    went_silent,
    // A buffer reached them after that: it was CUPTI holding one back, since a client that takes
    // the callbacks keeps them.
    came_back,
  };

  explicit TakeoverProbe(std::int64_t timeout_ns) : timeout_ns_(timeout_ns) {}

  // A probe record was asked for at `now`, `buffers` having reached the callbacks so far.
  void probed(std::int64_t now, std::uint64_t buffers);
  bool pending() const noexcept { return pending_; }
  bool silent() const noexcept { return silent_; }
  // The probe that went unanswered, once silent.
  std::int64_t silent_since() const noexcept { return silent_since_ns_; }

  // What `buffers` (reached the callbacks so far) says at `now`. `at_exit`: after the last,
  // forced, flush: nothing more will come, so a probe out ends here.
  Change check(std::int64_t now, std::uint64_t buffers, bool at_exit);

 private:
  std::int64_t timeout_ns_;
  bool pending_ = false;
  std::int64_t probed_ns_ = 0;
  std::uint64_t buffers_at_probe_ = 0;
  bool silent_ = false;
  std::int64_t silent_since_ns_ = 0;
  std::uint64_t buffers_when_silent_ = 0;
};

}  // namespace feedscope::detail
