#include "sampler/cpu_usage.h"

#include <algorithm>

namespace feedscope {

UsageSnapshot take_usage_snapshot(const ProcFs& fs, std::int64_t time_ns) {
  UsageSnapshot s;
  s.time_ns = time_ns;
  if (const auto stat = fs.read("/proc/self/stat")) s.process_ticks = parse_task_cpu_ticks(*stat);
  if (const auto stat = fs.read("/proc/stat")) s.system = parse_cpu_times(*stat);
  s.descendants_ticks = descendants_cpu_ticks(fs);
  if (const auto io = fs.read("/proc/self/io")) s.storage_read_bytes = parse_io_read_bytes(*io);
  return s;
}

UsageRatios usage_between(const UsageSnapshot& begin, const UsageSnapshot& end, int cpus) {
  UsageRatios r;
  const double wall_s = static_cast<double>(end.time_ns - begin.time_ns) / 1e9;
  if (begin.process_ticks && end.process_ticks && wall_s > 0 && cpus > 0 &&
      *end.process_ticks >= *begin.process_ticks) {
    const double cpu_s = static_cast<double>(*end.process_ticks - *begin.process_ticks) /
                         static_cast<double>(clock_ticks_per_second());
    r.process = std::clamp(cpu_s / (wall_s * cpus), 0.0, 1.0);
  }
  if (begin.descendants_ticks && end.descendants_ticks && wall_s > 0 &&
      *end.descendants_ticks >= *begin.descendants_ticks)
    r.descendants_cores = static_cast<double>(*end.descendants_ticks - *begin.descendants_ticks) /
                          static_cast<double>(clock_ticks_per_second()) / wall_s;
  if (begin.storage_read_bytes && end.storage_read_bytes && wall_s > 0 &&
      *end.storage_read_bytes >= *begin.storage_read_bytes)
    r.storage_read_bytes_per_s =
        static_cast<double>(*end.storage_read_bytes - *begin.storage_read_bytes) / wall_s;
  if (begin.system && end.system && end.system->total > begin.system->total &&
      end.system->busy >= begin.system->busy) {
    r.system = std::clamp(static_cast<double>(end.system->busy - begin.system->busy) /
                              static_cast<double>(end.system->total - begin.system->total),
                          0.0, 1.0);
  }
  return r;
}

}  // namespace feedscope
