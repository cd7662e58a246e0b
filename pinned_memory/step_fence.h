#pragma once
// Bounds how far the host runs ahead of the device in a step loop that never synchronizes
// otherwise: such a loop queues work without limit and its host-side step times mean nothing.
// mark() records an event on the step's stream after a step; wait_for_previous() waits until the
// step `depth` marks ago has finished, so `depth` steps stay in flight, as frameworks keep them.
//
// Its waits poll (detail::wait_for_event), never a host-synchronizing CUDA call: a profiler counts
// cudaEventSynchronize as a sync of the training loop's, and this one is feedscope's, not the
// user's. Between polls the thread yields and then sleeps, so a wait does not spin a core.
#include <cstddef>
#include <vector>

namespace feedscope {

namespace detail {
class CudaOps;
}

// Not thread-safe: the training thread. Construction throws DeviceError where the events cannot be
// made (no device, no CUDA build).
class StepFence {
 public:
  // `device`: the step's device, on which the events are made and recorded whatever device is
  // current. `ops` null: the CUDA runtime.
  explicit StepFence(int device, int depth = 2, detail::CudaOps* ops = nullptr);
  ~StepFence();
  StepFence(const StepFence&) = delete;
  StepFence& operator=(const StepFence&) = delete;

  // After a step: marks the work queued on `stream` so far (a cudaStream_t of `device`; null:
  // its legacy default stream, where libtorch queues unless told otherwise).
  void mark(void* stream);
  // Before the next step: waits for the step `depth` marks back.
  void wait_for_previous();
  // Waits for every marked step: the device has finished what the loop queued.
  void wait_all();

  int device() const noexcept { return device_; }

 private:
  void wait_for_mark(std::size_t mark);

  detail::CudaOps& ops_;
  int device_;
  std::vector<void*> ring_;  // events, one per step in flight
  std::size_t marks_ = 0;
};

}  // namespace feedscope
