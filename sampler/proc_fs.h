#pragma once
// Reads /proc (and /sys) under a configurable root, so tests run on fixture files. Every parser
// returns std::nullopt on a missing or malformed file: a sampler reports "unavailable", it never
// throws on the sampling path.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sampler/rank_identity.h"
#include "sampler/utilization_sample.h"

namespace feedscope {

// Thread-safe: stateless apart from the root.
class ProcFs {
 public:
  explicit ProcFs(std::string root = "/") : root_(std::move(root)) {}
  const std::string& root() const noexcept { return root_; }
  // The whole file, or nullopt when it cannot be read. `path` is absolute ("/proc/stat").
  std::optional<std::string> read(const std::string& path) const;
  std::vector<std::string> list_dir(const std::string& path) const;

 private:
  std::string root_;
};

// Aggregate "cpu" line of /proc/stat, in clock ticks.
struct CpuTimes {
  std::uint64_t busy = 0;   // user+nice+system+irq+softirq+steal
  std::uint64_t total = 0;  // busy + idle + iowait
};
std::optional<CpuTimes> parse_cpu_times(const std::string& proc_stat);

// utime+stime of a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat line, in clock ticks.
std::optional<std::uint64_t> parse_task_cpu_ticks(const std::string& stat_line);
// cutime+cstime of a /proc/<pid>/stat line: the CPU of its children that exited and were reaped.
std::optional<std::uint64_t> parse_reaped_children_cpu_ticks(const std::string& stat_line);

// The name, state, parent, CPU and resident size of a /proc/<pid>/stat (or task stat) line.
struct TaskStat {
  std::string name;  // comm, as /proc/<pid>/comm says it (without its newline)
  char state = '?';  // R running, S sleeping, D in uninterruptible (I/O) wait, Z zombie, ...
  int ppid = 0;
  std::uint64_t cpu_ticks = 0;  // utime + stime
  std::uint64_t system_ticks = 0;  // stime: in the kernel on its behalf
  std::uint64_t faults = 0;        // minflt + majflt: page faults it took
  std::uint64_t rss_bytes = 0;
};
std::optional<TaskStat> parse_task_stat(const std::string& stat_line);

// The descendants of process `root` ("self" or a pid) breadth first, from every task's
// /proc/<pid>/task/<tid>/children (a child belongs to the thread that forked it); at most 256.
// `readable` (may be null) says whether the kernel offers those files at all
// (CONFIG_PROC_CHILDREN).
std::vector<int> descendant_pids(const ProcFs& fs, bool* readable = nullptr,
                                 const std::string& root = "self");
// The same through files kept open (a sampler's, sampler/proc_file_cache.h).
class ProcFileCache;
std::vector<int> descendant_pids(ProcFileCache& files, bool* readable = nullptr,
                                 const std::string& root = "self");

// CPU ticks of every descendant process of `root` so far: those alive (all their threads, and their
// own reaped children) and those `root` reaped (cutime+cstime of /proc/<root>/stat). Grows
// monotonically while the processes stay in the tree, so two readings bracket a window exactly,
// including workers that started and ended between samples. nullopt when /proc/self/stat is
// unreadable.
std::optional<std::uint64_t> descendants_cpu_ticks(const ProcFs& fs,
                                                   const std::string& root = "self");

struct MemInfo {
  std::uint64_t total_bytes = 0;
  std::uint64_t available_bytes = 0;
};
std::optional<MemInfo> parse_meminfo(const std::string& meminfo);

// VmRSS and VmHWM (peak) from /proc/self/status, in bytes.
struct ProcessMemory {
  std::uint64_t rss_bytes = 0;
  std::uint64_t rss_peak_bytes = 0;
};
std::optional<ProcessMemory> parse_process_status(const std::string& status);
// Whether a /proc/PID/status is a process in a PID namespace nested in another (its NSpid line
// names more than one PID): inside a container, where NVML's PIDs, the host's, are not its.
bool in_nested_pid_namespace(const std::string& status);

// /proc/<pid>/smaps_rollup (Linux 4.14+): Rss, Pss and the four Private_/Shared_ lines, in bytes.
std::optional<MemoryRollup> parse_smaps_rollup(const std::string& text);

int online_cpus(const ProcFs& fs);
// Whole block devices from /sys/block, without loop and ram devices.
std::vector<std::string> block_devices(const ProcFs& fs);
long clock_ticks_per_second() noexcept;

}  // namespace feedscope

namespace feedscope {

// Per-core lines "cpuN ..." of /proc/stat, in core order.
std::vector<CpuTimes> parse_core_times(const std::string& proc_stat);

// One whole block device of /proc/diskstats.
struct DiskCounters {
  std::string device;
  std::uint64_t sectors_read = 0;  // 512-byte units
  std::uint64_t io_time_ms = 0;    // time spent doing I/O
};
// Rows of `devices` only (whole disks from block_devices()); others are skipped.
std::vector<DiskCounters> parse_diskstats(const std::string& diskstats,
                                          const std::vector<std::string>& devices);

// read_bytes of /proc/self/io (bytes really fetched from storage).
std::optional<std::uint64_t> parse_io_read_bytes(const std::string& proc_io);

// syscr + syscw of /proc/<pid>/task/<tid>/io: the read and write family calls a task made.
std::optional<std::uint64_t> parse_io_syscalls(const std::string& proc_io);

// /proc/<pid>/task/<tid>/schedstat: "<on-cpu ns> <run-queue wait ns> <timeslices>". The second
// is the time the task was runnable but waited for a core (CONFIG_SCHED_INFO; a kernel without it
// has no file).
std::optional<std::uint64_t> parse_schedstat_run_delay_ns(const std::string& schedstat);

// What /proc/<pid>/environ (NUL-separated KEY=VALUE, the environment the process started with)
// says of the distributed job it is a rank of: every launcher's variables (sampler/rank_identity.h).
RankIdentity parse_distributed_env(const std::string& environ);

// /proc/pressure/<resource>: "some avg10=.. avg60=.. avg300=.. total=..", optional "full ...".
struct Pressure {
  double some_avg10 = 0;  // percent, as the kernel prints it
  std::uint64_t some_total_us = 0;
  std::optional<double> full_avg10;
};
std::optional<Pressure> parse_pressure(const std::string& text);

// /proc/loadavg's last field, "0.52 0.58 0.59 3/402 12345": the last pid the kernel gave out (to
// a process or a thread) in this pid namespace and those below it. It stands still while nothing
// forks: no process can have joined a tree.
std::optional<long> parse_loadavg_last_pid(const std::string& text);

}  // namespace feedscope
