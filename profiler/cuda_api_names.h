#pragma once
// What the GPU summary reads of the host's CUDA calls, by name: which calls launch work, which
// block the host, which only ask. One list serves the summary (gpu_trace.cc) and the tracer
// (detail/cupti_records.cc), which enables CUPTI records for these calls alone: a launch-bound
// torch step makes some 200 runtime calls, most of them cudaGetDevice, and recording each costs
// the step time. Pure functions of the name; the inject library compiles this file in.
#include <string_view>

namespace feedscope {

// "cudaLaunchKernel" of "cudaLaunchKernel_ptsz": CUPTI names the per-thread default stream
// variants with a "_ptsz" or "_ptds" suffix. The "_v7000" version suffix of CUPTI's callback names
// goes earlier (strip_cupti_version).
std::string_view base_name(std::string_view name);

// "cudaLaunchKernel_ptsz" of CUPTI's callback name "cudaLaunchKernel_ptsz_v7000"; a name without
// a trailing "_v<digits>" as it is.
std::string_view strip_cupti_version(std::string_view name);

// Runtime API calls after which the host waits for the device ("cudaStreamSynchronize",
// "cudaMemcpy"; not the Async variants). Accepts CUPTI's per-thread-stream suffixes.
bool is_synchronous_runtime_call(std::string_view name);
// A host call that launches device work: the runtime's (cudaLaunchKernel, CUDA 13's
// __cudaLaunchKernel that `<<<>>>` compiles to, cudaGraphLaunch, ...) or the driver's
// (cuLaunchKernel: Triton's kernels under torch.compile; cuGraphLaunch).
bool is_launch_runtime_call(std::string_view name);
// cudaEventQuery and cudaStreamQuery: they return at once, done or not.
bool is_query_runtime_call(std::string_view name);

// The runtime calls whose records the summary reads: launches, blocking syncs, every cudaMemcpy*
// (an "async" copy into pageable memory blocks: the summary matches it to its copy record) and
// the queries (CUPTI writes a synchronization record for a query; the call tells it apart from a
// sync). A name as CUPTI's callback table gives it, version suffix and all.
bool is_traced_runtime_callback(std::string_view cupti_name);
// The driver calls the summary reads: the launches (cuLaunchKernel, cuLaunchKernelEx,
// cuLaunchCooperativeKernel, cuGraphLaunch and their _ptsz variants).
bool is_traced_driver_callback(std::string_view cupti_name);

}  // namespace feedscope
