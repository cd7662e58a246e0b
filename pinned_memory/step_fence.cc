#include "pinned_memory/step_fence.h"

#include <stdexcept>

#include "pinned_memory/detail/cuda_ops.h"

namespace feedscope {

StepFence::StepFence(int device, int depth, detail::CudaOps* ops)
    : ops_(ops != nullptr ? *ops : detail::cuda_runtime_ops()), device_(device) {
  if (depth < 1) throw std::invalid_argument("step fence: depth must be 1 or more");
  const detail::DeviceScope on_device(ops_, device_);
  try {
    for (int i = 0; i < depth; ++i) ring_.push_back(ops_.create_event(false));
  } catch (...) {
    for (void* e : ring_) ops_.destroy_event(e);
    throw;
  }
}

StepFence::~StepFence() {
  for (void* e : ring_) ops_.destroy_event(e);
}

void StepFence::mark(void* stream) {
  const detail::DeviceScope on_device(ops_, device_);
  ops_.record(ring_[marks_ % ring_.size()], stream);
  ++marks_;
}

void StepFence::wait_for_mark(std::size_t mark) {
  const detail::DeviceScope on_device(ops_, device_);
  detail::wait_for_event(ops_, ring_[mark % ring_.size()]);
}

void StepFence::wait_for_previous() {
  // The slot the next mark() overwrites holds the oldest step still allowed in flight.
  if (marks_ >= ring_.size()) wait_for_mark(marks_);
}

void StepFence::wait_all() {
  if (marks_ > 0) wait_for_mark(marks_ - 1);
}

}  // namespace feedscope
