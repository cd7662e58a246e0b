#pragma once
// A pool of equally sized host slabs, allocated at start (pinning synchronizes the device, so never
// in steady state). A batch is collated straight into a slab; the slab returns to the pool by
// itself when its last holder lets go. A pool may be allowed to grow(), up to a bound, for a
// caller that keeps more batches alive than it was sized for.
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include <tbb/concurrent_queue.h>

#include "pinned_memory/host_allocator.h"

namespace feedscope {

class PinnedPool;

// Move-only ownership of one slab. Returns the slab to its pool on destruction; keeps the pool
// alive while held, so a batch may outlive the loader that produced it.
class Slab {
 public:
  Slab() = default;
  Slab(Slab&& other) noexcept;
  Slab& operator=(Slab&& other) noexcept;
  Slab(const Slab&) = delete;
  Slab& operator=(const Slab&) = delete;
  ~Slab() { reset(); }

  explicit operator bool() const noexcept { return pool_ != nullptr; }
  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept;
  int id() const noexcept { return id_; }
  bool pinned() const noexcept;
  std::span<std::byte> bytes() const noexcept { return {data_, size()}; }
  void reset() noexcept;

 private:
  friend class PinnedPool;
  Slab(std::shared_ptr<PinnedPool> pool, int id, std::byte* data) noexcept
      : pool_(std::move(pool)), id_(id), data_(data) {}
  std::shared_ptr<PinnedPool> pool_;
  int id_ = -1;
  std::byte* data_ = nullptr;
};

// Thread-safe: acquire and release may be called from any thread. Created through create() so
// slabs can hold it by shared_ptr.
class PinnedPool : public std::enable_shared_from_this<PinnedPool> {
 public:
  // Allocates `count` slabs of `slab_bytes` (rounded up to the page size); grow() may add more up
  // to `max_count` (below `count`: no growth). Throws std::invalid_argument for a zero size or
  // count, and whatever the allocator throws.
  static std::shared_ptr<PinnedPool> create(std::size_t slab_bytes, int count,
                                            std::unique_ptr<HostAllocator> allocator,
                                            int max_count = 0);
  // The size create() gives a slab asked for with `slab_bytes`: a whole number of pages.
  static std::size_t rounded_slab_bytes(std::size_t slab_bytes) noexcept;
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // An empty Slab when none is free right now: the caller applies backpressure.
  Slab try_acquire();
  // Blocks until a slab is free. Throws std::runtime_error after abort().
  Slab acquire();
  // Makes every blocked and every later acquire() throw; used at shutdown.
  void abort();
  // Allocates one more slab and makes it free, unless the pool is at its max_count; returns
  // whether it did. Pinned memory synchronizes the device here: for the rare caller that keeps
  // batches, not the steady state. Throws what the allocator throws.
  bool grow();

  std::size_t slab_bytes() const noexcept { return slab_bytes_; }
  int slab_count() const noexcept { return count_.load(std::memory_order_acquire); }
  int max_slab_count() const noexcept { return static_cast<int>(blocks_.size()); }
  int slabs_in_use() const noexcept { return in_use_.load(std::memory_order_relaxed); }
  int peak_in_use() const noexcept { return peak_in_use_.load(std::memory_order_relaxed); }
  std::size_t total_bytes() const noexcept {
    return slab_bytes_ * static_cast<std::size_t>(slab_count());
  }
  bool pinned() const noexcept { return allocator_->pinned(); }
  std::string_view allocator_name() const noexcept { return allocator_->name(); }

 private:
  PinnedPool(std::size_t slab_bytes, std::unique_ptr<HostAllocator> allocator);
  friend class Slab;
  void release(int id) noexcept;
  void add_block();  // allocates slab count_ and queues it free; under grow_mutex_ or in create()
  // Queued after abort(); whoever pops it puts it back, so it reaches every waiter.
  static constexpr int kAbortToken = -1;
  Slab wrap(int id);

  std::size_t slab_bytes_;
  std::unique_ptr<HostAllocator> allocator_;
  // max_count entries, null past count_: never reallocated, so wrap() reads it without a lock (a
  // slab's entry is written before its id is first queued in free_).
  std::vector<std::byte*> blocks_;
  std::mutex grow_mutex_;  // one grow() at a time
  // Below state is shared with every thread that acquires or releases.
  std::atomic<int> count_{0};
  tbb::concurrent_bounded_queue<int> free_;
  std::atomic<int> in_use_{0};
  std::atomic<int> peak_in_use_{0};
};

}  // namespace feedscope
