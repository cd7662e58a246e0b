#pragma once
// Stage spans recorded without a lock or an allocation per span: each recording thread owns a
// fixed-size ring (one writer), and one reader drains every ring.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loader/stage.h"

namespace feedscope {

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Span {
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t batch = -1;
  Stage stage = Stage::read;
  std::uint16_t lane = 0;  // index into SpanRegistry::lanes()
};

enum class LaneRole : std::uint8_t { worker, training, copy };

struct LaneInfo {
  std::uint16_t id = 0;
  LaneRole role = LaneRole::worker;
  std::string name;  // "worker 0", "training", "copy stream"
  int tid = 0;       // Linux thread id, for /proc/self/task/<tid>/stat
};

// Single producer (the owning thread), single consumer (the registry's reader).
class SpanRing {
 public:
  explicit SpanRing(std::size_t capacity_pow2);
  // Never blocks or allocates; counts the span as dropped when the ring is full.
  void push(const Span& span) noexcept;
  // Appends every span recorded so far to `out`. One reader at a time.
  std::size_t drain(std::vector<Span>& out);
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

 private:
  std::unique_ptr<Span[]> buffer_;
  std::uint64_t mask_;
  // Below state is shared between the writer and the reader, each index on its own cache line.
  alignas(128) std::atomic<std::uint64_t> head_{0};  // written by the writer
  alignas(128) std::atomic<std::uint64_t> tail_{0};  // written by the reader
  alignas(128) std::atomic<std::uint64_t> dropped_{0};
};

// Thread-safe. Hands each recording thread its own ring on first use (one lock per thread, not per
// span); drain() collects every ring. Lanes live as long as the registry.
class SpanRegistry {
 public:
  explicit SpanRegistry(std::size_t ring_capacity = 1 << 16);
  ~SpanRegistry();
  SpanRegistry(const SpanRegistry&) = delete;
  SpanRegistry& operator=(const SpanRegistry&) = delete;

  // The calling thread's ring, registering it under `role` the first time; lanes are named by
  // role and order ("worker 0", "worker 1", "training", "copy stream").
  SpanRing& ring(LaneRole role, std::uint16_t* lane);
  void record(LaneRole role, Stage stage, std::int64_t batch, std::int64_t begin_ns,
              std::int64_t end_ns) noexcept;
  // A lane that belongs to a stream rather than a thread (the copy stream, whose spans the
  // training thread records after the fact). One thread at a time pushes to the returned ring.
  SpanRing& add_lane(LaneRole role, std::uint16_t* lane);

  // Appends every span recorded since the last drain to `out` and keeps none: a run's collector
  // calls it periodically so rings never fill, and digests the spans in bounded memory.
  void drain(std::vector<Span>& out);
  // Moves every recorded span into the registry's store, which only grows: for tests and
  // benchmarks of a few seconds, never a run (38 MB a minute at 20,000 spans a second).
  void collect();
  // All spans collected so far (collect() first), in no particular order.
  std::vector<Span> spans();
  std::vector<LaneInfo> lanes() const;
  std::uint64_t dropped() const;

 private:
  struct Lane {
    LaneInfo info;
    std::unique_ptr<SpanRing> ring;
  };
  const std::uint64_t generation_;
  const std::size_t ring_capacity_;
  mutable std::mutex mutex_;  // guards lanes_ (registration) and store_ (draining)
  std::deque<Lane> lanes_;
  std::vector<Span> store_;
};

// Records one span on scope exit. A null registry makes it a no-op.
class ScopedSpan {
 public:
  ScopedSpan(SpanRegistry* registry, LaneRole role, Stage stage, std::int64_t batch) noexcept
      : registry_(registry), role_(role), stage_(stage), batch_(batch),
        begin_(registry ? now_ns() : 0) {}
  ~ScopedSpan() {
    if (registry_) registry_->record(role_, stage_, batch_, begin_, now_ns());
  }
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  SpanRegistry* registry_;
  LaneRole role_;
  Stage stage_;
  std::int64_t batch_;
  std::int64_t begin_;
};

}  // namespace feedscope
