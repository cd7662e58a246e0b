#pragma once
// What the GPU did during the training steps: kernel statistics, busy time as the union of
// activity over every stream, idle gaps between launches, host syncs, and H2D copies by source
// memory. Pure functions of the records and the step windows, so tests feed fabricated ones.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/gpu_activity.h"
#include "profiler/report.h"

namespace feedscope {

// [begin_ns, end_ns) of one `step` span, in now_ns() time.
struct StepWindow {
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
};

// Windows may come in any order; empty ones are ignored. Overlapping windows are merged so that
// no GPU time counts twice.
GpuTraceSummary summarize_gpu_trace(const GpuActivity& activity,
                                    std::vector<StepWindow> step_windows);

// Evidence lines for records the trace lost or left out, one per cause with a non-zero count, so
// a reader knows the GPU numbers are low bounds. Empty for a complete trace.
std::vector<std::string> gpu_trace_losses(const GpuTraceSummary& summary);

// Runtime API calls after which the host waits for the device ("cudaStreamSynchronize",
// "cudaMemcpy"; not the Async variants). Accepts CUPTI's per-thread-stream suffixes.
bool is_synchronous_runtime_call(std::string_view name);
bool is_launch_runtime_call(std::string_view name);
// cudaEventQuery and cudaStreamQuery: they return at once, done or not.
bool is_query_runtime_call(std::string_view name);

}  // namespace feedscope
