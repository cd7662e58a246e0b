#pragma once
// CPU usage between two moments, from /proc: the process (all its threads) and the whole system.
#include <cstdint>
#include <optional>

#include "sampler/proc_fs.h"

namespace feedscope {

struct UsageSnapshot {
  std::int64_t time_ns = 0;
  std::optional<std::uint64_t> process_ticks;  // utime+stime of /proc/self/stat
  std::optional<CpuTimes> system;              // aggregate line of /proc/stat
  std::optional<std::uint64_t> descendants_ticks;  // descendants_cpu_ticks(): worker processes
  std::optional<std::uint64_t> storage_read_bytes;  // read_bytes of /proc/self/io
};

// `time_ns` is passed in so tests control the clock.
UsageSnapshot take_usage_snapshot(const ProcFs& fs, std::int64_t time_ns);

struct UsageRatios {
  double process = 0;  // process CPU seconds / (wall seconds x cpus), 0..1
  double system = 0;   // busy ticks / total ticks, 0..1
  // CPU seconds of descendant processes / wall seconds, in cores: a DataLoader's workers.
  std::optional<double> descendants_cores;
  // Bytes this process's threads fetched from storage (not the page cache) / wall seconds.
  std::optional<double> storage_read_bytes_per_s;
};
UsageRatios usage_between(const UsageSnapshot& begin, const UsageSnapshot& end, int cpus);

}  // namespace feedscope
