#pragma once
// Samples CPU (system, per core, process, per thread), memory, disk I/O, pressure and GPUs on one
// background thread at a fixed rate, into a fixed-size ring, with running series for summaries.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sampler/gpu_source.h"
#include "sampler/log_histogram.h"
#include "sampler/proc_file_cache.h"
#include "sampler/proc_fs.h"
#include "sampler/thread_wait.h"
#include "sampler/utilization_sample.h"

namespace feedscope {

// mean / p95 / max of one series over the whole run; the p95 within LogHistogram's 0.79 %.
struct SeriesSummary {
  std::size_t count = 0;
  double mean = 0;
  double p95 = 0;
  double max = 0;
};

struct UtilizationSummary {
  std::size_t samples = 0;
  std::map<std::string, SeriesSummary> series;    // "cpu_process_ratio", "gpu0_util_ratio", ...
  std::map<std::string, double> thread_busy_mean;  // thread name -> mean busy ratio
  // source -> reason; a GPU reading NVML never gave is listed by its series-style name:
  // "gpu0_util_ratio" -> "nvmlDeviceGetUtilizationRates: status 3 (NOT_SUPPORTED)".
  std::map<std::string, std::string> unavailable;
};

// Thread-safe: sample() is for the sampling thread (or a test driving it by hand); the readers
// (latest, summary, recent) may be called from any thread while it runs.
class UtilizationSampler {
 public:
  struct Options {
    ProcFs fs;
    // The process sampled with its threads and descendants: 0 is this one; `feedscope watch`
    // names the program it started.
    int pid = 0;
    double hz = 10;               // samples per second; GPU readings at most 10 Hz
    // smaps_rollup of the process and each descendant at most this often: the kernel walks every
    // page table to answer it (milliseconds on a map of gigabytes), so a round is also never
    // sooner than 20 times its own CPU time after the last (5 % of a core at most). 0: never.
    double memory_hz = 2;
    // The share of one core smaps_rollup may take at most: a round is never sooner than its own
    // CPU time over this share after the last. `feedscope attach`, a sidecar for hours, asks less.
    double memory_cpu_share = 0.05;
    // A round of more processes than this takes memory_cpu_share times this many over their
    // number, a tenth of it at least: a big node's tree (8 ranks x 12 workers) is read less often,
    // not at more cost. 0: the share whatever the tree.
    std::size_t memory_share_processes = 0;
    std::size_t ring_capacity = 1024;
    std::unique_ptr<GpuSource> gpu;  // null: no GPU sampling ("not requested")
    // Names for thread ids (loader lanes); other threads keep their kernel name.
    std::function<std::map<int, std::string>()> thread_names;
    std::function<std::uint64_t()> pinned_bytes;
    // Called on the sampling thread with every sample (timeseries.csv, the metrics endpoint).
    std::function<void(const UtilizationSample&)> on_sample;
    // Called by sample() with each sample after the first: a pid to read instead from the next
    // sample on (its threads), or 0 to go on with the current one. `feedscope watch` follows a
    // launcher (a shell script that does not exec) to the program it runs. The descendants read
    // stay those of `pid` (every rank of a job), less the one followed.
    std::function<int(const UtilizationSample&)> retarget;
    // Looks per second at where the sampled process's main thread waits (sampler/thread_wait.h),
    // between the samples and at each; counted into each sample's main_thread_waits. 0: never.
    // Only for another process (pid > 0): a look costs tens of microseconds.
    double wait_probe_hz = 0;
    // After the first 10 s of looks, this many a second instead, wait_probe_hz at most (0: keep
    // wait_probe_hz): enough looks soon for a short run, fewer for one read for hours.
    double wait_probe_later_hz = 0;
  };

  // The share of a core a round of smaps_rollup over `processes` may take (Options'
  // memory_cpu_share and memory_share_processes).
  static double memory_round_share(const Options& options, std::size_t processes);

  explicit UtilizationSampler(Options options);
  ~UtilizationSampler();  // stops the thread
  UtilizationSampler(const UtilizationSampler&) = delete;
  UtilizationSampler& operator=(const UtilizationSampler&) = delete;

  // Reads every source at `now_ns` (passed in: tests control the clock), computes ratios against
  // the previous call, stores and returns the sample. The first call only sets the baseline of
  // the ratios.
  UtilizationSample sample(std::int64_t now_ns);

  void start();  // the background thread, at options.hz
  void stop();   // joins it; idempotent

  std::vector<UtilizationSample> recent() const;  // the ring, oldest first
  UtilizationSummary summary() const;

 private:
  struct Previous {
    std::int64_t time_ns = 0;
    std::optional<CpuTimes> system;
    std::vector<CpuTimes> cores;
    std::optional<std::uint64_t> process_ticks;
    std::map<int, std::uint64_t> thread_ticks;
    std::map<int, std::uint64_t> thread_system_ticks, thread_faults;  // by tid
    // Each thread's read and write calls, read where it was busy in the kernel: by tid.
    std::map<int, std::uint64_t> thread_syscalls;
    std::map<int, std::uint64_t> child_ticks;  // by pid
    std::map<int, std::uint64_t> child_main_ticks;  // a rank's main thread, by pid
    std::map<int, std::uint64_t> thread_run_delay_ns, child_run_delay_ns;  // schedstat's, by id
    std::map<int, std::uint64_t> child_read_bytes;  // io's read_bytes, by pid
    std::map<std::string, DiskCounters> disks;
  };
  void run();
  void record(const UtilizationSample& s);
  void note_unavailable(const std::string& source, const std::string& reason);
  void follow(int pid);  // read `pid` from the next sample on
  void look_at_main_thread();  // sampling thread: one look, into pending_waits_
  struct Reading;  // one sample()'s steps, in the .cc

  Options options_;
  // Sampling thread only: the files read at every sample, kept open from one to the next.
  ProcFileCache files_;
  int cpus_;
  int target_pid_;    // sampling thread only: Options::pid, or where retarget led; 0: this one
  std::string proc_;  // "self" or target_pid_, as in /proc/<proc_>
  std::vector<std::string> block_devices_;
  Previous previous_;              // sampling thread only
  std::int64_t last_gpu_ns_ = 0;   // sampling thread only
  std::int64_t next_rollup_ns_ = 0;  // sampling thread only: when smaps_rollup is due again
  std::vector<GpuSample> last_gpu_;
  std::map<int, std::string> kernel_names_;  // sampling thread only: comm by tid, taken once
  // Sampling thread only: cmdline by descendant pid, read once (its comm is taken from its stat
  // line every time: a torch 2.x worker renames itself after it starts).
  std::map<int, std::string> process_cmdlines_;
  std::map<int, RankIdentity> process_envs_;  // read once: the environment a process started with
  // Sampling thread only: descendants idle at their last readings (no CPU, not runnable), by pid:
  // how many readings in a row, the readings left out since the last one read, and how it stood
  // then (Reading::skip_idle).
  struct IdleChild {
    int streak = 0;
    int skipped = 0;
    ProcessCpu last;
  };
  std::map<int, IdleChild> idle_children_;
  // Sampling thread only: the descendants by the last walk of the tree, when that was, whether a
  // children file was readable then, and whether one of them has ended since; when the kernel's
  // last pid given out was last read, what it was, and whether it is to be believed.
  struct Descendants {
    std::vector<int> pids;
    std::int64_t walked_ns = 0;
    bool readable = false;
    bool ended = false;
    std::int64_t checked_ns = 0;
    std::optional<long> last_pid;
    bool last_pid_live = true;
  };
  Descendants descendants_;
  // Sampling thread only: when /proc/pressure was last read, and what it said.
  struct Pressures {
    std::int64_t read_ns = 0;
    std::optional<PressureSample> cpu, io, memory;
  };
  Pressures pressures_;
  // Sampling thread only: where the main thread waits, the looks since the last sample, the
  // descendants by the last sample ((pid, ppid)), and for each process looked at since, its own
  // among them, whose pipes count as a loader's.
  std::unique_ptr<ThreadWaitProbe> wait_probe_;
  MainThreadWaits pending_waits_;
  std::vector<std::pair<int, int>> probe_children_;
  std::map<int, std::vector<int>> probe_loaders_;
  // A job's other ranks (by the last sample), looked at in turn on every other look, and their looks.
  std::vector<int> probe_ranks_;
  std::size_t probe_turn_ = 0, rank_turn_ = 0;
  std::map<int, MainThreadWaits> pending_rank_waits_;

  // Below state is shared with reader threads, guarded by mutex_.
  mutable std::mutex mutex_;
  std::vector<UtilizationSample> ring_;
  std::size_t ring_next_ = 0;
  std::size_t total_samples_ = 0;
  // A run of days at 10 Hz must not keep every reading: a histogram per series instead.
  std::map<std::string, LogHistogram> series_;
  std::map<std::string, std::pair<double, std::size_t>> thread_busy_;
  std::map<std::string, std::string> unavailable_;
  // GPU readings by series-style name ("gpu0_util_ratio"): those read at least once, and the
  // first reason of those that failed; the summary lists the failed ones never read.
  std::set<std::string> gpu_readings_taken_;
  std::map<std::string, std::string> gpu_readings_failed_;

  std::mutex run_mutex_;
  std::condition_variable run_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace feedscope
