#include "profiler/process_tree.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <set>

#include "profiler/growth_shape.h"
#include "sampler/proc_fs.h"

namespace feedscope {

const char* to_string(ProcessRole role) {
  switch (role) {
    case ProcessRole::trainer: return "trainer";
    case ProcessRole::loader_worker: return "loader_worker";
    case ProcessRole::launcher: return "launcher";
    case ProcessRole::rank: return "rank";
    case ProcessRole::other: return "other";
  }
  return "other";
}

bool is_launcher(const std::string& name) {
  static const std::set<std::string, std::less<>> launchers = {
      "sh",      "bash",   "dash",     "zsh",    "ksh",     "mksh",   "fish",    "tcsh",   "csh",
      "timeout", "nohup",  "time",     "xargs",  "make",    "sudo",   "su",      "runuser", "setsid",
      "flock",   "script", "unbuffer", "srun",   "mpirun",  "mpiexec", "torchrun", "conda", "uv",
      "poetry",  "pipenv", "hatch",    "pdm",    "accelerate", "deepspeed"};
  return launchers.contains(name);
}

namespace {
// A command line that runs multiprocessing's own code: a spawned worker, the resource tracker, a
// forkserver; never a fork of the script itself.
bool runs_multiprocessing(const std::string& cmdline) {
  return cmdline.find("multiprocessing.") != std::string::npos;
}

// One of multiprocessing's own servers (the resource tracker, the fork server, Python 3.7's
// semaphore tracker): it runs none of the program's work, so it is never the child to follow.
bool multiprocessing_server(const std::string& cmdline) {
  return cmdline.find("multiprocessing.resource_tracker") != std::string::npos ||
         cmdline.find("multiprocessing.forkserver") != std::string::npos ||
         cmdline.find("multiprocessing.semaphore_tracker") != std::string::npos;
}
}  // namespace

ProcessRole classify_descendant(const ProcessCpu& p, int trainer_pid, const std::string& trainer_name,
                                bool parent_is_rank, std::optional<int> parent_rank,
                                const std::string& parent_name) {
  const auto starts = [&](const char* prefix) { return p.name.rfind(prefix, 0) == 0; };
  const auto runs = [&](const char* text) { return p.cmdline.find(text) != std::string::npos; };
  // A rank's own workers inherit its RANK; a rank's parent (a launcher) has none or another.
  if (p.rank && !(parent_is_rank && p.rank == parent_rank)) return ProcessRole::rank;
  // torch.multiprocessing.spawn: fresh interpreters, children of the job's script, which set
  // MASTER_ADDR/MASTER_PORT before starting them (a DataLoader's spawned workers are children of
  // a rank, or of a program without those variables).
  if (!p.rank && !parent_is_rank && p.master_env && p.ppid == trainer_pid &&
      runs("multiprocessing.spawn"))
    return ProcessRole::rank;
  if (starts("pt_data_worker") || starts("pt_multiprocess")) return ProcessRole::loader_worker;
  // multiprocessing's spawn and forkserver start methods run a fresh interpreter per worker.
  if (runs("multiprocessing.spawn") || runs("--multiprocessing-fork")) return ProcessRole::loader_worker;
  // The fork start method (Linux's default): a copy of the trainer, same name and command line;
  // multiprocessing's own helpers run `-c "from multiprocessing.<module> import main"`.
  if (p.ppid == trainer_pid && p.name == trainer_name && !runs_multiprocessing(p.cmdline))
    return ProcessRole::loader_worker;
  // The same, of another rank of the job (every rank is read, not only the trainer).
  if (parent_is_rank && !parent_name.empty() && p.name == parent_name && !runs_multiprocessing(p.cmdline))
    return ProcessRole::loader_worker;
  return ProcessRole::other;
}

// One add(): the reading's steps and what they hand on to each other, with mutex_ held.
struct ProcessTreeDigest::Reading {
  Reading(ProcessTreeDigest& digest, const UtilizationSample& sample, int sampled_pid);
  void read_threads();
  void read_self();
  void read_children();
  void tally_descendants();
  void read_ranks();
  void read_gpus();
  void read_memory();
  void read_main_thread_waits();
  void read_rank_waits();
  void read_worker_churn();
  bool own_workers_alive(int parent) const;
  void note_waiting_parent();
  int next_pid();

 private:
  void account(Accumulated& a, double cores, char state, std::uint64_t rss,
               std::optional<std::uint64_t> read, std::optional<double> run_wait,
               std::optional<double> main_thread, const std::optional<MemoryRollup>& memory) const;
  void read_child(const ProcessCpu& p);
  // `as_rank`: a process that is no rank, shown as this one (the single training process).
  void read_rank(std::map<int, RankReading>& latest, int rank_pid, double cores,
                 std::optional<double> main, std::optional<int> as_rank = std::nullopt);

  ProcessTreeDigest& d;
  const UtilizationSample& s;
  const int pid;
  const double dt;
  const double cpus;
  Sampled& me;
  // The first reading of a process just followed has no ratios yet: nothing of it to count.
  const bool baseline_only;
  double since_first_s = 0;
  // The sampled process's main thread, and its cores.
  char main_state = '?';
  std::optional<double> main_run_wait, main_busy;
  double self_cores = 0;
  // Its descendants.
  double workers = 0, others = 0, tree = 0;
  std::map<int, std::pair<int, double>> alive_by_parent;  // workers alive, their cores
  std::map<int, int> started_by_parent;  // workers seen for the first time
  int alive = 0;
  int busiest_child = 0;
  double busiest_cores = -1;
  int busiest_rank = 0;
  double busiest_rank_cores = -1;
  // Private and shared memory by role, where this reading read smaps_rollup.
  bool rollup = false;
  double trainer_private = 0, workers_private = 0, workers_shared = 0, others_private = 0;
};

namespace {

constexpr std::size_t kMemoryPoints = 256;

// The bucket of t_s seconds after the first reading: past kTimelineBuckets, pairs of buckets
// become one first.
template <class Bucket>
Bucket& bucket_at(std::vector<Bucket>& buckets, double& bucket_s, double t_s) {
  auto index = static_cast<std::size_t>(std::max(t_s, 0.0) / bucket_s);
  while (index >= kTimelineBuckets) {  // halve the resolution: pairs of buckets become one
    std::vector<Bucket> halved((buckets.size() + 1) / 2);
    for (std::size_t i = 0; i < buckets.size(); ++i) halved[i / 2].merge(buckets[i]);
    buckets = std::move(halved);
    bucket_s *= 2;
    index = static_cast<std::size_t>(std::max(t_s, 0.0) / bucket_s);
  }
  if (index >= buckets.size()) buckets.resize(index + 1);
  return buckets[index];
}

// Seconds since the previous reading (0 for the first), the digest's clock moved on to `now_ns`.
double advance_clock(std::int64_t now_ns, std::int64_t& first_ns, std::int64_t& last_ns,
                     std::int64_t& previous_ns, std::size_t& samples) {
  const double dt = samples > 0 ? static_cast<double>(now_ns - previous_ns) / 1e9 : 0;
  previous_ns = now_ns;
  if (samples == 0) first_ns = now_ns;
  last_ns = now_ns;
  ++samples;
  return dt;
}

}  // namespace

ProcessTreeDigest::Reading::Reading(ProcessTreeDigest& digest, const UtilizationSample& sample,
                                    int sampled_pid)
    : d(digest),
      s(sample),
      pid(sampled_pid),
      dt(advance_clock(s.time_ns, d.first_ns_, d.last_ns_, d.previous_ns_, d.samples_)),
      cpus(static_cast<double>(std::max<std::size_t>(s.cpu_core_ratio.size(), 1))),
      me(d.sampled_[pid]),
      baseline_only(pid != d.started_pid_ && !s.cpu_process_ratio) {
  if (!baseline_only) ++me.readings;
}

void ProcessTreeDigest::Reading::read_threads() {
  double other_threads = 0;
  for (const ThreadCpu& t : s.threads) {
    if (t.tid == pid) {
      if (me.name.empty()) me.name = t.name;
      main_state = t.state;
      main_run_wait = t.run_wait;
      main_busy = t.ratio;
      me.main_busy_sum += t.ratio;
      me.main_io_wait += t.state == 'D';
      ++me.main_samples;
      continue;
    }
    other_threads += t.ratio;
    if (t.yielding) me.yielding_sum += t.ratio;
    Thread& thread = me.threads[t.tid];
    thread.name = t.name;
    thread.busy_sum += t.ratio;
  }
  me.other_threads_sum += other_threads;
  since_first_s = static_cast<double>(s.time_ns - d.first_ns_) / 1e9;
}

void ProcessTreeDigest::Reading::account(Accumulated& a, double cores, char state,
                                         std::uint64_t rss, std::optional<std::uint64_t> read,
                                         std::optional<double> run_wait,
                                         std::optional<double> main_thread,
                                         const std::optional<MemoryRollup>& memory) const {
  if (memory) {
    if (a.memory.size() >= kMemoryPoints) {  // pairs of readings become one: a long run stays small
      std::vector<MemoryPoint> halved(a.memory.size() / 2);
      for (std::size_t i = 0; i < halved.size(); ++i) {
        const auto& x = a.memory[2 * i];
        const auto& y = a.memory[2 * i + 1];
        halved[i] = {(x.t_s + y.t_s) / 2, (x.private_bytes + y.private_bytes) / 2,
                     (x.shared_bytes + y.shared_bytes) / 2, (x.pss_bytes + y.pss_bytes) / 2};
      }
      a.memory = std::move(halved);
    }
    a.memory.push_back({since_first_s, static_cast<double>(memory->private_bytes()),
                        static_cast<double>(memory->shared_bytes()),
                        static_cast<double>(memory->pss_bytes)});
    a.private_peak = std::max(a.private_peak, memory->private_bytes());
  }
  if (a.process.samples == 0) a.process.first_seen_s = since_first_s;
  a.process.last_seen_s = since_first_s;
  ++a.process.samples;
  if (main_thread) {
    a.main_busy_sum += *main_thread;
    ++a.main_busy_readings;
  }
  if (run_wait) {
    a.run_wait_sum += *run_wait;
    ++a.run_wait_readings;
  }
  a.cores_sum += cores;
  a.process.cpu_core_seconds += cores * dt;
  a.io_wait_samples += state == 'D';
  a.process.rss_peak_bytes = std::max(a.process.rss_peak_bytes, rss);
  if (read) {
    if (!a.first_read) a.first_read = read;
    a.last_read = read;
  }
}

void ProcessTreeDigest::Reading::read_self() {
  Accumulated& self = d.processes_[pid];
  // A task that srun or mpirun started under watch (`srun feedscope watch -- python3 train.py`):
  // the started process is the rank, until it starts ranks of its own.
  if (pid == d.started_pid_ && self.process.samples == 0 && d.started_.rank &&
      !d.launcher_pids_.contains(pid)) {
    self.process.rank = d.started_.rank;
    self.process.local_rank = d.started_.local_rank;
    self.process.node_rank = d.started_.node_rank;
    self.process.rank_source = d.started_.source;
    self.world_size = d.started_.world_size;
    self.job = d.started_.job;
    self.rank_notes = d.started_.notes;
    d.rank_pids_.insert(pid);
  }
  self.process.pid = pid;
  if (pid == d.started_pid_) self.process.ppid = d.parent_pid_;  // a followed one's came as a child
  if (!me.name.empty()) self.process.name = me.name;
  self_cores = s.cpu_process_ratio.value_or(0) * cpus;
  if (!baseline_only)
    account(self, self_cores, main_state, s.rss_bytes.value_or(0), s.process_read_bytes_total,
            main_run_wait, main_busy, s.memory);
  tree = baseline_only ? 0 : self_cores;
  if (s.memory) {
    rollup = true;
    trainer_private += static_cast<double>(s.memory->private_bytes());
  }
}

void ProcessTreeDigest::Reading::read_children() {
  for (const ProcessCpu& p : s.children)
    if (p.pid != pid) read_child(p);  // the sampled process was read above, thread by thread
}

void ProcessTreeDigest::Reading::read_child(const ProcessCpu& p) {
  Accumulated& a = d.processes_[p.pid];
  const bool first_reading = a.process.samples == 0;
  const bool parent_is_rank = d.rank_pids_.contains(p.ppid);
  const auto parent = d.processes_.find(p.ppid);
  const bool parent_known = parent_is_rank && parent != d.processes_.end();
  // A rank's copy (its loader worker) carries its environment: the same launcher's same rank of
  // the same job. Another launcher's rank 0 under a torchrun that srun named task 0 is a rank.
  const bool parents_copy = parent_known && parent->second.process.rank == p.rank &&
                            parent->second.process.rank_source == p.rank_source &&
                            parent->second.job == p.job;
  ProcessRole role =
      classify_descendant(p, pid, me.name, parent_is_rank,
                          parents_copy ? parent->second.process.rank : std::nullopt,
                          parent_known ? parent->second.process.name : std::string());
  // A copy of a script that waits for its children is one of its training processes, whichever
  // of them is followed; a copy of one of those is that one's loader worker.
  if (role == ProcessRole::loader_worker || role == ProcessRole::other) {
    const bool copy = p.name == d.name_of(p.ppid) && !runs_multiprocessing(p.cmdline);
    if (copy && d.waiting_parents_.contains(p.ppid))
      role = ProcessRole::trainer;
    else if (copy && parent != d.processes_.end() && parent->second.process.role == ProcessRole::trainer)
      role = ProcessRole::loader_worker;
  }
  if (a.process.samples == 0) {
    a.multiprocessing_helper = runs_multiprocessing(p.cmdline);
    a.process.pid = p.pid;
    a.process.ppid = p.ppid;
    a.process.role = role;
    a.process.rank = p.rank;
    a.process.local_rank = p.local_rank;
    a.process.node_rank = p.node_rank;
    a.process.rank_source = p.rank_source;
    a.world_size = p.world_size;
    a.job = p.job;
    a.rank_notes = p.rank_notes;
  }
  if (role == ProcessRole::rank) {
    if (parent_is_rank && !parents_copy) d.demote_to_launcher(p.ppid);
    a.process.role = ProcessRole::rank;
    d.rank_pids_.insert(p.pid);
    if (p.ppid == pid && p.cores > busiest_rank_cores) {
      busiest_rank = p.pid;
      busiest_rank_cores = p.cores;
    }
  }
  // torch 2.x's workers name themselves a moment after they start.
  if (role == ProcessRole::loader_worker && a.process.role != ProcessRole::trainer)
    a.process.role = ProcessRole::loader_worker;
  if (role == ProcessRole::trainer) a.process.role = ProcessRole::trainer;
  a.process.name = p.name;
  account(a, p.cores, p.state, p.rss_bytes, p.read_bytes_total, p.run_wait, p.main_thread_busy,
          p.memory);
  tree += p.cores;
  if (p.memory) {
    rollup = true;
    const auto private_bytes = static_cast<double>(p.memory->private_bytes());
    if (a.process.role == ProcessRole::loader_worker) {
      workers_private += private_bytes;
      workers_shared += static_cast<double>(p.memory->shared_bytes());
    } else if (a.process.role == ProcessRole::rank) {
      trainer_private += private_bytes;
    } else {
      others_private += private_bytes;
    }
  }
  if (a.process.role != ProcessRole::loader_worker) {
    others += p.cores;
    if (p.ppid == pid && p.cores > busiest_cores && !multiprocessing_server(p.cmdline)) {
      busiest_child = p.pid;
      busiest_cores = p.cores;
    }
    return;
  }
  workers += p.cores;
  ++alive;
  if (first_reading) ++started_by_parent[p.ppid];
  d.worker_busy_sum_ += std::min(p.cores, 1.0);
  ++d.worker_readings_;
  Workers& group = d.workers_by_parent_[p.ppid];
  group.busy_sum += std::min(p.cores, 1.0);
  ++group.readings;
  auto& [count, cores] = alive_by_parent[p.ppid];
  ++count;
  cores += p.cores;
  if (p.run_wait) {
    d.worker_run_wait_sum_ += *p.run_wait;
    ++d.worker_run_wait_readings_;
    group.run_wait_sum += *p.run_wait;
    ++group.run_wait_readings;
  }
}

void ProcessTreeDigest::Reading::tally_descendants() {
  d.workers_cores_sum_ += workers;
  d.other_processes_sum_ += others;
  d.workers_max_ = std::max(d.workers_max_, alive);
  d.worker_samples_ += alive > 0;
  d.tree_cores_sum_ += tree;
  for (const auto& [parent, alive_cores] : alive_by_parent) {
    Workers& group = d.workers_by_parent_[parent];
    group.max_alive = std::max(group.max_alive, alive_cores.first);
    group.cores_sum += alive_cores.second;
    ++group.alive_readings;
  }
}

// A look at the main thread counts where its own loader workers were alive: before the first and
// between epochs (workers not persistent) its waits are no loader's. Without workers, every look.
void ProcessTreeDigest::Reading::read_main_thread_waits() {
  if (!s.main_thread_waits || baseline_only) return;
  me.waits_all += *s.main_thread_waits;
  note_waiting_parent();
  const bool workers_alive = own_workers_alive(pid);
  if (workers_alive) me.waits += *s.main_thread_waits;
  // The live figure: what the summary counts (without workers, only what the stack tells apart).
  if (workers_alive || s.main_thread_waits->stack_looks > 0) d.recent_waits_.emplace_back(s.time_ns, *s.main_thread_waits);
  while (!d.recent_waits_.empty() &&
         s.time_ns - d.recent_waits_.front().first > static_cast<std::int64_t>(kLiveStallWindowS * 1e9))
    d.recent_waits_.pop_front();
}

// The looks at the job's other ranks, each counted as the trainer's are: where its own loader
// workers were alive, and every look for its view where it has none.
void ProcessTreeDigest::Reading::read_rank_waits() {
  if (baseline_only) return;
  for (const auto& [rank_pid, waits] : s.rank_main_thread_waits) {
    const auto it = d.processes_.find(rank_pid);
    if (it == d.processes_.end() || waits.looks == 0) continue;
    it->second.waits_all += waits;
    if (own_workers_alive(rank_pid)) it->second.waits += waits;
  }
}

// Each parent's loader workers started again and again: the sampled process's, with the looks at
// its main thread, and each rank's, with the looks at its own.
void ProcessTreeDigest::Reading::read_worker_churn() {
  if (baseline_only) return;
  std::set<int> parents = {pid};
  for (const auto& [parent, started] : started_by_parent) parents.insert(parent);
  for (const auto& [parent, tracker] : d.churn_by_parent_) parents.insert(parent);
  for (const int parent : parents) {
    const MainThreadWaits* looks = nullptr;
    if (parent == pid && s.main_thread_waits) looks = &*s.main_thread_waits;
    if (const auto r = s.rank_main_thread_waits.find(parent); parent != pid && r != s.rank_main_thread_waits.end())
      looks = &r->second;
    const auto alive_here = alive_by_parent.find(parent);
    const auto started = started_by_parent.find(parent);
    d.churn_by_parent_[parent].add(since_first_s, dt, alive_here == alive_by_parent.end() ? 0 : alive_here->second.first,
                                   started == started_by_parent.end() ? 0 : started->second, looks);
  }
}

bool ProcessTreeDigest::Reading::own_workers_alive(int parent) const {
  const auto own = alive_by_parent.find(parent);
  return own != alive_by_parent.end() && own->second.first > 0;
}

// The process read waits for its children to end most of the time: a script that started its
// training processes (torch.multiprocessing, Hogwild) and joins them. From now on it is a launcher
// (its busiest child is followed) and its children that read as loader workers are trainers; what
// was counted of them as workers so far is dropped.
void ProcessTreeDigest::Reading::note_waiting_parent() {
  const MainThreadWaits& w = me.waits_all;
  if (d.waiting_parents_.contains(pid) || w.looks < kWaitsOnChildrenLooks ||
      static_cast<double>(w.children) < kWaitsOnChildrenShare * static_cast<double>(w.looks))
    return;
  d.waiting_parents_.insert(pid);
  d.launcher_pids_.insert(pid);
  bool any = false;
  for (auto& [child, a] : d.processes_)
    if (a.process.ppid == pid && a.process.role == ProcessRole::loader_worker) {
      a.process.role = ProcessRole::trainer;
      any = true;
    }
  if (!any) return;
  d.workers_max_ = 0;
  d.worker_samples_ = 0;
  d.workers_cores_sum_ = 0;
  d.worker_busy_sum_ = 0;
  d.worker_readings_ = 0;
  d.worker_run_wait_sum_ = 0;
  d.worker_run_wait_readings_ = 0;
  d.workers_by_parent_.erase(pid);
  d.churn_by_parent_.erase(pid);  // the sets it started were its training processes
}

std::optional<double> ProcessTreeDigest::latest_data_stall() const {
  std::lock_guard lock(mutex_);
  MainThreadWaits sum;
  for (const auto& [t, w] : recent_waits_) sum += w;
  if (sum.looks < kLiveStallMinLooks) return std::nullopt;
  return static_cast<double>(sum.on_loader()) / static_cast<double>(sum.looks);
}

void ProcessTreeDigest::Reading::read_ranks() {
  std::map<int, RankReading> latest;
  if (d.rank_pids_.contains(pid) && !baseline_only) read_rank(latest, pid, self_cores, main_busy);
  // A program that is no torch.distributed job: its training process is the one "rank" of the live
  // series (a dashboard's per-rank panels show it), rank 0, without a timeline of its own.
  if (d.rank_pids_.empty() && !d.launches_ranks_ && !baseline_only)
    read_rank(latest, pid, self_cores, main_busy, 0);
  for (const ProcessCpu& p : s.children)
    if (p.pid != pid && d.rank_pids_.contains(p.pid)) read_rank(latest, p.pid, p.cores, p.main_thread_busy);
  d.latest_ranks_ = std::move(latest);
}

void ProcessTreeDigest::Reading::read_rank(std::map<int, RankReading>& latest, int rank_pid,
                                           double cores, std::optional<double> main,
                                           std::optional<int> as_rank) {
  const double weight = std::clamp(dt / 1.0, 0.0, 1.0);  // of the new reading: about a second's mean
  const auto a = d.processes_.find(rank_pid);
  if (a == d.processes_.end() || !(as_rank || a->second.process.rank)) return;
  RankReading r{as_rank ? *as_rank : *a->second.process.rank, rank_pid, cores, main, 0, 0, std::nullopt, std::nullopt};
  if (const auto w = alive_by_parent.find(rank_pid); w != alive_by_parent.end())
    std::tie(r.workers, r.workers_cores) = w->second;
  if (const auto before = d.latest_ranks_.find(rank_pid); before != d.latest_ranks_.end() && weight > 0) {
    const RankReading& b = before->second;
    const auto mix = [weight](double was, double now) { return was + weight * (now - was); };
    r.cpu_cores = mix(b.cpu_cores, r.cpu_cores);
    r.workers_cores = mix(b.workers_cores, r.workers_cores);
    if (r.main_thread_busy && b.main_thread_busy) r.main_thread_busy = mix(*b.main_thread_busy, *r.main_thread_busy);
    r.gpu_sm_util = b.gpu_sm_util;  // until NVML's next window, below
  }
  latest[rank_pid] = r;
  if (as_rank) return;
  Timeline::Bucket& bucket = d.timelines_[rank_pid].at(since_first_s);
  bucket.workers_sum += std::get<1>(alive_by_parent[rank_pid]);
  bucket.main_sum += main.value_or(0);
  ++bucket.readings;
}

// NVML's per-process readings, for the processes of this tree. The sampler repeats a GPU
// reading until it reads the GPU again: a window of SM shares is counted once, by its end.
void ProcessTreeDigest::Reading::read_gpus() {
  std::uint64_t gpu_memory = 0;
  for (const GpuSample& g : s.gpus) {
    std::uint64_t& counted_until = d.sm_counted_until_us_[g.index];
    const bool new_window = g.sm_window_end_us > counted_until;
    const double window_s =
        new_window ? static_cast<double>(g.sm_window_end_us - g.sm_window_begin_us) / 1e6 : 0;
    if (new_window) counted_until = g.sm_window_end_us;
    for (const GpuProcessSample& p : g.processes) {
      d.gpu_processes_listed_ = true;
      const auto it = d.processes_.find(p.pid);
      if (it == d.processes_.end()) continue;
      if (const auto rank = d.latest_ranks_.find(p.pid); rank != d.latest_ranks_.end()) {
        RankReading& r = rank->second;
        if (p.memory_used_bytes) r.gpu_memory_bytes = r.gpu_memory_bytes.value_or(0) + *p.memory_used_bytes;
        if (new_window && p.sm_util_ratio) r.gpu_sm_util = *p.sm_util_ratio;
      }
      WatchedProcess& w = it->second.process;
      const std::uint64_t memory = p.memory_used_bytes.value_or(0);
      w.gpu_memory_peak_bytes = std::max(w.gpu_memory_peak_bytes, memory);
      gpu_memory += memory;
      d.on_gpu_ = true;
      // Weighted by the window's length: a read that finds no new NVML sample leaves the window
      // open, so one share may cover seconds of idle time.
      if (new_window && p.sm_util_ratio) {
        it->second.sm_sum += *p.sm_util_ratio * window_s;
        it->second.sm_seconds += window_s;
      }
    }
  }
  d.tree_gpu_memory_peak_ = std::max(d.tree_gpu_memory_peak_, gpu_memory);
}

// MemAvailable at every reading; the memory by role at those that read smaps_rollup.
void ProcessTreeDigest::Reading::read_memory() {
  if (!s.memory_available_bytes && !rollup) return;
  ProcessTreeDigest::MemoryBucket& b = bucket_at(d.memory_buckets_, d.memory_bucket_s_, since_first_s);
  if (s.memory_available_bytes) {
    const std::uint64_t available = *s.memory_available_bytes;
    d.available_last_ = available;
    d.available_min_ = std::min(d.available_min_.value_or(available), available);
    b.available += static_cast<double>(available);
    ++b.available_readings;
  }
  if (!rollup) return;
  if (d.rollup_readings_++ == 0) d.first_rollup_ns_ = s.time_ns;
  d.last_rollup_ns_ = s.time_ns;
  d.workers_private_peak_ =
      std::max(d.workers_private_peak_, static_cast<std::uint64_t>(workers_private));
  b.trainer += trainer_private;
  b.workers += workers_private;
  b.workers_shared += workers_shared;
  b.other += others_private;
  ++b.readings;
}

void ProcessTreeDigest::demote_to_launcher(int pid) {
  if (!rank_pids_.erase(pid)) return;
  launcher_pids_.insert(pid);
  timelines_.erase(pid);
  latest_ranks_.erase(pid);
  if (const auto it = processes_.find(pid); it != processes_.end())
    it->second.process.role = ProcessRole::launcher;
}

// A launcher's work is its child's: read that child, with its threads, from the next sample on;
// a process that started ranks is one, and its busiest rank the child.
int ProcessTreeDigest::Reading::next_pid() {
  if (busiest_rank > 0 && !d.rank_pids_.contains(pid)) {
    d.launcher_pids_.insert(pid);
    return busiest_rank;
  }
  return (is_launcher(me.name) || d.waiting_parents_.contains(pid)) && busiest_child > 0 ? busiest_child : 0;
}

int ProcessTreeDigest::add(const UtilizationSample& s) {
  std::lock_guard lock(mutex_);
  const int pid = s.pid > 0 ? s.pid : started_pid_;  // the process read with its threads
  // A followed program that ended: back to its launcher, which may run another.
  if (s.threads.empty() && !s.rss_bytes) return pid != started_pid_ ? started_pid_ : 0;
  Reading reading(*this, s, pid);
  reading.read_threads();
  reading.read_self();
  reading.read_children();
  reading.tally_descendants();
  reading.read_ranks();
  reading.read_gpus();
  reading.read_memory();
  reading.read_main_thread_waits();
  reading.read_rank_waits();
  reading.read_worker_churn();
  return reading.next_pid();
}

ProcessTreeSummary ProcessTreeDigest::summary() const {
  std::lock_guard lock(mutex_);
  // The trainer: of the processes read with their threads, the one that took the most CPU, a
  // launcher only where nothing else was followed.
  int trainer = started_pid_;
  double most = -1;
  for (const auto& [pid, sampled] : sampled_) {
    if (is_launcher(sampled.name) || launcher_pids_.contains(pid)) continue;
    const auto it = processes_.find(pid);
    const double cpu = it == processes_.end() ? 0 : it->second.process.cpu_core_seconds;
    if (cpu > most) {
      trainer = pid;
      most = cpu;
    }
  }
  return view(trainer);
}

void ProcessTreeDigest::Timeline::Bucket::merge(const Bucket& b) {
  workers_sum += b.workers_sum;
  main_sum += b.main_sum;
  readings += b.readings;
  wait_s += b.wait_s;
  wall_s += b.wall_s;
}

ProcessTreeDigest::Timeline::Bucket& ProcessTreeDigest::Timeline::at(double t_s) {
  return bucket_at(buckets, bucket_s, t_s);
}

void ProcessTreeDigest::MemoryBucket::merge(const MemoryBucket& b) {
  trainer += b.trainer;
  workers += b.workers;
  workers_shared += b.workers_shared;
  other += b.other;
  readings += b.readings;
  available += b.available;
  available_readings += b.available_readings;
}

void ProcessTreeDigest::add_live_window(int pid, std::int64_t end_ns, double wall_s, double wait_s) {
  const std::lock_guard lock(mutex_);
  if (samples_ == 0 || end_ns < first_ns_ || wall_s <= 0) return;
  Timeline& line = timelines_[pid];
  if (end_ns <= line.last_window_end_ns) return;
  line.last_window_end_ns = end_ns;
  Timeline::Bucket& bucket = line.at(static_cast<double>(end_ns - first_ns_) / 1e9);
  bucket.wait_s += std::clamp(wait_s, 0.0, wall_s);
  bucket.wall_s += wall_s;
}

std::vector<RankReading> ProcessTreeDigest::latest_ranks() const {
  std::lock_guard lock(mutex_);
  std::vector<RankReading> out;
  for (const auto& [pid, r] : latest_ranks_) out.push_back(r);
  return out;
}

std::vector<ProcessTreeSummary> ProcessTreeDigest::rank_views() const {
  std::lock_guard lock(mutex_);
  std::vector<ProcessTreeSummary> out;
  for (const int pid : rank_pids_) out.push_back(view(pid));
  return out;
}

namespace {

double mean(double sum, std::size_t n) { return n == 0 ? 0.0 : sum / static_cast<double>(n); }

using MemoryPoints = std::vector<ProcessTreeDigest::MemoryPoint>;

// Least-squares slope of `value` over t, in units per second; none under 2 points or no spread.
template <class Value>
std::optional<double> slope(const MemoryPoints& pts, std::size_t begin, std::size_t end, Value value) {
  if (end < begin + 2) return std::nullopt;
  const double n = static_cast<double>(end - begin);
  double st = 0, sv = 0;
  for (std::size_t i = begin; i < end; ++i) {
    st += pts[i].t_s;
    sv += value(pts[i]);
  }
  const double mt = st / n, mv = sv / n;
  double stt = 0, stv = 0;
  for (std::size_t i = begin; i < end; ++i) {
    stt += (pts[i].t_s - mt) * (pts[i].t_s - mt);
    stv += (pts[i].t_s - mt) * (value(pts[i]) - mv);
  }
  if (stt <= 0) return std::nullopt;
  return stv / stt;
}

constexpr std::size_t kTrendReadings = 4;
constexpr double kTrendSeconds = 2.0;

// A process's memory trend over its readings from `from_s` on (its start-up left out).
MemoryTrend memory_trend(const MemoryPoints& pts, double from_s, std::uint64_t private_peak) {
  MemoryTrend m;
  m.readings = pts.size();
  m.private_bytes = static_cast<std::uint64_t>(pts.back().private_bytes);
  m.shared_bytes = static_cast<std::uint64_t>(pts.back().shared_bytes);
  m.pss_bytes = static_cast<std::uint64_t>(pts.back().pss_bytes);
  m.private_peak_bytes = private_peak;
  m.watched_s = pts.back().t_s - pts.front().t_s;
  std::size_t begin = 0;
  while (begin < pts.size() && pts[begin].t_s < from_s) ++begin;
  std::size_t end = pts.size();
  // A process that frees what it held as it ends (its teardown, a loop's list let go) falls after
  // its peak: the trend is the one up to the peak.
  if (begin < end) {
    std::size_t peak = begin;
    for (std::size_t i = begin; i < end; ++i)
      if (pts[i].private_bytes >= pts[peak].private_bytes) peak = i;
    if (pts.back().private_bytes < 0.95 * pts[peak].private_bytes) end = peak + 1;
  }
  if (end - std::min(begin, end) < kTrendReadings) return m;
  m.window_s = pts[end - 1].t_s - pts[begin].t_s;
  if (m.window_s < kTrendSeconds) return m;
  const auto priv = [](const auto& p) { return p.private_bytes; };
  const auto shared = [](const auto& p) { return p.shared_bytes; };
  m.private_bytes_per_s = slope(pts, begin, end, priv);
  m.shared_bytes_per_s = slope(pts, begin, end, shared);
  const std::size_t middle = begin + (end - begin) / 2;
  const auto first = slope(pts, begin, middle + 1, priv);
  const auto second = slope(pts, middle, end, priv);
  m.steady = m.private_bytes_per_s && *m.private_bytes_per_s > 0 && first && second &&
             *first >= *m.private_bytes_per_s / 3 && *second >= *m.private_bytes_per_s / 3;
  std::vector<double> t_s, private_bytes;
  for (std::size_t i = begin; i < end; ++i) {
    t_s.push_back(pts[i].t_s);
    private_bytes.push_back(pts[i].private_bytes);
  }
  if (const GrowthShape g = growth_shape(t_s, private_bytes); g.levels_off) {
    m.levels_off = true;
    m.rise_s = g.knee_s - pts[begin].t_s;
    m.rise_bytes = g.rise_per_s * m.rise_s;
  }
  return m;
}

}  // namespace

// One view()'s steps, on the digest's totals (its mutex held): the trainer's threads, the
// workers it counts, every process, its timeline, and the tree's totals.
struct ProcessTreeDigest::View {
  View(const ProcessTreeDigest& digest, int trainer);
  void read_trainer();
  void read_workers();
  void read_processes();
  void read_timeline();
  void read_memory();
  ProcessTreeSummary finish();

 private:
  WatchedProcess read_process(int pid, const Accumulated& a);
  bool copy_of(const Accumulated& a, int parent) const;
  bool hogwild_trainer(const Accumulated& a) const;
  bool mine(const WatchedProcess& p) const;
  void note_rank_identity(const WatchedProcess& p, const std::vector<std::string>& notes);

  const ProcessTreeDigest& d;
  const int trainer;
  // A rank's view counts its own workers; a program that is no rank, every worker of its tree.
  const bool rank_view;
  ProcessTreeSummary out;
  double own_workers_all_readings = 0;  // its workers' cores over every reading, for the rest
  std::size_t worker_readings = 0, worker_io_wait = 0;
  std::uint64_t read_bytes = 0;
  bool read_known = false;
  MainThreadWaits main_waits_all;  // the trainer's every look, for a program with no workers
  std::size_t ranks_with_notes = 0;
};

ProcessTreeDigest::View::View(const ProcessTreeDigest& digest, int trainer_pid)
    : d(digest), trainer(trainer_pid), rank_view(digest.rank_pids_.contains(trainer_pid)) {
  out.trainer_pid = trainer;
  out.samples = d.samples_;
  out.sampled_s = static_cast<double>(d.last_ns_ - d.first_ns_) / 1e9;
}

void ProcessTreeDigest::View::read_trainer() {
  const auto found = d.sampled_.find(trainer);
  const auto acc = d.processes_.find(trainer);
  if (found != d.sampled_.end()) {
    const Sampled& t = found->second;
    out.trainer_name = t.name;
    out.main_thread_busy = mean(t.main_busy_sum, t.main_samples);
    out.main_thread_io_wait = mean(static_cast<double>(t.main_io_wait), t.main_samples);
    out.other_threads_cores = mean(t.other_threads_sum, t.readings);
    out.yielding_threads_cores = mean(t.yielding_sum, t.readings);
    // Its looks while it was followed, and those while another rank was (its accumulated ones).
    MainThreadWaits waits = t.waits;
    main_waits_all = t.waits_all;
    if (acc != d.processes_.end()) {
      waits += acc->second.waits;
      main_waits_all += acc->second.waits_all;
    }
    if (waits.looks > 0) out.main_thread_waits = waits;
    for (const auto& [tid, thread] : t.threads) {
      const double busy = mean(thread.busy_sum, t.readings);  // over its run: a thread gone is idle
      if (busy > out.busiest_thread_busy) {
        out.busiest_thread = thread.name + " (" + std::to_string(tid) + ")";
        out.busiest_thread_busy = busy;
      }
    }
  } else if (acc != d.processes_.end()) {  // a rank read as a process, with its main thread
    const Accumulated& a = acc->second;
    out.trainer_name = a.process.name;
    out.main_thread_busy = mean(a.main_busy_sum, a.main_busy_readings);
    out.main_thread_io_wait = mean(static_cast<double>(a.io_wait_samples), a.process.samples);
    out.other_threads_cores = std::max(0.0, mean(a.cores_sum, a.process.samples) - out.main_thread_busy);
    if (a.waits.looks > 0) out.main_thread_waits = a.waits;
    main_waits_all = a.waits_all;
  }
}

void ProcessTreeDigest::View::read_workers() {
  if (rank_view) {
    static const Workers none;
    const auto group = d.workers_by_parent_.find(trainer);
    const Workers& w = group == d.workers_by_parent_.end() ? none : group->second;
    out.workers = w.max_alive;
    out.workers_cores = mean(w.cores_sum, w.alive_readings);
    out.worker_busy = mean(w.busy_sum, w.readings);
    if (w.run_wait_readings > 0) out.worker_run_wait = mean(w.run_wait_sum, w.run_wait_readings);
    own_workers_all_readings = mean(w.cores_sum, d.samples_);
  } else {
    out.workers = d.workers_max_;
    out.workers_cores = mean(d.workers_cores_sum_, d.worker_samples_);
    out.worker_busy = mean(d.worker_busy_sum_, d.worker_readings_);
    if (d.worker_run_wait_readings_ > 0)
      out.worker_run_wait = mean(d.worker_run_wait_sum_, d.worker_run_wait_readings_);
    out.other_processes_cores = mean(d.other_processes_sum_, d.samples_);
  }
  if (const auto churn = d.churn_by_parent_.find(trainer); churn != d.churn_by_parent_.end())
    out.worker_churn = churn->second.summary();
}

void ProcessTreeDigest::View::read_processes() {
  for (const auto& [pid, a] : d.processes_) out.processes.push_back(read_process(pid, a));
}

std::string ProcessTreeDigest::name_of(int pid) const {
  if (const auto s = sampled_.find(pid); s != sampled_.end()) return s->second.name;
  const auto c = processes_.find(pid);
  return c != processes_.end() ? c->second.process.name : std::string();
}

// Whether process `a` is a fork of `parent` (same name, not one of multiprocessing's helpers).
bool ProcessTreeDigest::View::copy_of(const Accumulated& a, int parent) const {
  const std::string name = d.name_of(parent);
  return !a.multiprocessing_helper && !name.empty() && a.process.name == name;
}

// A Hogwild script's training processes are its copies, whenever it was seen to wait for them
// (its first looks, before it forks, are its import time: under load the 60 % of waiting comes
// later), and their copies are their loader workers; whichever of them was followed.
bool ProcessTreeDigest::View::hogwild_trainer(const Accumulated& a) const {
  return d.waiting_parents_.contains(a.process.ppid) && copy_of(a, a.process.ppid);
}

WatchedProcess ProcessTreeDigest::View::read_process(int pid, const Accumulated& a) {
  WatchedProcess p = a.process;
  const auto parent = d.processes_.find(p.ppid);
  if (pid == trainer || hogwild_trainer(a))
    p.role = ProcessRole::trainer;
  else if (d.rank_pids_.contains(pid))
    p.role = ProcessRole::rank;
  else if (p.role == ProcessRole::other && parent != d.processes_.end() &&
           hogwild_trainer(parent->second) && copy_of(a, p.ppid))
    p.role = ProcessRole::loader_worker;
  else if (d.sampled_.contains(pid))
    p.role = is_launcher(p.name) || d.launcher_pids_.contains(pid) ? ProcessRole::launcher
                                                                   : ProcessRole::other;
  p.cpu_cores_mean = mean(a.cores_sum, p.samples);
  p.io_wait_share = mean(static_cast<double>(a.io_wait_samples), p.samples);
  if (a.main_busy_readings > 0) p.main_thread_busy = mean(a.main_busy_sum, a.main_busy_readings);
  if (a.first_read && a.last_read && *a.last_read >= *a.first_read) {
    p.read_bytes = *a.last_read - *a.first_read;
    read_bytes += p.read_bytes;
    read_known = true;
  }
  if (a.run_wait_readings > 0) p.run_wait_share = mean(a.run_wait_sum, a.run_wait_readings);
  if (a.sm_seconds > 0) p.gpu_sm_util = a.sm_sum / a.sm_seconds;
  if (!a.memory.empty()) {
    const MemoryPoints& pts = a.memory;
    // Start-up is left out: a third of its life, and a trainer's data is built before its first
    // loader worker starts.
    double from_s = pts.front().t_s + (pts.back().t_s - pts.front().t_s) / 3;
    if (p.role == ProcessRole::trainer || p.role == ProcessRole::rank) {
      double first_worker = -1;
      for (const auto& [wpid, w] : d.processes_)
        if (w.process.role == ProcessRole::loader_worker && w.process.ppid == pid &&
            (first_worker < 0 || w.process.first_seen_s < first_worker))
          first_worker = w.process.first_seen_s;
      if (first_worker >= 0) from_s = first_worker;
    }
    p.memory = memory_trend(pts, from_s, a.private_peak);
  }
  // The job as the view's trainer sees it, else as the first process that names one (a launcher
  // that srun named a task of a smaller job sees another).
  if (!a.job.empty() && (out.job.empty() || pid == trainer)) out.job = a.job;
  if (a.world_size && (!out.world_size || pid == trainer)) out.world_size = a.world_size;
  if (d.rank_pids_.contains(pid)) note_rank_identity(p, a.rank_notes);
  if (p.role == ProcessRole::trainer) {
    if (d.rank_pids_.contains(pid)) out.trainer_rank = p.rank;
    out.main_thread_run_wait = p.run_wait_share;  // a process's run-queue wait is its main thread's
    out.trainer_cores = p.cpu_cores_mean;
    out.trainer_gpu_sm_util = p.gpu_sm_util;
  }
  if (mine(p)) {
    worker_readings += p.samples;
    worker_io_wait += a.io_wait_samples;
    out.worker_busy_max = std::max(out.worker_busy_max, std::min(p.cpu_cores_mean, 1.0));
  }
  return p;
}

// A rank's launchers that disagree, said once for a few ranks: each rank's note differs only in
// its numbers.
void ProcessTreeDigest::View::note_rank_identity(const WatchedProcess& p,
                                                 const std::vector<std::string>& notes) {
  constexpr std::size_t kRanksNoted = 4;
  if (notes.empty()) return;
  if (++ranks_with_notes > kRanksNoted) {
    const std::string more = "and ranks beyond these alike";
    if (out.rank_notes.back() != more) out.rank_notes.push_back(more);
    return;
  }
  const std::string who = p.rank ? "rank " + std::to_string(*p.rank) : "pid " + std::to_string(p.pid);
  for (const std::string& n : notes) out.rank_notes.push_back(who + " (pid " + std::to_string(p.pid) + "): " + n);
}

bool ProcessTreeDigest::View::mine(const WatchedProcess& p) const {
  return p.role == ProcessRole::loader_worker && (!rank_view || p.ppid == trainer);
}

void ProcessTreeDigest::View::read_timeline() {
  const auto tl = d.timelines_.find(trainer);
  if (tl == d.timelines_.end()) return;
  const Timeline& line = tl->second;
  out.timeline_bucket_s = line.bucket_s;
  bool windows = false;
  for (const Timeline::Bucket& b : line.buckets) windows |= b.wall_s > 0;
  for (const Timeline::Bucket& b : line.buckets) {
    out.timeline_workers_cores.push_back(mean(b.workers_sum, b.readings));
    out.timeline_main_busy.push_back(mean(b.main_sum, b.readings));
    if (windows)
      out.timeline_data_stall.push_back(b.wall_s > 0 ? std::optional(b.wait_s / b.wall_s)
                                                     : std::nullopt);
  }
}

void ProcessTreeDigest::View::read_memory() {
  if (d.memory_buckets_.empty()) return;
  TreeMemory m;
  m.rollup_readings = d.rollup_readings_;
  if (d.rollup_readings_ > 1)
    m.rollup_period_s = static_cast<double>(d.last_rollup_ns_ - d.first_rollup_ns_) / 1e9 /
                        static_cast<double>(d.rollup_readings_ - 1);
  m.available_last_bytes = d.available_last_.value_or(0);
  m.available_min_bytes = d.available_min_.value_or(0);
  m.workers_private_peak_bytes = d.workers_private_peak_;
  m.bucket_s = d.memory_bucket_s_;
  // A bucket without a reading is not measured: NaN, null in report.json, a gap in the chart.
  const auto per = [](double sum, std::size_t n) {
    return n == 0 ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(n);
  };
  for (const MemoryBucket& b : d.memory_buckets_) {
    m.trainer_private_bytes.push_back(per(b.trainer, b.readings));
    m.workers_private_bytes.push_back(per(b.workers, b.readings));
    m.workers_shared_bytes.push_back(per(b.workers_shared, b.readings));
    m.other_private_bytes.push_back(per(b.other, b.readings));
    m.available_bytes.push_back(per(b.available, b.available_readings));
  }
  out.memory = std::move(m);
}

ProcessTreeSummary ProcessTreeDigest::View::finish() {
  if (out.workers == 0 && main_waits_all.looks > 0) out.main_thread_waits = main_waits_all;
  // The job's other ranks and their workers are this rank's "other processes".
  if (rank_view)
    out.other_processes_cores =
        std::max(0.0, mean(d.tree_cores_sum_, d.samples_) - out.trainer_cores - own_workers_all_readings);
  out.ranks = static_cast<int>(d.rank_pids_.size());
  out.trainers = std::max<int>(1, static_cast<int>(std::count_if(
                                      out.processes.begin(), out.processes.end(),
                                      [](const WatchedProcess& p) { return p.role == ProcessRole::trainer; })));
  out.on_gpu = d.on_gpu_;
  out.gpu_memory_peak_bytes = d.tree_gpu_memory_peak_;
  if (d.gpu_processes_listed_ && !d.on_gpu_ &&
      in_nested_pid_namespace(ProcFs().read("/proc/self/status").value_or("")))
    out.gpu_share_unmeasured =
        "NVML names the GPU's processes by the host's PIDs, and feedscope runs in a PID namespace "
        "of its own (a container): the program's GPU share is not measured";
  out.workers_io_wait = mean(static_cast<double>(worker_io_wait), worker_readings);
  if (read_known && out.sampled_s > 0)
    out.storage_read_bytes_per_s = static_cast<double>(read_bytes) / out.sampled_s;
  std::stable_partition(out.processes.begin(), out.processes.end(),
                        [](const WatchedProcess& p) { return p.role == ProcessRole::trainer; });
  return std::move(out);
}

ProcessTreeSummary ProcessTreeDigest::view(int trainer) const {
  View v(*this, trainer);
  v.read_trainer();
  v.read_workers();
  v.read_processes();
  v.read_timeline();
  v.read_memory();
  return v.finish();
}

}  // namespace feedscope
