#pragma once
// Host memory for batch slabs. Behind an interface so tests can wrap the real allocator with a
// checking one (guard bytes, leak and double-free detection, simulated out-of-memory).
#include <cstddef>
#include <memory>
#include <string_view>

namespace feedscope {

// Implementations must be thread-safe; allocate() throws (std::bad_alloc or DeviceError) at
// setup time only: the pool allocates every slab up front.
class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr, std::size_t bytes) noexcept = 0;
  // True when the memory is page-locked and registered with the CUDA driver.
  virtual bool pinned() const noexcept = 0;
  virtual std::string_view name() const noexcept = 0;
};

// Page-aligned ordinary memory: the CPU path, and pin_memory=off.
std::unique_ptr<HostAllocator> make_page_allocator();

// cudaHostAlloc'd memory. Throws DeviceError naming the reason when CUDA is not built in or no
// device is present.
std::unique_ptr<HostAllocator> make_pinned_allocator();

std::size_t page_size() noexcept;

}  // namespace feedscope
