#include "pinned_memory/pinned_pool.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace feedscope {

Slab::Slab(Slab&& other) noexcept
    : pool_(std::move(other.pool_)), id_(other.id_), data_(other.data_) {
  other.id_ = -1;
  other.data_ = nullptr;
}

Slab& Slab::operator=(Slab&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = std::move(other.pool_);
    id_ = other.id_;
    data_ = other.data_;
    other.id_ = -1;
    other.data_ = nullptr;
  }
  return *this;
}

std::size_t Slab::size() const noexcept { return pool_ ? pool_->slab_bytes() : 0; }
bool Slab::pinned() const noexcept { return pool_ && pool_->pinned(); }

void Slab::reset() noexcept {
  if (pool_) {
    // Move the pool out first: release() may drop the last reference to it.
    std::shared_ptr<PinnedPool> pool = std::move(pool_);
    pool->release(id_);
    id_ = -1;
    data_ = nullptr;
  }
}

std::size_t PinnedPool::rounded_slab_bytes(std::size_t slab_bytes) noexcept {
  const std::size_t page = page_size();
  return (slab_bytes + page - 1) / page * page;
}

std::shared_ptr<PinnedPool> PinnedPool::create(std::size_t slab_bytes, int count,
                                               std::unique_ptr<HostAllocator> allocator,
                                               int max_count) {
  if (slab_bytes == 0) throw std::invalid_argument("pinned pool: slab size must be > 0 bytes");
  if (count <= 0)
    throw std::invalid_argument("pinned pool: slab count must be > 0, got " +
                                std::to_string(count));
  if (!allocator) throw std::invalid_argument("pinned pool: no allocator");
  const std::size_t rounded = rounded_slab_bytes(slab_bytes);
  std::shared_ptr<PinnedPool> pool(new PinnedPool(rounded, std::move(allocator)));
  pool->blocks_.assign(static_cast<std::size_t>(std::max(count, max_count)), nullptr);
  // If an allocation throws, the destructor frees the blocks already taken.
  for (int i = 0; i < count; ++i) pool->add_block();
  return pool;
}

bool PinnedPool::grow() {
  const std::lock_guard lock(grow_mutex_);
  if (slab_count() >= max_slab_count()) return false;
  add_block();
  return true;
}

void PinnedPool::add_block() {
  const int id = count_.load(std::memory_order_relaxed);
  blocks_[static_cast<std::size_t>(id)] = static_cast<std::byte*>(allocator_->allocate(slab_bytes_));
  count_.store(id + 1, std::memory_order_release);
  free_.push(id);
}

PinnedPool::PinnedPool(std::size_t slab_bytes, std::unique_ptr<HostAllocator> allocator)
    : slab_bytes_(slab_bytes), allocator_(std::move(allocator)) {}

PinnedPool::~PinnedPool() {
  for (std::byte* block : blocks_)
    if (block != nullptr) allocator_->deallocate(block, slab_bytes_);
}

Slab PinnedPool::wrap(int id) {
  const int now = in_use_.fetch_add(1, std::memory_order_relaxed) + 1;
  int peak = peak_in_use_.load(std::memory_order_relaxed);
  while (now > peak && !peak_in_use_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return Slab(shared_from_this(), id, blocks_[static_cast<std::size_t>(id)]);
}

Slab PinnedPool::try_acquire() {
  int id = kAbortToken;
  if (!free_.try_pop(id)) return {};
  if (id == kAbortToken) {
    free_.push(kAbortToken);
    return {};
  }
  return wrap(id);
}

Slab PinnedPool::acquire() {
  int id = kAbortToken;
  free_.pop(id);
  if (id == kAbortToken) {
    free_.push(kAbortToken);
    throw std::runtime_error("pinned pool: shut down while waiting for a free slab");
  }
  return wrap(id);
}

void PinnedPool::abort() { free_.push(kAbortToken); }

void PinnedPool::release(int id) noexcept {
  in_use_.fetch_sub(1, std::memory_order_relaxed);
  free_.push(id);
}

}  // namespace feedscope
