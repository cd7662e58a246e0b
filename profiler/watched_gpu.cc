#include "profiler/watched_gpu.h"

#include <algorithm>
#include <limits>
#include <system_error>

#include "profiler/gpu_activity_wire.h"
#include "profiler/gpu_trace.h"
#include "profiler/time_windows.h"
#include "profiler/trace_sampling.h"

namespace feedscope {

ProcessGpu summarize_process_gpu(const GpuActivity& a) {
  ProcessGpu out;
  if (a.kernels.empty()) return out;
  out.device = a.kernels.front().device;
  out.kernels = static_cast<std::int64_t>(a.kernels.size());
  std::int64_t first = std::numeric_limits<std::int64_t>::max(), last = std::numeric_limits<std::int64_t>::min();
  std::vector<TimeWindow> busy, nccl;
  for (const KernelRecord& k : a.kernels) {
    first = std::min(first, k.start_ns);
    last = std::max(last, k.end_ns);
    busy.push_back({k.start_ns, k.end_ns});
    if (is_collective_kernel(k.name.str())) nccl.push_back({k.start_ns, k.end_ns});
  }
  for (const MemcpyRecord& m : a.memcpys) busy.push_back({m.start_ns, m.end_ns});
  for (const MemsetRecord& m : a.memsets) busy.push_back({m.start_ns, m.end_ns});
  if (last <= first) return out;
  // A sampled trace is read in its windows only: between them nothing was recorded.
  const std::vector<TimeWindow> spans =
      a.sampled() ? intersect_windows({{first, last}}, readable_windows(a).windows)
                  : std::vector<TimeWindow>{{first, last}};
  const std::int64_t span_ns = windows_ns(spans);
  if (span_ns <= 0) return out;
  // Copies and memsets only where they overlap the kernels' span (clipped by the intersection).
  const double span = static_cast<double>(span_ns);
  out.busy_ratio = static_cast<double>(union_ns(intersect_windows(busy, spans))) / span;
  out.collective_ratio = static_cast<double>(union_ns(intersect_windows(nccl, spans))) / span;
  out.trace = summarize_program_activity(a, kernel_active_windows(a));
  return out;
}

WatchedGpu read_watch_gpu_dir(const std::filesystem::path& dir) {
  WatchedGpu w;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    if (ec != std::errc::no_such_file_or_directory)
      w.errors.push_back(dir.string() + ": cannot be listed: " + ec.message());
    return w;
  }
  // Pid order, so the merged records do not depend on the directory's order.
  std::map<int, std::filesystem::path> files;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    constexpr std::string_view prefix = "gpu-", suffix = ".fsgpu";
    if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
        !name.ends_with(suffix))
      continue;
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    files.emplace(std::stoi(digits), it->path());
  }
  std::vector<std::vector<TimeWindow>> windows;  // each sampled process's own
  for (const auto& [pid, path] : files) {
    GpuActivityStream s = read_gpu_activity(path);
    if (!s.activity.kernels.empty()) w.by_pid[pid] = summarize_process_gpu(s.activity);
    if (s.activity.sampled()) windows.push_back(std::move(s.activity.traced_windows));
    s.activity.traced_windows.clear();
    w.activity.append(std::move(s.activity));
    w.statuses_by_pid[pid] = std::move(s.statuses);
    if (!s.error.empty()) w.errors.push_back(std::move(s.error));
  }
  // Processes start and end at their own times; a stretch is read where all that lived traced it.
  w.activity.traced_windows = traced_by_every_process(windows);
  return w;
}

}  // namespace feedscope
