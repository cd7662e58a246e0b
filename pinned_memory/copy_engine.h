#pragma once
// The asynchronous host-to-device copy of batch slabs, on a CUDA stream of its own. The step's
// stream waits for a copy with an event (never a host synchronize); a device buffer is reused
// only after the step that read it is done, again through an event; a slab goes back to its pool
// once its copy has completed. CUDA stays out of this header: streams are passed as void*
// (a cudaStream_t; nullptr is the legacy default stream, the one libtorch uses unless told
// otherwise).
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pinned_memory/pinned_pool.h"

namespace feedscope {

namespace detail {
class CudaOps;
}

// Every device buffer is held by a live DeviceCopy: the caller keeps batches beyond the engine's
// depth. Thrown by submit(), at once, instead of waiting for a release that cannot come.
class CopyEngineExhausted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One completed copy, on the host's steady clock (loader/span_recorder.h's now_ns()).
struct CopyTiming {
  std::int64_t tag = -1;  // what submit() was given: the batch index
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::size_t bytes = 0;
  bool pinned = false;  // the source slab was page-locked
};

class CopyEngine;

// A batch on the device: `bytes` of a slab, copied (or being copied) into a device buffer of the
// engine. Move-only. Destruction releases the buffer after the work queued so far on the stream
// (or streams) given to release_after() (the legacy default stream if none was given). Must not
// outlive its engine.
class DeviceCopy {
 public:
  DeviceCopy() = default;
  DeviceCopy(DeviceCopy&& other) noexcept;
  DeviceCopy& operator=(DeviceCopy&& other) noexcept;
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() { release_after(nullptr); }

  explicit operator bool() const noexcept { return engine_ != nullptr; }
  std::byte* data() const noexcept { return data_; }  // device memory
  std::size_t bytes() const noexcept { return bytes_; }
  // Makes the work queued on `stream` from now on wait for this copy. Host does not block.
  void order_before(void* stream) const;
  // The buffer may be overwritten once the work queued on `stream` so far is done.
  void release_after(void* stream) noexcept;
  // ... once the work queued so far on `stream` and on `also` is done: a batch read on two streams
  // (taken on a side stream, read on the default one). The copy that reuses the buffer waits for
  // both on the device; neither stream waits for the other.
  void release_after(void* stream, void* also) noexcept;

 private:
  friend class CopyEngine;
  CopyEngine* engine_ = nullptr;
  int buffer_ = -1;
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Not thread-safe: one thread (the training thread) submits, reclaims and releases. Construction
// throws DeviceError (no CUDA build, no device, an allocation that fails); it allocates every
// device buffer once, up front. Destruction waits for the copies in flight, then frees.
class CopyEngine {
 public:
  struct Options {
    int device = 0;
    std::size_t buffer_bytes = 0;  // the largest copy: the slab's size
    // Device buffers: the batch the step reads, the one copying, one of slack. Fewer than 2
    // cannot overlap the copy with the step.
    int buffers = 3;
    // Buffers submit() may add, one at a time, when every one is held by a live DeviceCopy (a
    // caller that keeps batches on the device). 0: none; a caller holding all is an error.
    int max_extra_buffers = 0;
    // The CUDA calls the engine makes; null: the CUDA runtime. Tests pass a simulated device.
    detail::CudaOps* ops = nullptr;
  };
  explicit CopyEngine(Options options);
  ~CopyEngine();
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;

  // Queues the copy of the first `bytes` of `slab` on the copy stream and returns at once. The
  // engine keeps the slab until the copy completes (reclaim() hands it back to its pool).
  // Throws std::invalid_argument when `bytes` exceeds the buffer, CopyEngineExhausted when every
  // buffer is held by a live DeviceCopy and no more may be added.
  DeviceCopy submit(Slab slab, std::size_t bytes, std::int64_t tag);
  // From pageable memory CUDA stages the bytes inside the copy call, once the copy stream's earlier
  // work is done: the previous copy, and the wait for the last reader of the buffer this copy
  // takes (the step two batches back). This waits for that (polling, as wait_idle()) so that a
  // caller timing submit() times the copy alone; submit() calls it too. A pinned slab's copy
  // never blocks the host: returns at once.
  void wait_until_submit_ready(bool pinned);
  // Whether submit() of a slab of this kind would go through now without that wait and without
  // throwing CopyEngineExhausted. Never blocks.
  bool can_submit_now(bool pinned);
  // Returns the slabs of completed copies to their pools and appends the timing of every copy
  // that completed since the last call that collected them, in submission order: also those
  // whose slabs submit() already took back, so no copy's span or bytes go missing. Never blocks.
  // Uncollected timings are kept up to kKeptTimings; older ones are dropped and counted.
  void reclaim(std::vector<CopyTiming>* timings = nullptr);
  static constexpr std::size_t kKeptTimings = 4096;
  std::uint64_t timings_dropped() const noexcept { return timings_dropped_; }
  // Waits until every queued copy is done, by polling (never a host-synchronizing CUDA call: a
  // profiler would count it as the user's), then reclaims.
  void wait_idle();

  int device() const noexcept { return options_.device; }
  int buffers() const noexcept { return static_cast<int>(held_.size()); }
  int max_buffers() const noexcept { return options_.buffers + options_.max_extra_buffers; }
  int buffers_in_use() const noexcept;
  std::size_t device_bytes() const noexcept {
    return options_.buffer_bytes * static_cast<std::size_t>(buffers());
  }

 private:
  friend class DeviceCopy;
  struct Cuda;  // the stream, events and device buffers
  struct InFlight {
    Slab slab;
    int buffer = -1;
    std::int64_t tag = -1;
    std::size_t bytes = 0;
  };
  void order_before(int buffer, void* stream) const;
  void release(int buffer, void* stream, std::optional<void*> also) noexcept;
  // Returns the slabs of copies done by now; keeps their timings in finished_.
  void retire_completed();
  void anchor();
  void add_buffer();  // a device buffer, its two events and two timing pairs; on the device
  int free_buffer();  // a buffer no DeviceCopy holds, adding one where allowed; -1: none
  // The buffer free_buffer() would return, buffers() for one it would add; -1: none.
  int next_free_buffer() const noexcept;

  Options options_;
  detail::CudaOps& ops_;
  std::unique_ptr<Cuda> cuda_;
  std::vector<bool> held_;  // buffer -> a live DeviceCopy has it
  int next_buffer_ = 0;
  std::deque<InFlight> in_flight_;  // submission order = completion order on one stream
  std::vector<CopyTiming> finished_;  // completed, not yet collected by reclaim(&timings)
  std::uint64_t timings_dropped_ = 0;
};

// Whether this build and machine can run a CopyEngine; the reason when not.
bool copy_engine_available(std::string* why_not = nullptr);

}  // namespace feedscope
