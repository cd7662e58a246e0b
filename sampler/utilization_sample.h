#pragma once
// One reading of every utilization source, taken by the sampling thread. Absent sources are
// empty optionals / empty vectors, each with a reason in UtilizationSampler::unavailable().
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace feedscope {

// Looks at a process's main thread over a window, counted by what it was doing: on a core,
// blocked on a loader's pipe (directly, or through a thread of its own that reads it), or blocked
// on anything else. sampler/thread_wait.h takes them.
struct MainThreadWaits {
  std::size_t looks = 0;  // readable looks
  std::size_t running = 0;
  std::size_t loader_queue = 0;
  std::size_t loader_thread = 0;
  std::size_t loading = 0;  // in torch.utils.data's code, by its Python stack (running or not)
  std::size_t other_wait = 0;
  // Blocked waiting for a child process to end (wait4, waitid: multiprocessing's Process.join):
  // a script that started its training processes and waits for them (Hogwild).
  std::size_t children = 0;
  std::size_t stack_looks = 0;  // looks that read its Python stack
  // Looks at the training thread busy with data: waiting for workers' batches, or loading itself.
  std::size_t on_loader() const { return loader_queue + loader_thread + loading; }
  MainThreadWaits& operator+=(const MainThreadWaits& o) {
    looks += o.looks;
    running += o.running;
    loader_queue += o.loader_queue;
    loader_thread += o.loader_thread;
    loading += o.loading;
    other_wait += o.other_wait;
    children += o.children;
    stack_looks += o.stack_looks;
    return *this;
  }
};

struct ThreadCpu {
  int tid = 0;
  std::string name;     // "worker 0", "training", or the kernel's comm for other threads
  double ratio = 0;     // busy share of one core since the previous sample, 0..1
  bool lane = false;    // named by a span lane: a loader worker or the training thread
  char state = '?';     // /proc state at the sample: R running, S sleeping, D waiting on I/O
  // Share of the time since the previous sample it was runnable but waited for a core (schedstat's
  // run-queue delay); none where the kernel has no schedstat.
  std::optional<double> run_wait = std::nullopt;
  // Of `ratio`, the share of one core it spent in the kernel since the previous sample.
  double kernel_ratio = 0;
  // Busy mostly in the kernel (kYieldKernelShare of its time, at least kYieldMinBusy of a core)
  // though it made no read or write call and took no page fault since the previous sample: it
  // gives its core away in sched_yield, as a BLAS or OpenMP pool does while it waits for work
  // (OpenBLAS's threads spin so for a while after each call). Its time is a core any other
  // thread may take.
  bool yielding = false;
};
inline constexpr double kYieldKernelShare = 0.75;
inline constexpr double kYieldMinBusy = 0.2;

// /proc/<pid>/smaps_rollup: a process's resident memory as the kernel accounts it, split into the
// pages only it maps (private) and those it shares with other processes (a forked worker's view of
// its parent's heap stays shared until one of them writes a page), and its proportional share.
struct MemoryRollup {
  std::uint64_t rss_bytes = 0;
  std::uint64_t pss_bytes = 0;
  std::uint64_t private_clean_bytes = 0;
  std::uint64_t private_dirty_bytes = 0;
  std::uint64_t shared_clean_bytes = 0;
  std::uint64_t shared_dirty_bytes = 0;
  std::uint64_t private_bytes() const { return private_clean_bytes + private_dirty_bytes; }
  std::uint64_t shared_bytes() const { return shared_clean_bytes + shared_dirty_bytes; }
};

// A descendant process (a PyTorch DataLoader's worker is one), all its threads together.
struct ProcessCpu {
  int pid = 0;
  std::string name;  // its comm: "pt_data_worker" under torch 2.x, "python3" under 1.13
  std::string cmdline;  // /proc/<pid>/cmdline, arguments joined by spaces
  double cores = 0;  // CPU since the previous sample, in cores (0..cpus)
  int ppid = 0;
  char state = '?';  // of its main thread at the sample
  std::uint64_t rss_bytes = 0;
  std::optional<std::uint64_t> read_bytes_total;  // /proc/<pid>/io read_bytes: from storage
  // Its main thread's run-queue wait, as ThreadCpu's (a loader worker works on its main thread).
  std::optional<double> run_wait = std::nullopt;
  // Its launcher's variables in the environment it started with (sampler/rank_identity.h).
  std::optional<int> rank = std::nullopt;
  std::optional<int> local_rank = std::nullopt;
  std::optional<int> world_size = std::nullopt;
  std::optional<int> node_rank = std::nullopt;
  std::string rank_source;  // RankIdentity::source: "torch", "slurm", ...
  std::vector<std::string> rank_notes;  // RankIdentity::notes
  bool master_env = false;
  std::string job;  // RankIdentity::job
  // A process of a torch.distributed job (RANK, or MASTER_* set): its main thread's busy share of
  // one core, where a rank's training loop runs (its other threads are intra-op pools, gloo's,
  // NCCL's). None for other processes, which are not read thread by thread.
  std::optional<double> main_thread_busy = std::nullopt;
  // Its smaps_rollup, on the readings that read it (UtilizationSampler::Options::memory_hz).
  std::optional<MemoryRollup> memory = std::nullopt;
};

struct DiskSample {
  std::string device;            // "vda", "nvme0n1"
  std::uint64_t read_bytes_total = 0;
  double read_bytes_per_s = 0;
  double busy_ratio = 0;         // io_time delta / wall delta, 0..1
};

struct PressureSample {          // /proc/pressure/<resource>, avg10 as a ratio 0..1
  double some_avg10 = 0;
  std::optional<double> full_avg10;  // cpu has no "full" line on older kernels
  std::uint64_t some_total_us = 0;
};

// A process with a CUDA context on a GPU, as NVML sees it.
struct GpuProcessSample {
  int pid = 0;
  std::optional<std::uint64_t> memory_used_bytes;  // none where NVML cannot tell (some MIG, WSL)
  // Its share of the SMs' time over GpuSample's sm_window; none where no window ended.
  std::optional<double> sm_util_ratio;
};

// Each reading is empty where its NVML call failed (NOT_SUPPORTED on a MIG instance or a vGPU) or
// is missing, with the reason in `unavailable`: not measured, which 0 would hide.
struct GpuSample {
  int index = 0;  // the CUDA index the process sees (cuda:N); see make_nvml_source
  // The MIG instance the readings are of, its UUID ("MIG-..."); empty: a whole GPU. A MIG
  // instance's readings that NVML gives only per GPU are empty, saying so in `unavailable`.
  std::string mig_instance;
  std::optional<double> util_ratio;  // NVML utilization.gpu / 100: a kernel ran in the period
  std::optional<double> memory_util_ratio;  // NVML utilization.memory / 100
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> memory_total_bytes;
  // The latest of NVML's ~20 ms PCIe windows, read off the sampling thread; none until the first.
  std::optional<double> pcie_tx_bytes_per_s;
  std::optional<double> pcie_rx_bytes_per_s;
  std::optional<double> sm_clock_mhz;
  std::optional<double> power_watts;
  std::vector<GpuProcessSample> processes;  // empty where NVML lists none or cannot
  // The stretch of NVML's clock (microseconds) the processes' SM shares cover, (begin, end]; both
  // 0 where this reading has no share. Readings are repeated, so a window is counted by its end.
  std::uint64_t sm_window_begin_us = 0;
  std::uint64_t sm_window_end_us = 0;
  // Why a reading is empty: its name as above ("util_ratio", "process_sm_util_ratio" for the
  // processes' shares) -> the call and its status, "nvmlDeviceGetUtilizationRates: status 3
  // (NOT_SUPPORTED)". A reading still pending (the first PCIe window) has none.
  std::map<std::string, std::string> unavailable;
};

struct UtilizationSample {
  std::int64_t time_ns = 0;
  int pid = 0;  // the process whose threads and descendants were read; 0: the sampler's own
  std::optional<double> cpu_system_ratio;  // all cores, 0..1
  std::vector<double> cpu_core_ratio;      // per core
  std::optional<double> cpu_process_ratio; // process CPU / (wall x cpus), 0..1
  std::vector<ThreadCpu> threads;
  std::vector<ProcessCpu> children;        // descendant processes seen in two samples in a row
  std::optional<std::uint64_t> memory_available_bytes;
  std::optional<std::uint64_t> rss_bytes;
  std::optional<std::uint64_t> rss_peak_bytes;
  // The sampled process's smaps_rollup, on the readings that read it (its descendants' are theirs).
  std::optional<MemoryRollup> memory;
  std::uint64_t pinned_bytes = 0;          // from the slab pool, set by the caller
  std::vector<DiskSample> disks;
  std::optional<std::uint64_t> process_read_bytes_total;  // /proc/<process>/io read_bytes
  std::optional<PressureSample> cpu_pressure;
  std::optional<PressureSample> io_pressure;
  std::optional<PressureSample> memory_pressure;
  std::vector<GpuSample> gpus;
  // Where the sampled process's main thread was at each look since the previous sample
  // (sampler/thread_wait.h): a watched program's; none where it was not looked at.
  std::optional<MainThreadWaits> main_thread_waits;
  // The same of the job's other ranks (children with RANK or MASTER_* in their environment), by
  // pid: they share the looks with the process above, which gets every other one.
  std::map<int, MainThreadWaits> rank_main_thread_waits;
};

}  // namespace feedscope
