#include "pinned_memory/detail/cuda_ops.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "pinned_memory/errors.h"

#if FEEDSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "pinned_memory/detail/cuda_call.h"
#endif

namespace feedscope::detail {

int idle_microseconds(int attempt) noexcept {
  constexpr int kYields = 16, kFirstUs = 20, kMaxUs = 200;
  if (attempt < kYields) return 0;
  const int doublings = std::min(attempt - kYields, 4);  // 20 << 4 passes the cap
  return std::min(kFirstUs << doublings, kMaxUs);
}

void wait_for_event(CudaOps& ops, void* event) {
  for (int attempt = 0; !ops.query(event); ++attempt) ops.idle(attempt);
}

namespace {

void idle_for(int attempt) {
  if (const int us = idle_microseconds(attempt); us > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  else
    ::sched_yield();
}

#if FEEDSCOPE_WITH_CUDA

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }

// Stateless; any thread.
class RuntimeOps final : public CudaOps {
 public:
  int device_count(const char** why_not) override {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      if (why_not != nullptr) *why_not = cudaGetErrorString(status);
      return 0;
    }
    if (count == 0 && why_not != nullptr) *why_not = "none found";
    return count;
  }
  int current_device() override {
    int device = 0;
    FEEDSCOPE_CUDA_CALL(cudaGetDevice(&device));
    return device;
  }
  void set_device(int device) override { FEEDSCOPE_CUDA_CALL(cudaSetDevice(device)); }
  void set_device_noexcept(int device) noexcept override {
    FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaSetDevice(device));
  }
  void* create_stream() override {
    cudaStream_t s = nullptr;
    FEEDSCOPE_CUDA_CALL(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }
  void destroy_stream(void* stream) noexcept override {
    FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaStreamDestroy(as_stream(stream)));
  }
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    FEEDSCOPE_CUDA_CALL(cudaMalloc(&p, bytes));
    return p;
  }
  void release(void* device_memory) noexcept override {
    FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaFree(device_memory));
  }
  void* create_event(bool timing) override {
    cudaEvent_t e = nullptr;
    FEEDSCOPE_CUDA_CALL(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault
                                                            : cudaEventDisableTiming));
    return e;
  }
  void destroy_event(void* event) noexcept override {
    FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaEventDestroy(as_event(event)));
  }
  void record(void* event, void* stream) override {
    FEEDSCOPE_CUDA_CALL(cudaEventRecord(as_event(event), as_stream(stream)));
  }
  void record_noexcept(void* event, void* stream) noexcept override {
    FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaEventRecord(as_event(event), as_stream(stream)));
  }
  bool query(void* event) override {
    const cudaError_t status = cudaEventQuery(as_event(event));
    if (status == cudaErrorNotReady) return false;
    FEEDSCOPE_CUDA_CALL(status);
    return true;
  }
  float elapsed_ms(void* begin, void* end) override {
    float ms = 0;
    FEEDSCOPE_CUDA_CALL(cudaEventElapsedTime(&ms, as_event(begin), as_event(end)));
    return ms;
  }
  void stream_wait(void* stream, void* event) override {
    FEEDSCOPE_CUDA_CALL(cudaStreamWaitEvent(as_stream(stream), as_event(event), 0));
  }
  void copy_to_device_async(void* dst, const void* src, std::size_t bytes, void* stream) override {
    FEEDSCOPE_CUDA_CALL(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, as_stream(stream)));
  }
  void idle(int attempt) override { idle_for(attempt); }
};

#else  // no CUDA in this build: nothing can be made

// Stateless; any thread.
class RuntimeOps final : public CudaOps {
 public:
  int device_count(const char** why_not) override {
    if (why_not != nullptr) *why_not = "this feedscope was built without CUDA";
    return 0;
  }
  int current_device() override { return none(); }
  void set_device(int) override { none(); }
  void set_device_noexcept(int) noexcept override {}
  void* create_stream() override { return none_ptr(); }
  void destroy_stream(void*) noexcept override {}
  void* allocate(std::size_t) override { return none_ptr(); }
  void release(void*) noexcept override {}
  void* create_event(bool) override { return none_ptr(); }
  void destroy_event(void*) noexcept override {}
  void record(void*, void*) override { none(); }
  void record_noexcept(void*, void*) noexcept override {}
  bool query(void*) override { return none() == 0; }
  float elapsed_ms(void*, void*) override { return static_cast<float>(none()); }
  void stream_wait(void*, void*) override { none(); }
  void copy_to_device_async(void*, const void*, std::size_t, void*) override { none(); }
  void idle(int attempt) override { idle_for(attempt); }

 private:
  [[noreturn]] static int none() { throw DeviceError("this feedscope was built without CUDA"); }
  [[noreturn]] static void* none_ptr() { none(); }
};

#endif

}  // namespace

CudaOps& cuda_runtime_ops() {
  static RuntimeOps ops;
  return ops;
}

}  // namespace feedscope::detail
