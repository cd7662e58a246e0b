#pragma once
// What a tuned BatchLoader measures for its AutoTuner (loader/autotune.h): the training thread's
// waits, window by window, and the machine's idle cores, cores and memory. The loader cannot use
// the sampler module (DESIGN.md's arrows), so the few /proc readings it needs live here; each
// takes its text as an argument where a test wants to give it.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "loader/autotune.h"

namespace feedscope::detail {

// Cores this process may run on (its affinity mask), at least 1.
int usable_cores();
// MemAvailable of /proc/meminfo; nullopt where unreadable.
std::optional<std::uint64_t> available_memory_bytes();
// This thread's CPU time.
std::int64_t thread_cpu_ns() noexcept;
// This thread's time ready to run but waiting for a core (schedstat's run_delay); 0 where the
// kernel does not say.
std::int64_t thread_queued_ns() noexcept;

// What the workers did over a window, summed over them.
struct WorkerTimes {
  double busy_s = 0;    // wall time loading
  double cpu_s = 0;     // on a CPU
  double queued_s = 0;  // waiting for one
};

// Idle cores of the machine between two readings of /proc/stat (idle + iowait ticks over all
// ticks, times the cpuN lines). Not thread-safe.
class IdleCoreMeter {
 public:
  // From the live /proc/stat; nullopt on the first call and where unreadable.
  std::optional<double> read();
  // From a /proc/stat text: tests pass fixtures.
  std::optional<double> read(std::string_view proc_stat);

 private:
  std::uint64_t idle_ = 0;
  std::uint64_t total_ = 0;
  bool primed_ = false;
};

// One window of the training thread's waits. Not thread-safe: the consumer thread.
class WaitWindow {
 public:
  void reset(std::int64_t begin_ns);
  void add(std::int64_t wait_ns) {
    waits_.push_back(wait_ns);
    wait_ns_ += wait_ns;
  }
  std::int64_t begin_ns() const { return begin_ns_; }
  std::int64_t batches() const { return static_cast<std::int64_t>(waits_.size()); }
  // The window [begin, end_ns) with the workers' time over it, as the tuner takes it.
  TunerWindow close(std::int64_t end_ns, const WorkerTimes& workers,
                    std::optional<double> idle_cores) const;

 private:
  std::int64_t begin_ns_ = 0;
  std::int64_t wait_ns_ = 0;
  std::vector<std::int64_t> waits_;
};

}  // namespace feedscope::detail
