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

namespace {

// How fast a counter grew between two readings, per second; nothing where a reading is missing,
// the window is empty, or the counter went backwards.
std::optional<double> per_second(const std::optional<std::uint64_t>& begin,
                                 const std::optional<std::uint64_t>& end, double wall_s) {
  if (!begin || !end || wall_s <= 0 || *end < *begin) return std::nullopt;
  return static_cast<double>(*end - *begin) / wall_s;
}

}  // namespace

UsageRatios usage_between(const UsageSnapshot& begin, const UsageSnapshot& end, int cpus) {
  UsageRatios r;
  const double wall_s = static_cast<double>(end.time_ns - begin.time_ns) / 1e9;
  const double ticks = static_cast<double>(clock_ticks_per_second());
  if (const auto process = per_second(begin.process_ticks, end.process_ticks, wall_s);
      process && cpus > 0)
    r.process = std::clamp(*process / ticks / cpus, 0.0, 1.0);
  if (const auto children = per_second(begin.descendants_ticks, end.descendants_ticks, wall_s))
    r.descendants_cores = *children / ticks;
  r.storage_read_bytes_per_s = per_second(begin.storage_read_bytes, end.storage_read_bytes, wall_s);
  if (begin.system && end.system && end.system->total > begin.system->total &&
      end.system->busy >= begin.system->busy) {
    r.system = std::clamp(static_cast<double>(end.system->busy - begin.system->busy) /
                              static_cast<double>(end.system->total - begin.system->total),
                          0.0, 1.0);
  }
  return r;
}

}  // namespace feedscope
