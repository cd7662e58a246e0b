#pragma once
// The timing of a training loop you already have: the scopes and the wrapped range that
// feedscope::Session (feedscope/session.h) hands out. Header-only and dependency-free; the events
// go through LoopEvents, which the session implements.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <utility>

namespace feedscope {

// Where a loop's events go: the session's profiler. Every call is made by the training thread,
// must not block or throw, and allocates nothing.
class LoopEvents {
 public:
  // The id of a user-named stage, from LoopEvents' owner (Session::scope).
  using StageId = std::uint16_t;

  // The clock every event is read on (CLOCK_MONOTONIC ns unless a test set another).
  virtual std::int64_t now() const noexcept = 0;
  // The loop asked for its next batch at begin_ns and got one (or learned there is none) at end_ns.
  virtual void fetched(std::int64_t begin_ns, std::int64_t end_ns, bool got_batch) noexcept = 0;
  // One step of `samples` samples ran from begin_ns to end_ns.
  virtual void step_done(std::int64_t begin_ns, std::int64_t end_ns, std::int64_t samples) noexcept = 0;
  // The user-named stage `id` ran from begin_ns to end_ns.
  virtual void custom_done(StageId id, std::int64_t begin_ns, std::int64_t end_ns) noexcept = 0;

 protected:
  ~LoopEvents() = default;  // not owned through this interface
};

// Times its scope as the loop's step: move-only, records on destruction (or end()).
class StepScope {
 public:
  StepScope(LoopEvents* events, std::int64_t samples) noexcept
      : events_(events), samples_(samples), begin_(events ? events->now() : 0) {}
  StepScope(StepScope&& other) noexcept
      : events_(std::exchange(other.events_, nullptr)), samples_(other.samples_),
        begin_(other.begin_) {}
  StepScope& operator=(StepScope&& other) noexcept {
    if (this != &other) {
      end();
      events_ = std::exchange(other.events_, nullptr);
      samples_ = other.samples_;
      begin_ = other.begin_;
    }
    return *this;
  }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;
  ~StepScope() { end(); }

  // For loops that learn the batch's size inside the step.
  void set_samples(std::int64_t samples) noexcept { samples_ = samples; }
  // Ends the step now; later calls and the destructor do nothing.
  void end() noexcept {
    if (events_) {
      LoopEvents* e = std::exchange(events_, nullptr);
      e->step_done(begin_, e->now(), samples_);
    }
  }

 private:
  LoopEvents* events_;
  std::int64_t samples_;
  std::int64_t begin_;
};

// Times its scope as a user-named stage ("augment", "loss"): move-only, records on destruction.
class StageScope {
 public:
  StageScope(LoopEvents* events, LoopEvents::StageId id) noexcept
      : events_(events), id_(id), begin_(events ? events->now() : 0) {}
  StageScope(StageScope&& other) noexcept
      : events_(std::exchange(other.events_, nullptr)), id_(other.id_), begin_(other.begin_) {}
  StageScope& operator=(StageScope&& other) noexcept {
    if (this != &other) {
      end();
      events_ = std::exchange(other.events_, nullptr);
      id_ = other.id_;
      begin_ = other.begin_;
    }
    return *this;
  }
  StageScope(const StageScope&) = delete;
  StageScope& operator=(const StageScope&) = delete;
  ~StageScope() { end(); }
  void end() noexcept {
    if (events_) {
      LoopEvents* e = std::exchange(events_, nullptr);
      e->custom_done(id_, begin_, e->now());
    }
  }

 private:
  LoopEvents* events_;
  LoopEvents::StageId id_;
  std::int64_t begin_;
};

// A range whose iterator times how long the loop is blocked getting each batch (`wait`).
//
// The inner iterator is only required to be an input iterator compared against its range's
// end: torch::data::DataLoader's begin() fetches nothing (its first batch comes lazily, on the
// first comparison or dereference) and its end() is a sentinel, so the adapter compares
// against end inside the timed region of begin() and of every ++. That makes the first
// batch's wait count no matter whether an iterator is lazy or eager.
template <typename Range>
class WrappedRange {
  using InnerIterator = decltype(std::begin(std::declval<Range&>()));
  using InnerSentinel = decltype(std::end(std::declval<Range&>()));

 public:
  struct Sentinel {};

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using difference_type = std::ptrdiff_t;
    using reference = decltype(*std::declval<InnerIterator&>());
    using value_type = std::remove_cvref_t<reference>;

    Iterator(LoopEvents* events, InnerIterator it, InnerSentinel end)
        : events_(events), it_(std::move(it)), end_(std::move(end)) {}

    // Not timed: the batch was fetched by the comparison in begin() or ++. Non-const, as
    // torch's iterator's operator* is.
    reference operator*() { return *it_; }
    Iterator& operator++() {
      const std::int64_t begin = events_->now();
      ++it_;
      done_ = !(it_ != end_);
      events_->fetched(begin, events_->now(), !done_);
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& it, Sentinel) { return it.done_; }
    friend bool operator!=(const Iterator& it, Sentinel) { return !it.done_; }

   private:
    friend class WrappedRange;
    LoopEvents* events_;
    InnerIterator it_;
    InnerSentinel end_;
    bool done_ = false;
  };

  // An lvalue range is held by reference, a temporary one by value.
  WrappedRange(LoopEvents* events, Range&& range)
      : events_(events), range_(std::forward<Range>(range)) {}

  Iterator begin() {
    const std::int64_t t0 = events_->now();
    Iterator it(events_, std::begin(range_), std::end(range_));
    it.done_ = !(it.it_ != it.end_);
    events_->fetched(t0, events_->now(), !it.done_);
    return it;
  }
  Sentinel end() const noexcept { return {}; }

 private:
  LoopEvents* events_;
  Range range_;  // a reference for an lvalue range, the range itself for a temporary
};

}  // namespace feedscope
