#pragma once
// Everything the CUDA processes of one watched program wrote (gpu_activity_wire.h's files under
// $FEEDSCOPE_WATCH_DIR): their records together for the program's summary, and each process's
// own, so that each rank of a torch.distributed job is diagnosed with its own CUDA trace.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "profiler/gpu_activity.h"
#include "profiler/report.h"

namespace feedscope {

// One process's CUDA work over its own active span (its first kernel's start to its last's end):
// what a rank of a torch.distributed job did on its GPU.
struct ProcessGpu {
  std::uint32_t device = 0;  // of its first kernel
  std::int64_t kernels = 0;
  double busy_ratio = 0;        // union of its kernels, copies and memsets / its span
  double collective_ratio = 0;  // union of its NCCL kernels (name contains "nccl") / its span
  // Its own records' summary, as `watch` makes the program's (summarize_program_activity over
  // its kernel_active_windows, its own sampled windows read): the trace its rank is diagnosed by.
  std::optional<GpuTraceSummary> trace;
};
ProcessGpu summarize_process_gpu(const GpuActivity& activity);

struct WatchedGpu {
  GpuActivity activity;  // the records of every process together
  std::map<int, ProcessGpu> by_pid;  // each process with a kernel
  std::map<int, std::vector<std::string>> statuses_by_pid;
  std::vector<std::string> errors;  // one per file with a corrupt frame, or an unreadable dir
};

// Reads every gpu-<pid>.fsgpu in `dir`; other files are ignored. A missing dir reads as empty:
// no process of the program initialized CUDA.
WatchedGpu read_watch_gpu_dir(const std::filesystem::path& dir);

}  // namespace feedscope
