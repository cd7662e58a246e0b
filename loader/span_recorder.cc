#include "loader/span_recorder.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <stdexcept>

namespace feedscope {

namespace {
std::atomic<std::uint64_t> g_next_generation{1};

// A thread may record into a few registries over its life (TBB workers outlive loaders); the
// generation number tells a live registry from a dead one that happened to reuse an address.
struct CachedRing {
  std::uint64_t generation = 0;
  SpanRing* ring = nullptr;
  std::uint16_t lane = 0;
};
constexpr int kCacheSlots = 4;
thread_local CachedRing t_cache[kCacheSlots];
thread_local int t_cache_next = 0;
}  // namespace

SpanRing::SpanRing(std::size_t capacity_pow2) {
  if (capacity_pow2 == 0 || (capacity_pow2 & (capacity_pow2 - 1)) != 0)
    throw std::invalid_argument("span ring capacity must be a power of two");
  buffer_ = std::make_unique<Span[]>(capacity_pow2);
  mask_ = capacity_pow2 - 1;
}

void SpanRing::push(const Span& span) noexcept {
  const std::uint64_t head = head_.load(std::memory_order_relaxed);
  if (head - tail_.load(std::memory_order_acquire) > mask_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  buffer_[head & mask_] = span;
  head_.store(head + 1, std::memory_order_release);
}

std::size_t SpanRing::drain(std::vector<Span>& out) {
  const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
  const std::uint64_t head = head_.load(std::memory_order_acquire);
  for (std::uint64_t i = tail; i != head; ++i) out.push_back(buffer_[i & mask_]);
  tail_.store(head, std::memory_order_release);
  return static_cast<std::size_t>(head - tail);
}

SpanRegistry::SpanRegistry(std::size_t ring_capacity)
    : generation_(g_next_generation.fetch_add(1)), ring_capacity_(ring_capacity) {}

SpanRegistry::~SpanRegistry() = default;

SpanRing& SpanRegistry::ring(LaneRole role, std::uint16_t* lane) {
  for (const CachedRing& cached : t_cache) {
    if (cached.generation == generation_) {
      *lane = cached.lane;
      return *cached.ring;
    }
  }
  SpanRing& ring = add_lane(role, lane);
  t_cache[t_cache_next] = CachedRing{generation_, &ring, *lane};
  t_cache_next = (t_cache_next + 1) % kCacheSlots;
  return ring;
}

SpanRing& SpanRegistry::add_lane(LaneRole role, std::uint16_t* lane) {
  std::lock_guard lock(mutex_);
  Lane& entry = lanes_.emplace_back();
  entry.info.id = static_cast<std::uint16_t>(lanes_.size() - 1);
  entry.info.role = role;
  switch (role) {
    case LaneRole::worker: {
      int workers = 0;
      for (const Lane& other : lanes_) workers += other.info.role == LaneRole::worker ? 1 : 0;
      entry.info.name = "worker " + std::to_string(workers - 1);
      break;
    }
    case LaneRole::training: entry.info.name = "training"; break;
    case LaneRole::copy: entry.info.name = "copy stream"; break;
  }
  // A stream lane has no thread of its own to watch in /proc.
  entry.info.tid = role == LaneRole::copy ? 0 : static_cast<int>(::syscall(SYS_gettid));
  entry.ring = std::make_unique<SpanRing>(ring_capacity_);
  *lane = entry.info.id;
  return *entry.ring;
}

void SpanRegistry::record(LaneRole role, Stage stage, std::int64_t batch, std::int64_t begin_ns,
                          std::int64_t end_ns) noexcept {
  try {
    std::uint16_t lane = 0;
    SpanRing& r = ring(role, &lane);
    r.push(Span{begin_ns, end_ns, batch, stage, lane});
  } catch (...) {
    // Registration allocates once per thread; if that fails, losing the span beats crashing.
  }
}

void SpanRegistry::drain(std::vector<Span>& out) {
  std::lock_guard lock(mutex_);
  for (Lane& lane : lanes_) lane.ring->drain(out);
}

void SpanRegistry::collect() {
  std::lock_guard lock(mutex_);
  for (Lane& lane : lanes_) lane.ring->drain(store_);
}

std::vector<Span> SpanRegistry::spans() {
  std::lock_guard lock(mutex_);
  return store_;
}

std::vector<LaneInfo> SpanRegistry::lanes() const {
  std::lock_guard lock(mutex_);
  std::vector<LaneInfo> out;
  out.reserve(lanes_.size());
  for (const Lane& lane : lanes_) out.push_back(lane.info);
  return out;
}

std::uint64_t SpanRegistry::dropped() const {
  std::lock_guard lock(mutex_);
  std::uint64_t total = 0;
  for (const Lane& lane : lanes_) total += lane.ring->dropped();
  return total;
}

}  // namespace feedscope
