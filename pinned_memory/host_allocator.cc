#include "pinned_memory/host_allocator.h"

#include <unistd.h>

#include <cstdlib>
#include <new>
#include <string>

#include "pinned_memory/errors.h"

#if FEEDSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace feedscope {

std::size_t page_size() noexcept {
  static const std::size_t size = [] {
    const long value = ::sysconf(_SC_PAGESIZE);
    return value > 0 ? static_cast<std::size_t>(value) : std::size_t{4096};
  }();
  return size;
}

namespace {

class PageAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override {
    const std::size_t page = page_size();
    void* ptr = std::aligned_alloc(page, (bytes + page - 1) / page * page);
    if (ptr == nullptr) throw std::bad_alloc();
    return ptr;
  }
  void deallocate(void* ptr, std::size_t) noexcept override { std::free(ptr); }
  bool pinned() const noexcept override { return false; }
  std::string_view name() const noexcept override { return "pageable"; }
};

#if FEEDSCOPE_WITH_CUDA
class CudaPinnedAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override {
    void* ptr = nullptr;
    const cudaError_t status = cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable);
    if (status != cudaSuccess) {
      throw DeviceError("cudaHostAlloc of " + std::to_string(bytes) +
                        " bytes failed: " + cudaGetErrorString(status));
    }
    return ptr;
  }
  void deallocate(void* ptr, std::size_t) noexcept override {
    // Tolerates a runtime that is already unloading at process exit.
    (void)cudaFreeHost(ptr);
  }
  bool pinned() const noexcept override { return true; }
  std::string_view name() const noexcept override { return "pinned"; }
};
#endif

}  // namespace

std::unique_ptr<HostAllocator> make_page_allocator() { return std::make_unique<PageAllocator>(); }

std::unique_ptr<HostAllocator> make_pinned_allocator() {
#if FEEDSCOPE_WITH_CUDA
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    throw DeviceError(std::string("pinned memory needs a CUDA device: ") +
                      (status != cudaSuccess ? cudaGetErrorString(status) : "no device found"));
  }
  return std::make_unique<CudaPinnedAllocator>();
#else
  throw DeviceError("pinned memory needs CUDA: this feedscope was built without CUDA");
#endif
}

}  // namespace feedscope
