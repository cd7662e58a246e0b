#pragma once
// The CUDA runtime calls that the copy engine and the step fence make, behind an interface so
// that their bookkeeping runs in tests on the CPU against a simulated device
// (tests/pinned_memory/fake_cuda.h), as libkineto's tests hand its profiler fabricated CUPTI.
// CUDA stays out of this header: streams and events are opaque pointers (a cudaStream_t, a
// cudaEvent_t); the null stream is the current device's legacy default stream.
#include <cstddef>

namespace feedscope::detail {

// Every call may throw DeviceError naming the call and CUDA's error, except the noexcept ones,
// which report and go on. Thread-safe as the CUDA runtime is.
class CudaOps {
 public:
  virtual ~CudaOps() = default;

  // 0 when there is no device; the reason, when asked for, in `why_not`.
  virtual int device_count(const char** why_not = nullptr) = 0;
  virtual int current_device() = 0;
  virtual void set_device(int device) = 0;
  virtual void set_device_noexcept(int device) noexcept = 0;

  virtual void* create_stream() = 0;  // non-blocking: never serialized with the legacy stream
  virtual void destroy_stream(void* stream) noexcept = 0;
  virtual void* allocate(std::size_t bytes) = 0;  // device memory
  virtual void release(void* device_memory) noexcept = 0;
  virtual void* create_event(bool timing) = 0;
  virtual void destroy_event(void* event) noexcept = 0;

  virtual void record(void* event, void* stream) = 0;
  virtual void record_noexcept(void* event, void* stream) noexcept = 0;
  // True once the work recorded before `event` is done; never blocks.
  virtual bool query(void* event) = 0;
  virtual float elapsed_ms(void* begin, void* end) = 0;
  // Work queued on `stream` from now on waits for `event`; the host does not block.
  virtual void stream_wait(void* stream, void* event) = 0;
  virtual void copy_to_device_async(void* dst, const void* src, std::size_t bytes,
                                    void* stream) = 0;

  // The host between two queries of one wait: `attempt` counts from 0. The real one yields the
  // core for the first few, then sleeps a little longer each time (wait_for_event()).
  virtual void idle(int attempt) = 0;
};

// The CUDA runtime itself. In a build without CUDA every call but device_count() throws
// DeviceError, and device_count() says "this feedscope was built without CUDA".
CudaOps& cuda_runtime_ops();

// Waits until `event` is done by polling it, never through a host-synchronizing call
// (cudaEventSynchronize, cudaStreamSynchronize): a profiler counts those as the user's syncs, and
// feedscope's own waits are not the user's. Between polls the thread yields, then sleeps, so the
// wait does not spin a core.
void wait_for_event(CudaOps& ops, void* event);

// The delay before poll `attempt` + 1, in microseconds: 0 (a yield) for the first 16 polls, then
// 20 us doubling up to 200 us. A late wake-up costs nothing while the step fence keeps two steps
// queued ahead of the device.
int idle_microseconds(int attempt) noexcept;

// Makes `device` current for its scope and restores the previous one, through `ops` (DALI's
// DeviceGuard).
class DeviceScope {
 public:
  DeviceScope(CudaOps& ops, int device) : ops_(ops), previous_(ops.current_device()) {
    if (previous_ != device) ops_.set_device(device);
    switched_ = previous_ != device;
  }
  ~DeviceScope() {
    if (switched_) ops_.set_device_noexcept(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  CudaOps& ops_;
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace feedscope::detail
