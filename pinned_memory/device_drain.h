#pragma once
// Waiting for the devices a program has used, at the end of a profiled loop that feedscope did not
// write (include/feedscope/session.h): its steps may still be queued when the loop ends, and a GPU trace
// stopped before they run loses their kernels.
namespace feedscope {

// Waits until every device whose primary context this process has made has finished the work
// queued on it so far. A device the process never used is left alone: no context is made for it
// (that would take memory and time from a CPU-only loop). Never throws; a failure is reported on
// stderr and the next device is still drained. Returns how many devices it waited for.
int drain_used_devices() noexcept;

}  // namespace feedscope
