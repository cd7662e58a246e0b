#pragma once
// What `feedscope watch` sees of a program it did not write: the utilization samples of its
// process tree (sampler/utilization_sampler.h with Options::pid), digested into roles over the
// run. The trainer is the process watch started, or, where that is a launcher that stays as the
// parent (a shell script that does not `exec`, timeout, torchrun), the program it runs: the digest
// asks the sampler to follow the launcher's busiest child, back to the launcher when that child
// ends, and the trainer is the followed process that took the most CPU (a script's
// `nvidia-smi; python train.py` follows both and keeps python). The trainer's main thread runs the
// training loop (Python's main thread, or a libtorch main()); its other threads are intra-op
// pools, a pin-memory thread and the like. Loader workers are the descendant processes a DataLoader forks or spawns: torch
// 2.x names them pt_data_worker, torch 1.13 does not, so parentage and the command line decide
// alone (a forked worker keeps its parent's command line; a spawned one runs
// multiprocessing.spawn). Other descendants (multiprocessing's resource tracker, a forkserver, a
// shell) are "other".
#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "profiler/worker_churn.h"
#include "sampler/rank_identity.h"
#include "sampler/utilization_sample.h"

namespace feedscope {

// A rank is one process of a distributed job (a launcher's rank in its environment,
// sampler/rank_identity.h, or a torch.multiprocessing.spawn child of a job that set
// MASTER_ADDR/MASTER_PORT). A process that started ranks of its own is their launcher, whatever
// its environment says (a torchrun that srun started as one of its tasks).
enum class ProcessRole : std::uint8_t { trainer, loader_worker, launcher, rank, other };
const char* to_string(ProcessRole role);

// Whether a process of this comm starts the real program as its child and waits for it: shells,
// and wrappers that fork rather than exec (timeout, nohup's shell, torchrun, conda run, srun ...).
bool is_launcher(const std::string& name);

// Role of descendant `p` of the trainer, whose comm is `trainer_name`. `parent_is_rank`, with its
// RANK in `parent_rank` and its comm in `parent_name`: p's parent is a rank (whose DataLoader
// workers inherit its environment), the trainer or another rank of the job.
ProcessRole classify_descendant(const ProcessCpu& p, int trainer_pid, const std::string& trainer_name,
                                bool parent_is_rank = false, std::optional<int> parent_rank = std::nullopt,
                                const std::string& parent_name = "");

// A process's memory over its smaps_rollup readings (sampler/utilization_sample.h's MemoryRollup).
// The rates are least-squares slopes over its readings after its start-up (the first third of its
// life; the trainer's from its first loader worker on, its data built by then; up to its peak where
// it fell 5 % below it by its end, a teardown), none with fewer than 4 readings or 2 s: a forked worker whose private memory rises as its shared falls is copying
// pages of its parent's that it reads.
struct MemoryTrend {
  std::uint64_t private_bytes = 0;  // at its last reading
  std::uint64_t shared_bytes = 0;
  std::uint64_t pss_bytes = 0;
  std::uint64_t private_peak_bytes = 0;
  std::size_t readings = 0;
  double window_s = 0;  // the stretch the rates cover
  std::optional<double> private_bytes_per_s;
  std::optional<double> shared_bytes_per_s;
  // Its private memory grew in both halves of the window, each at a third of the whole's rate or
  // more: a trend, not a step at start-up.
  bool steady = false;
  double watched_s = 0;  // from its first reading to its last, start-up included
  // Its private memory's growth levels off (profiler/growth_shape.h): warm-up, the allocator's and
  // the framework's, grows fast and stops. Where it does, rise_s into the window, by rise_bytes.
  bool levels_off = false;
  double rise_s = 0;
  double rise_bytes = 0;
};

// The tree's memory over the run, by role: each a mean of `bucket_s` seconds of smaps_rollup
// readings (at most kTimelineBuckets; NaN for a bucket without one), and the machine's MemAvailable.
struct TreeMemory {
  double rollup_period_s = 0;  // the mean interval of the smaps_rollup readings
  std::size_t rollup_readings = 0;
  std::uint64_t available_last_bytes = 0;  // MemAvailable: at the last reading, and at its lowest
  std::uint64_t available_min_bytes = 0;
  std::uint64_t workers_private_peak_bytes = 0;  // the loader workers' private together, at most
  double bucket_s = 0;
  std::vector<double> trainer_private_bytes;  // the trainer (the sampled process) and the ranks
  std::vector<double> workers_private_bytes;  // the loader workers together
  std::vector<double> workers_shared_bytes;
  std::vector<double> other_private_bytes;    // the other descendants together
  std::vector<double> available_bytes;
};

// One process over the samples it was seen in.
struct WatchedProcess {
  int pid = 0;
  int ppid = 0;
  std::string name;
  ProcessRole role = ProcessRole::other;
  std::size_t samples = 0;       // readings it was in
  double cpu_cores_mean = 0;     // over those readings
  double cpu_core_seconds = 0;   // CPU it took while watched
  double io_wait_share = 0;      // share of its readings in uninterruptible (D) wait
  std::uint64_t rss_peak_bytes = 0;
  std::uint64_t read_bytes = 0;  // from storage while watched (/proc/<pid>/io read_bytes growth)
  // Share of its readings' time its main thread was ready to run but waited for a core
  // (schedstat's run-queue delay); none where the kernel does not keep it.
  std::optional<double> run_wait_share;
  std::optional<int> rank;  // its rank, where a launcher's variables name one
  std::optional<int> local_rank;
  std::optional<int> node_rank;  // GROUP_RANK / NODE_RANK / SLURM_NODEID: which machine of the job
  std::string rank_source;       // the launcher whose variables named it (RankIdentity::source)
  // A rank's main thread (where its training loop runs), mean busy share of one core; none for
  // processes not read thread by thread.
  std::optional<double> main_thread_busy;
  // When it was first and last read, seconds after the first reading of the tree.
  double first_seen_s = 0;
  double last_seen_s = 0;
  // NVML's view, where it has a CUDA context: GPU memory at most, and its SM share over the time
  // NVML's samples covered.
  std::uint64_t gpu_memory_peak_bytes = 0;
  std::optional<double> gpu_sm_util;
  std::optional<MemoryTrend> memory;  // none where smaps_rollup was never read for it
};

struct ProcessTreeSummary {
  int trainer_pid = 0;
  std::string trainer_name;
  std::size_t samples = 0;
  double sampled_s = 0;  // from the first reading to the last
  // The trainer's main thread: mean busy share of one core, and share of readings in D wait.
  double main_thread_busy = 0;
  double main_thread_io_wait = 0;
  // Share of the time the main thread was runnable but had no core (schedstat); none unmeasured.
  std::optional<double> main_thread_run_wait;
  // Where the main thread was at the looks taken while its loader workers were alive, or at every
  // look where it had none (sampler/thread_wait.h): those blocked on the workers' pipe, directly or
  // through pin_memory's thread, or in torch.utils.data's code by its Python stack, are its time
  // for data. None where it was not looked at.
  std::optional<MainThreadWaits> main_thread_waits;
  // Mean cores the trainer's other threads took together, and the busiest one by name.
  double other_threads_cores = 0;
  // Of other_threads_cores, those its threads spent giving their core away in sched_yield
  // (ThreadCpu::yielding: a BLAS or OpenMP pool spinning for work): cores another thread could
  // have had. 0 where none was seen so, or the trainer was not read thread by thread.
  double yielding_threads_cores = 0;
  // The cores its other threads took at work: less those that yielded their core.
  double working_other_threads_cores() const {
    return std::max(0.0, other_threads_cores - yielding_threads_cores);
  }
  std::string busiest_thread;
  double busiest_thread_busy = 0;
  double trainer_cores = 0;  // the whole trainer process, mean cores
  // Loader workers: the most alive at once, their mean cores together while any is alive, and
  // the mean busy share of a worker over every reading of every worker (a DataLoader without
  // persistent_workers starts new ones each epoch: short epochs give workers of one reading).
  int workers = 0;
  double workers_cores = 0;
  double worker_busy = 0;
  double worker_busy_max = 0;
  double workers_io_wait = 0;  // share of worker readings in D wait
  // A worker's mean share of time waiting for a core: with it, busy + waiting is what a worker
  // would take of a core it had to itself. None where not measured.
  std::optional<double> worker_run_wait;
  double other_processes_cores = 0;
  // NVML: whether any of its processes had a CUDA context, their GPU memory together at most, and
  // the trainer's mean SM share (where the driver samples it).
  bool on_gpu = false;
  std::uint64_t gpu_memory_peak_bytes = 0;
  std::optional<double> trainer_gpu_sm_util;
  // Why the tree's GPU share is not measured though NVML listed processes on a GPU, none of them
  // the tree's: NVML names them by the host's PIDs, and feedscope runs in a PID namespace of its
  // own (a container). Empty otherwise.
  std::string gpu_share_unmeasured;
  // Bytes the whole tree fetched from storage per second (page-cache hits are not in it).
  std::optional<double> storage_read_bytes_per_s;
  // Training processes: 1, or the N a script started and waits for (torch.multiprocessing's
  // Hogwild: processes that share one model and each run the step), role `trainer` each; the one
  // read thread by thread is trainer_pid.
  int trainers = 1;
  // A torch.distributed job: the ranks seen, and the trainer's rank. The trainer is the busiest
  // rank when it was followed, read thread by thread; every rank is read as a process with its
  // main thread and its own workers for the whole run (ProcessTreeDigest::rank_views).
  int ranks = 0;
  std::optional<int> trainer_rank;
  std::optional<int> world_size;  // WORLD_SIZE of the ranks' environment
  // A rank's view: its loader workers' cores and its main thread's busy share over the run, the
  // mean of each `timeline_bucket_s` seconds from the first reading (at most kTimelineBuckets);
  // and where its Session handed live windows, its data stall in each (nullopt: no window ended
  // in that bucket; empty: no Session).
  double timeline_bucket_s = 0;
  std::vector<double> timeline_workers_cores;
  std::vector<double> timeline_main_busy;
  std::vector<std::optional<double>> timeline_data_stall;
  std::string job;                // RankIdentity::job: MASTER_ADDR:MASTER_PORT rdzv=RUN_ID ...
  // The ranks' launchers' variables that disagree, and which were used (RankIdentity::notes).
  std::vector<std::string> rank_notes;
  std::optional<TreeMemory> memory;  // none where neither smaps_rollup nor MemAvailable was read
  // The trainer's loader workers started again and again (profiler/worker_churn.h); none where
  // none was seen start.
  std::optional<WorkerChurn> worker_churn;
  std::vector<WatchedProcess> processes;  // the trainer first, then by pid
};

inline constexpr std::size_t kTimelineBuckets = 240;
inline constexpr double kLiveStallWindowS = 5;
inline constexpr std::size_t kLiveStallMinLooks = 50;
// A process whose looks find it waiting for its children this share of the time or more, over 25
// looks or more, started its training processes and waits for them.
inline constexpr double kWaitsOnChildrenShare = 0.6;
inline constexpr std::size_t kWaitsOnChildrenLooks = 25;

// One rank as the latest readings saw it, each figure smoothed over about a second (a reading is
// a tenth of one, and a thread at 10 % of a core takes one clock tick in it or none): the live
// per-rank series of `watch --metrics-addr`.
struct RankReading {
  int rank = 0;
  int pid = 0;
  double cpu_cores = 0;
  std::optional<double> main_thread_busy;
  int workers = 0;
  double workers_cores = 0;
  // NVML's view of the rank's own CUDA context: its share of the SMs' time over the latest window
  // the driver sampled (held until the next one), and its GPU memory; none where NVML did not
  // list the process or could not tell.
  std::optional<double> gpu_sm_util;
  std::optional<std::uint64_t> gpu_memory_bytes;
};

// Thread-safe: add() on the sampling thread, summary() from any thread.
class ProcessTreeDigest {
 public:
  struct MemoryPoint {  // one smaps_rollup reading of a process, for its trend
    double t_s = 0;
    double private_bytes = 0, shared_bytes = 0, pss_bytes = 0;
  };
  // `started_pid`: the process watch started; `parent_pid`: who started it (the watcher);
  // `started`: the rank its environment names (a task srun or mpirun started under watch), if any.
  ProcessTreeDigest(int started_pid, int parent_pid, RankIdentity started = {})
      : started_pid_(started_pid), parent_pid_(parent_pid), started_(std::move(started)) {}
  // A reading of a UtilizationSampler whose Options::pid is the started process (a sample's pid
  // 0 stands for it). Returns the pid the sampler should read from the next sample on
  // (UtilizationSampler::Options::retarget), or 0 to go on with the same one.
  int add(const UtilizationSample& sample);
  ProcessTreeSummary summary() const;
  // A torch.distributed job: the tree as each rank sees it, the rank as the trainer with its own
  // workers (its threads read where it was followed, its main thread alone where not), by pid.
  std::vector<ProcessTreeSummary> rank_views() const;
  // The ranks (with a RANK) in the latest reading.
  std::vector<RankReading> latest_ranks() const;
  // The started program launches ranks (torchrun, mpirun): until they start there is no rank,
  // rather than the launcher standing in as rank 0 (the second machine's ranks are 2 and 3).
  void launches_ranks() {
    const std::lock_guard lock(mutex_);
    launches_ranks_ = true;
  }
  // The training thread's time for data over the last kLiveStallWindowS seconds of looks (the
  // live feedscope_data_stall_ratio of watch and attach); none under kLiveStallMinLooks of them.
  std::optional<double> latest_data_stall() const;
  // A rank's Session's window of its loop (exporters/watch_channel.h's LiveWindow, handed about
  // once a second): its wait for data over its wall time, for the rank's data stall over time.
  // `end_ns` is on the readings' clock (CLOCK_MONOTONIC); a window read again (the same end) or
  // ending before the first reading counts for nothing.
  void add_live_window(int pid, std::int64_t end_ns, double wall_s, double wait_s);

 private:
  struct Thread {
    std::string name;
    double busy_sum = 0;
  };
  // A process read as the sampled one (the started process, or one followed from a launcher):
  // its threads. The trainer is the one of these that took the most CPU.
  struct Sampled {
    std::string name;
    std::size_t readings = 0;
    double main_busy_sum = 0;
    std::size_t main_io_wait = 0, main_samples = 0;
    double other_threads_sum = 0;
    double yielding_sum = 0;  // of that, the readings where a thread gave its core away
    std::map<int, Thread> threads;  // its other threads, by tid
    MainThreadWaits waits;  // the looks at its main thread while its loader workers were alive
    MainThreadWaits waits_all;  // every look at it
  };
  struct Accumulated {
    WatchedProcess process;
    bool multiprocessing_helper = false;  // its command line runs multiprocessing's own code
    // A rank's main thread looked at from outside (UtilizationSample::rank_main_thread_waits): the
    // looks while its own loader workers were alive, and all of them.
    MainThreadWaits waits, waits_all;
    std::string job;
    std::optional<int> world_size;
    std::vector<std::string> rank_notes;
    double main_busy_sum = 0;
    std::size_t main_busy_readings = 0;
    double cores_sum = 0;
    std::size_t io_wait_samples = 0;
    double run_wait_sum = 0;
    std::size_t run_wait_readings = 0;
    std::optional<std::uint64_t> first_read, last_read;
    double sm_sum = 0;      // SM share x seconds of NVML's windows
    double sm_seconds = 0;  // the windows' length
    std::vector<MemoryPoint> memory;  // its smaps_rollup readings; pairs merge past 256
    std::uint64_t private_peak = 0;
  };
  // Loader workers of one parent (a rank, or the trainer): a rank's view counts its own.
  struct Workers {
    int max_alive = 0;
    double cores_sum = 0;        // over readings with one alive
    std::size_t alive_readings = 0;
    double busy_sum = 0;         // min(cores, 1) over every worker reading
    std::size_t readings = 0;
    double run_wait_sum = 0;
    std::size_t run_wait_readings = 0;
  };
  ProcessTreeSummary view(int trainer) const;  // with mutex_ held
  // A process's name: as read thread by thread where it was, else as a descendant; empty if unseen.
  std::string name_of(int pid) const;
  struct View;     // one view()'s steps, in the .cc
  struct Reading;  // one add()'s steps, in the .cc

  mutable std::mutex mutex_;
  int started_pid_;
  int parent_pid_;
  RankIdentity started_;
  bool launches_ranks_ = false;
  std::int64_t first_ns_ = 0, last_ns_ = 0, previous_ns_ = 0;
  std::size_t samples_ = 0;
  std::map<int, Sampled> sampled_;  // by pid
  double workers_cores_sum_ = 0, other_processes_sum_ = 0;
  std::size_t worker_samples_ = 0;  // readings with a loader worker alive
  double worker_busy_sum_ = 0;       // min(cores, 1) over every worker reading
  std::size_t worker_readings_ = 0;
  double worker_run_wait_sum_ = 0;
  std::size_t worker_run_wait_readings_ = 0;
  std::uint64_t tree_gpu_memory_peak_ = 0;
  std::map<int, std::uint64_t> sm_counted_until_us_;  // by GPU index: the newest window's end
  bool on_gpu_ = false;
  bool gpu_processes_listed_ = false;  // NVML listed a process on some GPU, the tree's or not
  int workers_max_ = 0;
  std::map<int, Accumulated> processes_;
  std::map<int, Workers> workers_by_parent_;
  std::map<int, WorkerChurnTracker> churn_by_parent_;  // the sampled process's, and each rank's
  std::map<int, RankReading> latest_ranks_;  // by pid: the ranks in the latest reading
  // A rank's readings over time, summed per bucket; buckets double in length to stay few.
  struct Timeline {
    struct Bucket {
      double workers_sum = 0, main_sum = 0;
      std::size_t readings = 0;
      double wait_s = 0, wall_s = 0;  // the live windows that ended in it
      void merge(const Bucket& b);
    };
    double bucket_s = 1;
    std::vector<Bucket> buckets;
    std::int64_t last_window_end_ns = 0;
    // The bucket of t_s seconds after the first reading: past kTimelineBuckets, pairs of buckets
    // become one first.
    Bucket& at(double t_s);
  };
  std::map<int, Timeline> timelines_;  // by rank pid
  std::deque<std::pair<std::int64_t, MainThreadWaits>> recent_waits_;  // the sampled one's, by time
  // Processes whose main thread waits for its children to end (multiprocessing's join): their
  // children that look like loader workers (forked copies) are training processes (Hogwild).
  std::set<int> waiting_parents_;
  // The tree's memory by role over time, summed per bucket as Timeline's.
  struct MemoryBucket {
    double trainer = 0, workers = 0, workers_shared = 0, other = 0;
    std::size_t readings = 0;  // smaps_rollup readings
    double available = 0;
    std::size_t available_readings = 0;
    void merge(const MemoryBucket& b);
  };
  std::vector<MemoryBucket> memory_buckets_;
  double memory_bucket_s_ = 1;
  std::size_t rollup_readings_ = 0;
  std::int64_t first_rollup_ns_ = 0, last_rollup_ns_ = 0;
  std::optional<std::uint64_t> available_last_, available_min_;
  std::uint64_t workers_private_peak_ = 0;
  double tree_cores_sum_ = 0;  // the sampled process and every descendant, over samples
  std::set<int> rank_pids_;        // processes of a distributed job, one per rank
  // A rank whose child is a rank of its own is their launcher from then on, not a rank.
  void demote_to_launcher(int pid);
  std::set<int> launcher_pids_;    // processes that started ranks
};

}  // namespace feedscope
