#include "sampler/utilization_sampler.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <utility>

#include <unistd.h>

namespace feedscope {

namespace {

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double ratio(std::uint64_t busy_delta, std::uint64_t total_delta) {
  return total_delta == 0 ? 0.0
                          : std::clamp(static_cast<double>(busy_delta) /
                                           static_cast<double>(total_delta), 0.0, 1.0);
}

constexpr std::int64_t kGpuMinPeriodNs = 100'000'000;  // NVML at most 10 Hz
constexpr std::int64_t kDescendantsWalkPeriodNs = 500'000'000;
constexpr std::int64_t kDescendantsQuietWalkPeriodNs = 5'000'000'000;
constexpr std::int64_t kPressurePeriodNs = 1'000'000'000;
constexpr std::chrono::seconds kWaitProbeFastPeriod{10};  // Options::wait_probe_later_hz
// A descendant idle at this many readings in a row is read at every other reading, then one in
// three, ..., at most kMaxIdleSkips left out in a row (Reading::skip_idle).
constexpr int kIdleStreakBeforeSkipping = 3;
constexpr int kMaxIdleSkips = 4;

// The cores a thread or process `id` took since the previous sample (`dt` seconds ago, 0: none),
// from its CPU ticks now, which go into `now`. Nothing where it is new, or where its ticks went
// backwards (an id reused by another).
std::optional<double> cores_since(std::map<int, std::uint64_t>& now,
                                  const std::map<int, std::uint64_t>& before, int id,
                                  std::uint64_t ticks_now, double ticks_per_s, double dt) {
  now[id] = ticks_now;
  const auto it = before.find(id);
  if (dt <= 0 || it == before.end() || ticks_now < it->second) return std::nullopt;
  return static_cast<double>(ticks_now - it->second) / ticks_per_s / dt;
}

// Whether task `id` (its ticks and state just read) took no CPU since the previous sample and is not
// ready for a core now: it waited for none since (a run-queue wait ends on a core, in a tick of its
// ticks or, under a tick, in the next reading's delay), and read nothing from storage. Its
// schedstat and io are left unread, their files kept open: most of a torch process's threads are
// an idle pool's.
bool idle_since(const std::map<int, std::uint64_t>& before, int id, std::uint64_t ticks_now, char state) {
  const auto it = before.find(id);
  return it != before.end() && it->second == ticks_now && state != 'R';
}

// The counter of task `id` last read from `path` (`before`), for one `idle` since (idle_since) whose
// file is kept open unread; nothing where the file is to be read.
std::optional<std::uint64_t> unchanged_since(ProcFileCache& files, const std::string& path,
                                             const std::map<int, std::uint64_t>& before, int id,
                                             bool idle) {
  if (!idle) return std::nullopt;
  const auto it = before.find(id);
  if (it == before.end() || !files.keep_open(path)) return std::nullopt;
  return it->second;
}

// The share of the last `dt` seconds task `id` waited for a core, from schedstat's run-queue delay;
// 0 for one `idle` since (idle_since), whose file is not read.
std::optional<double> run_wait_since(ProcFileCache& files, const std::string& schedstat_path,
                                     std::map<int, std::uint64_t>& now,
                                     const std::map<int, std::uint64_t>& before, int id, double dt,
                                     bool idle) {
  if (const auto delay = unchanged_since(files, schedstat_path, before, id, idle)) {
    now[id] = *delay;
    return 0.0;
  }
  const auto text = files.read(schedstat_path);
  const auto delay = text ? parse_schedstat_run_delay_ns(*text) : std::nullopt;
  if (!delay) return std::nullopt;
  now[id] = *delay;
  const auto it = before.find(id);
  if (dt <= 0 || it == before.end() || *delay < it->second) return std::nullopt;
  return std::clamp(static_cast<double>(*delay - it->second) / 1e9 / dt, 0.0, 1.0);
}

// The job's ranks among `children` but `followed`: those with torch.distributed's variables whose
// parent has none (a rank's forked loader workers inherit its environment).
std::vector<int> other_ranks(const std::vector<ProcessCpu>& children, int followed) {
  std::set<int> distributed = {followed};
  for (const ProcessCpu& p : children)
    if (p.rank || p.master_env) distributed.insert(p.pid);
  std::vector<int> out;
  for (const ProcessCpu& p : children)
    if (distributed.contains(p.pid) && p.pid != followed && !distributed.contains(p.ppid))
      out.push_back(p.pid);
  return out;
}

// Whether `a` and `b` are one rank of one job: a process and the copy it forked of itself.
bool same_job_and_rank(const RankIdentity& a, const RankIdentity& b) {
  return a.rank == b.rank && a.source == b.source && a.master == b.master && a.job == b.job;
}

// The processes among `children` ((pid, ppid) pairs) that descend from `root`: its loader workers,
// theirs, ...
std::vector<int> descendants_in(const std::vector<std::pair<int, int>>& children, int root) {
  std::vector<int> out;
  std::set<int> tree = {root};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [pid, ppid] : children)
      if (tree.contains(ppid) && tree.insert(pid).second) {
        out.push_back(pid);
        grew = true;
      }
  }
  return out;
}

}  // namespace

UtilizationSampler::UtilizationSampler(Options options)
    : options_(std::move(options)),
      files_(options_.fs),
      cpus_(online_cpus(options_.fs)),
      target_pid_(std::max(options_.pid, 0)),
      proc_(target_pid_ > 0 ? std::to_string(target_pid_) : "self"),
      block_devices_(block_devices(options_.fs)) {
  if (!(options_.hz > 0) || options_.hz > 1000)
    throw std::invalid_argument("sample_hz: " + std::to_string(options_.hz) +
                                " is out of range; allowed: greater than 0, at most 1000");
  ring_.resize(std::max<std::size_t>(options_.ring_capacity, 1));
  if (!(options_.memory_cpu_share > 0) || options_.memory_cpu_share > 1)
    throw std::invalid_argument("memory_cpu_share: " + std::to_string(options_.memory_cpu_share) +
                                " is out of range; allowed: greater than 0, at most 1");
  if (options_.wait_probe_later_hz < 0 || options_.wait_probe_later_hz > 1000)
    throw std::invalid_argument("wait_probe_later_hz: " + std::to_string(options_.wait_probe_later_hz) +
                                " is out of range; allowed: 0 (keep wait_probe_hz) to 1000");
  if (options_.wait_probe_hz < 0 || options_.wait_probe_hz > 1000)
    throw std::invalid_argument("wait_probe_hz: " + std::to_string(options_.wait_probe_hz) +
                                " is out of range; allowed: 0 (never) to 1000");
  if (options_.wait_probe_hz > 0 && options_.pid > 0)
    wait_probe_ = std::make_unique<ThreadWaitProbe>(options_.fs);
  if (!options_.gpu) {
    note_unavailable("gpu", "GPU sampling not requested");
  } else if (const std::string why = options_.gpu->unavailable_reason(); !why.empty()) {
    note_unavailable("gpu", why);
  }
}

UtilizationSampler::~UtilizationSampler() { stop(); }

double UtilizationSampler::memory_round_share(const Options& o, std::size_t processes) {
  const std::size_t full = o.memory_share_processes;
  if (full == 0 || processes <= full) return o.memory_cpu_share;
  return std::max(o.memory_cpu_share * static_cast<double>(full) / static_cast<double>(processes),
                  o.memory_cpu_share / 10);
}

void UtilizationSampler::note_unavailable(const std::string& source, const std::string& reason) {
  std::lock_guard lock(mutex_);
  unavailable_.emplace(source, reason);  // the first reason stays
}

// One sample(): the readings of each source, on the sampling thread, into `s`, and what the
// next sample's deltas start from into `next`.
struct UtilizationSampler::Reading {
  Reading(UtilizationSampler& sampler, std::int64_t now_ns);
  void read_cpus();
  void read_process();
  void read_descendants();
  void read_memory();
  void read_disks();
  void read_pressures();
  void read_gpus();

  UtilizationSampler& u;
  const ProcFs& fs;       // what is read once, or seldom
  ProcFileCache& files;   // what is read at every sample
  const std::int64_t now_ns;
  UtilizationSample s;
  // A process followed by retarget may end before the next reading: that is not a source missing.
  const bool followed;
  Previous next;
  const Previous& previous;
  const bool have_previous;
  const double dt;
  const double ticks;
  const std::string proc;  // /proc/<pid> of the process read thread by thread
  // Whether this reading reads smaps_rollup, and the wall time that took (its cost sets the next).
  const bool rollup;
  std::int64_t rollup_cost_ns = 0;
  std::size_t rollup_reads = 0;
  bool walked = false;  // whether read_descendants walked the tree
  std::optional<MemoryRollup> read_rollup(const std::string& dir);

 private:
  std::optional<ThreadCpu> read_thread(const std::string& entry,
                                       const std::map<int, std::string>& names);
  bool yielding(const std::string& entry, const ThreadCpu& t);
  std::optional<ProcessCpu> read_child(int pid);
  std::optional<ProcessCpu> skip_idle(int pid);
  void note_idle(int pid, bool idle, const ProcessCpu& p);
  const RankIdentity& env_of(int pid);
  const std::string& cmdline_of(int pid);
  std::optional<double> rank_main_thread_busy(int pid, const RankIdentity& env, int ppid);
  void forget_ended();
  // Whether to walk the tree: no; where something may have changed; or, nothing having forked, for
  // the walk every 5 s.
  enum class Walk { no, changed, quiet };
  Walk tree_may_have_changed();
  std::optional<long> last_pid();
  std::optional<PressureSample> read_pressure(const char* resource);
};

UtilizationSampler::Reading::Reading(UtilizationSampler& sampler, std::int64_t now)
    : u(sampler),
      fs(u.options_.fs),
      files(u.files_),
      now_ns(now),
      followed(u.target_pid_ != std::max(u.options_.pid, 0)),
      previous(u.previous_),
      have_previous(previous.time_ns != 0 && now_ns > previous.time_ns),
      dt(have_previous ? static_cast<double>(now_ns - previous.time_ns) / 1e9 : 0),
      ticks(static_cast<double>(clock_ticks_per_second())),
      proc("/proc/" + u.proc_),
      rollup(u.options_.memory_hz > 0 && now_ns >= u.next_rollup_ns_) {
  s.time_ns = now_ns;
  s.pid = u.target_pid_;
  next.time_ns = now_ns;
}

// CPU: system, per core.
void UtilizationSampler::Reading::read_cpus() {
  if (const auto stat = files.read("/proc/stat")) {
    next.system = parse_cpu_times(*stat);
    next.cores = parse_core_times(*stat);
  }
  if (!next.system) u.note_unavailable("cpu", "/proc/stat is missing or malformed");
  if (have_previous && next.system && previous.system)
    s.cpu_system_ratio = ratio(next.system->busy - previous.system->busy,
                               next.system->total - previous.system->total);
  if (have_previous && next.cores.size() == previous.cores.size()) {
    for (std::size_t i = 0; i < next.cores.size(); ++i)
      s.cpu_core_ratio.push_back(ratio(next.cores[i].busy - previous.cores[i].busy,
                                       next.cores[i].total - previous.cores[i].total));
  }
}

// CPU: the process and each of its threads.
void UtilizationSampler::Reading::read_process() {
  if (const auto stat = files.read(proc + "/stat")) next.process_ticks = parse_task_cpu_ticks(*stat);
  if (!next.process_ticks && !followed)
    u.note_unavailable("process_cpu", proc + "/stat is missing or malformed");
  if (have_previous && next.process_ticks && previous.process_ticks &&
      *next.process_ticks >= *previous.process_ticks)
    s.cpu_process_ratio = std::clamp(
        static_cast<double>(*next.process_ticks - *previous.process_ticks) / ticks / (dt * u.cpus_),
        0.0, 1.0);
  const std::map<int, std::string> names =
      u.options_.thread_names ? u.options_.thread_names() : std::map<int, std::string>{};
  for (const std::string& entry : files.list_dir(proc + "/task"))
    if (std::optional<ThreadCpu> t = read_thread(entry, names)) s.threads.push_back(std::move(*t));
}

// Thread `entry` of /proc/<pid>/task; nothing where it is no thread, ended between listing and
// reading, or is new since the previous sample.
std::optional<ThreadCpu> UtilizationSampler::Reading::read_thread(
    const std::string& entry, const std::map<int, std::string>& names) {
  const int tid = std::atoi(entry.c_str());
  if (tid <= 0) return std::nullopt;
  const auto stat = files.read(proc + "/task/" + entry + "/stat");
  const auto task = stat ? parse_task_stat(*stat) : std::nullopt;
  if (!task) return std::nullopt;  // the thread ended between listing and reading
  const bool idle = idle_since(previous.thread_ticks, tid, task->cpu_ticks, task->state);
  const auto cores =
      cores_since(next.thread_ticks, previous.thread_ticks, tid, task->cpu_ticks, ticks, dt);
  const auto run_wait = run_wait_since(files, proc + "/task/" + entry + "/schedstat",
                                       next.thread_run_delay_ns, previous.thread_run_delay_ns,
                                       tid, dt, idle);
  const auto kernel = cores_since(next.thread_system_ticks, previous.thread_system_ticks, tid,
                                  task->system_ticks, ticks, dt);
  const auto faulted =
      cores_since(next.thread_faults, previous.thread_faults, tid, task->faults, 1.0, 1.0);
  // The read and write calls' count, last read some samples ago, stays: the same count when it is
  // read next means none since.
  if (const auto calls = previous.thread_syscalls.find(tid); calls != previous.thread_syscalls.end())
    next.thread_syscalls[tid] = calls->second;
  if (!cores) return std::nullopt;
  ThreadCpu t;
  t.tid = tid;
  t.state = task->state;
  if (const auto it = names.find(tid); it != names.end()) {
    t.name = it->second;
    t.lane = true;
  } else {
    t.name = u.kernel_names_.try_emplace(tid, task->name).first->second;
  }
  t.ratio = std::clamp(*cores, 0.0, 1.0);
  t.run_wait = run_wait;
  t.kernel_ratio = std::clamp(kernel.value_or(0), 0.0, t.ratio);
  t.yielding = faulted && *faulted == 0 && yielding(entry, t);
  return t;
}

// Whether thread `entry`, which took no page fault since the previous sample, spent that time
// giving its core away (ThreadCpu::yielding): busy in the kernel and, read only then, with no read
// or write call. Its first such sample reads the calls and cannot tell yet.
bool UtilizationSampler::Reading::yielding(const std::string& entry, const ThreadCpu& t) {
  const auto before = previous.thread_syscalls.find(t.tid);
  if (t.ratio < kYieldMinBusy || t.kernel_ratio < kYieldKernelShare * t.ratio) return false;
  const auto io = files.read(proc + "/task/" + entry + "/io");
  const auto calls = io ? parse_io_syscalls(*io) : std::nullopt;
  if (!calls) return false;
  next.thread_syscalls[t.tid] = *calls;
  return before != previous.thread_syscalls.end() && before->second == *calls;
}

// The sampling thread's CPU time: what reading smaps_rollup costs (the kernel's page-table walk),
// which the wall clock of a loaded machine overstates.
namespace {
std::int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

std::optional<MemoryRollup> UtilizationSampler::Reading::read_rollup(const std::string& dir) {
  if (!rollup) return std::nullopt;
  const std::int64_t begin = thread_cpu_ns();
  const auto text = fs.read(dir + "/smaps_rollup");
  rollup_cost_ns += thread_cpu_ns() - begin;
  ++rollup_reads;
  return text ? parse_smaps_rollup(*text) : std::nullopt;
}

// CPU: descendant processes (a DataLoader's workers), each with all its threads.
void UtilizationSampler::Reading::read_descendants() {
  // From the process watch started, not from the one followed: a torch.distributed job's other
  // ranks are its launcher's children, read for the whole run.
  Descendants& known = u.descendants_;
  if (const Walk walk = tree_may_have_changed(); walk != Walk::no) {
    const std::string tree_root = u.options_.pid > 0 ? std::to_string(u.options_.pid) : u.proc_;
    std::vector<int> pids = descendant_pids(files, &known.readable, tree_root);
    // A process no pid was given out for, even now: a /proc/loadavg that is not the kernel's
    // (LXCFS's, refreshed every few seconds), read no more.
    if (walk == Walk::quiet && std::any_of(pids.begin(), pids.end(), [&](int pid) {
          return std::find(known.pids.begin(), known.pids.end(), pid) == known.pids.end();
        }))
      known.last_pid_live = last_pid() != known.last_pid;
    known.pids = std::move(pids);
    known.walked_ns = now_ns;
    walked = true;
    forget_ended();
  }
  known.ended = false;
  s.children.reserve(known.pids.size());
  for (const int pid : known.pids) {
    if (pid == u.target_pid_) continue;  // read above, thread by thread
    if (std::optional<ProcessCpu> p = read_child(pid)) s.children.push_back(std::move(*p));
  }
  if (!known.readable && !followed)
    u.note_unavailable("child_processes",
                       proc + "/task/*/children is missing (a kernel without "
                       "CONFIG_PROC_CHILDREN): worker processes are not sampled");
}

// Whether to walk the tree again: the walk reads every thread's children file of every process,
// most of a sample's reads. At once where one of its processes ended (a DataLoader starting an
// epoch's workers); else twice a second where the kernel gave out a pid since the last walk (none
// can have joined otherwise: a quiet machine's training job is walked every 5 s, not 10 times), or
// where /proc/loadavg cannot say (missing, or found not to be the kernel's).
UtilizationSampler::Reading::Walk UtilizationSampler::Reading::tree_may_have_changed() {
  Descendants& known = u.descendants_;
  if (known.walked_ns == 0 || known.ended) {
    known.checked_ns = now_ns;
    known.last_pid = last_pid();
    return Walk::changed;
  }
  if (now_ns - known.checked_ns < kDescendantsWalkPeriodNs) return Walk::no;
  known.checked_ns = now_ns;
  const std::optional<long> pid = last_pid();
  const bool forked = !pid || !known.last_pid || *pid != *known.last_pid;
  known.last_pid = pid;
  if (forked) return Walk::changed;
  return now_ns - known.walked_ns >= kDescendantsQuietWalkPeriodNs ? Walk::quiet : Walk::no;
}

std::optional<long> UtilizationSampler::Reading::last_pid() {
  if (!u.descendants_.last_pid_live) return std::nullopt;
  const auto text = files.read("/proc/loadavg");
  return text ? parse_loadavg_last_pid(*text) : std::nullopt;
}

// What was read once of processes no longer in the tree: a job of days starts new loader workers
// every epoch, and a pid reused by another process must not keep the ended one's.
void UtilizationSampler::Reading::forget_ended() {
  const std::set<int> alive(u.descendants_.pids.begin(), u.descendants_.pids.end());
  const auto ended = [&](const auto& entry) {
    return !alive.contains(entry.first) && entry.first != u.target_pid_ && entry.first != u.options_.pid;
  };
  std::erase_if(u.process_cmdlines_, ended);
  std::erase_if(u.process_envs_, ended);
  std::erase_if(u.idle_children_, ended);
}

// A descendant idle at its last readings (a loader worker whose prefetch queue is full, a helper)
// as it stood then, without reading it: its stat, the read that tells it is still idle, is most of
// a big tree's readings (8 ranks x 12 workers). Its counters carry over, so the CPU it took
// meanwhile counts at its next reading; a memory round reads every process. Nothing where it is
// to be read now.
std::optional<ProcessCpu> UtilizationSampler::Reading::skip_idle(int pid) {
  const auto it = u.idle_children_.find(pid);
  if (it == u.idle_children_.end() || rollup || !have_previous) return std::nullopt;
  IdleChild& idle = it->second;
  const int skips = std::min(idle.streak - kIdleStreakBeforeSkipping + 1, kMaxIdleSkips);
  if (skips <= 0 || idle.skipped >= skips) return std::nullopt;
  for (auto [before, now] : {std::pair{&previous.child_ticks, &next.child_ticks},
                             std::pair{&previous.child_run_delay_ns, &next.child_run_delay_ns},
                             std::pair{&previous.child_read_bytes, &next.child_read_bytes}})
    if (const auto counter = before->find(pid); counter != before->end()) (*now)[pid] = counter->second;
  ++idle.skipped;
  ProcessCpu p = idle.last;
  p.cores = 0;
  p.run_wait = 0.0;
  p.memory = std::nullopt;
  return p;
}

// After process `pid` was read: whether it was `idle` since the reading before (and no rank, whose
// main thread is read at every reading), for skip_idle.
void UtilizationSampler::Reading::note_idle(int pid, bool idle, const ProcessCpu& p) {
  if (!idle || p.main_thread_busy) {
    u.idle_children_.erase(pid);
    return;
  }
  IdleChild& i = u.idle_children_[pid];
  ++i.streak;
  i.skipped = 0;
  if (i.streak >= kIdleStreakBeforeSkipping) i.last = p;
}

// Nothing where it exited between listing and reading, or is new since the previous sample.
std::optional<ProcessCpu> UtilizationSampler::Reading::read_child(int pid) {
  if (std::optional<ProcessCpu> unchanged = skip_idle(pid)) return unchanged;
  const std::string dir = "/proc/" + std::to_string(pid);
  const auto stat = files.read(dir + "/stat");
  const auto task = stat ? parse_task_stat(*stat) : std::nullopt;
  if (!task) {  // it exited since the tree was walked
    u.descendants_.ended = true;
    u.idle_children_.erase(pid);
    return std::nullopt;
  }
  const bool idle = idle_since(previous.child_ticks, pid, task->cpu_ticks, task->state);
  const auto cores =
      cores_since(next.child_ticks, previous.child_ticks, pid, task->cpu_ticks, ticks, dt);
  const auto run_wait = run_wait_since(files, dir + "/schedstat", next.child_run_delay_ns,
                                       previous.child_run_delay_ns, pid, dt, idle);
  const RankIdentity& env = env_of(pid);
  const auto main_thread_busy = rank_main_thread_busy(pid, env, task->ppid);
  if (!cores) return std::nullopt;
  ProcessCpu p;
  p.pid = pid;
  p.rank = env.rank;
  p.local_rank = env.local_rank;
  p.world_size = env.world_size;
  p.node_rank = env.node_rank;
  p.rank_source = env.source;
  p.rank_notes = env.notes;
  p.master_env = env.master;
  p.job = env.job;
  p.main_thread_busy = main_thread_busy;
  p.name = task->name;
  p.cmdline = cmdline_of(pid);
  p.cores = std::clamp(*cores, 0.0, static_cast<double>(u.cpus_));
  p.ppid = task->ppid;
  p.state = task->state;
  p.rss_bytes = task->rss_bytes;
  p.read_bytes_total = unchanged_since(files, dir + "/io", previous.child_read_bytes, pid, idle);
  if (!p.read_bytes_total)
    if (const auto io = files.read(dir + "/io")) p.read_bytes_total = parse_io_read_bytes(*io);
  if (p.read_bytes_total) next.child_read_bytes[pid] = *p.read_bytes_total;
  p.run_wait = run_wait;
  p.memory = read_rollup(dir);
  note_idle(pid, idle, p);
  return p;
}

// The busy share of a rank's main thread (a process whose environment names a torch.distributed
// job), read from its first reading on; nothing for a process a rank forked (a loader worker,
// which carries a copy of its environment) or no rank.
std::optional<double> UtilizationSampler::Reading::rank_main_thread_busy(int pid,
                                                                         const RankIdentity& env,
                                                                         int ppid) {
  if ((!env.rank && !env.master) || same_job_and_rank(env, env_of(ppid))) return std::nullopt;
  const std::string id = std::to_string(pid);
  const auto stat = files.read("/proc/" + id + "/task/" + id + "/stat");
  const auto task = stat ? parse_task_stat(*stat) : std::nullopt;
  if (!task) return std::nullopt;
  const auto busy = cores_since(next.child_main_ticks, previous.child_main_ticks, pid,
                                task->cpu_ticks, ticks, dt);
  return busy ? std::optional<double>(std::clamp(*busy, 0.0, 1.0)) : std::nullopt;
}

// Process `pid`'s command line, arguments spaced, read once.
const std::string& UtilizationSampler::Reading::cmdline_of(int pid) {
  auto [cmdline, fresh] = u.process_cmdlines_.try_emplace(pid);
  if (fresh) {
    cmdline->second = fs.read("/proc/" + std::to_string(pid) + "/cmdline").value_or("");
    while (!cmdline->second.empty() && cmdline->second.back() == '\0') cmdline->second.pop_back();
    std::replace(cmdline->second.begin(), cmdline->second.end(), '\0', ' ');
  }
  return cmdline->second;
}

// The launcher's variables process `pid` started with (its rank), read once.
const RankIdentity& UtilizationSampler::Reading::env_of(int pid) {
  auto [env, fresh] = u.process_envs_.try_emplace(pid);
  if (fresh)
    env->second = parse_distributed_env(fs.read("/proc/" + std::to_string(pid) + "/environ").value_or(""));
  return env->second;
}

void UtilizationSampler::Reading::read_memory() {
  if (const auto meminfo = files.read("/proc/meminfo"))
    if (const auto mem = parse_meminfo(*meminfo)) s.memory_available_bytes = mem->available_bytes;
  if (!s.memory_available_bytes) u.note_unavailable("memory", "/proc/meminfo is missing or malformed");
  if (const auto status = files.read(proc + "/status")) {
    if (const auto mem = parse_process_status(*status)) {
      s.rss_bytes = mem->rss_bytes;
      s.rss_peak_bytes = mem->rss_peak_bytes;
    }
  }
  if (!s.rss_bytes && !followed) u.note_unavailable("rss", proc + "/status is missing or malformed");
  s.memory = read_rollup(proc);
  if (rollup && !s.memory && !followed)
    u.note_unavailable("memory_rollup", proc + "/smaps_rollup is missing or malformed (Linux 4.14+): "
                                        "private and shared memory are not measured");
  if (u.options_.pinned_bytes) s.pinned_bytes = u.options_.pinned_bytes();
}

// Disk I/O: whole block devices, and the process's own reads.
void UtilizationSampler::Reading::read_disks() {
  if (const auto diskstats = files.read("/proc/diskstats")) {
    for (DiskCounters& d : parse_diskstats(*diskstats, u.block_devices_)) {
      DiskSample disk;
      disk.device = d.device;
      disk.read_bytes_total = d.sectors_read * 512;
      const auto before = previous.disks.find(d.device);
      if (have_previous && before != previous.disks.end() &&
          d.sectors_read >= before->second.sectors_read && d.io_time_ms >= before->second.io_time_ms) {
        disk.read_bytes_per_s =
            static_cast<double>((d.sectors_read - before->second.sectors_read) * 512) / dt;
        disk.busy_ratio = std::clamp(
            static_cast<double>(d.io_time_ms - before->second.io_time_ms) / 1e3 / dt, 0.0, 1.0);
      }
      s.disks.push_back(std::move(disk));
      next.disks.emplace(d.device, d);
    }
  } else {
    u.note_unavailable("disk", "/proc/diskstats is missing");
  }
  if (const auto io = files.read(proc + "/io")) s.process_read_bytes_total = parse_io_read_bytes(*io);
  if (!s.process_read_bytes_total && !followed) u.note_unavailable("process_io", proc + "/io is missing or malformed");
}

// Pressure stall information (kernels >= 4.20 with PSI enabled): a 10-second average, read once a
// second, the last reading in between.
void UtilizationSampler::Reading::read_pressures() {
  Pressures& last = u.pressures_;
  if (last.read_ns == 0 || now_ns - last.read_ns >= kPressurePeriodNs) {
    last = {now_ns, read_pressure("cpu"), read_pressure("io"), read_pressure("memory")};
  } else {
    for (const char* resource : {"cpu", "io", "memory"})
      files.keep_open(std::string("/proc/pressure/") + resource);
  }
  s.cpu_pressure = last.cpu;
  s.io_pressure = last.io;
  s.memory_pressure = last.memory;
}

std::optional<PressureSample> UtilizationSampler::Reading::read_pressure(const char* resource) {
  const auto text = files.read(std::string("/proc/pressure/") + resource);
  const auto p = text ? parse_pressure(*text) : std::nullopt;
  if (!p) {
    u.note_unavailable(std::string("pressure_") + resource,
                       std::string("/proc/pressure/") + resource +
                           (text ? " is malformed" : " is missing (kernel without PSI)"));
    return std::nullopt;
  }
  PressureSample out;
  out.some_avg10 = p->some_avg10 / 100.0;
  out.some_total_us = p->some_total_us;
  if (p->full_avg10) out.full_avg10 = *p->full_avg10 / 100.0;
  return out;
}

// GPUs, at most 10 Hz whatever the sampling rate.
void UtilizationSampler::Reading::read_gpus() {
  if (!u.options_.gpu || !u.options_.gpu->unavailable_reason().empty()) return;
  if (u.last_gpu_ns_ == 0 || now_ns - u.last_gpu_ns_ >= kGpuMinPeriodNs) {
    u.last_gpu_ = u.options_.gpu->read();
    u.last_gpu_ns_ = now_ns;
  }
  s.gpus = u.last_gpu_;
}

UtilizationSample UtilizationSampler::sample(std::int64_t now_ns) {
  Reading reading(*this, now_ns);
  reading.read_cpus();
  reading.read_process();
  reading.read_descendants();
  reading.read_memory();
  reading.read_disks();
  reading.read_pressures();
  reading.read_gpus();
  const bool have_previous = reading.have_previous;
  if (wait_probe_) {
    look_at_main_thread();
    reading.s.main_thread_waits = std::exchange(pending_waits_, MainThreadWaits{});
    reading.s.rank_main_thread_waits = std::exchange(pending_rank_waits_, {});
    probe_children_.clear();
    for (const ProcessCpu& p : reading.s.children) probe_children_.emplace_back(p.pid, p.ppid);
    probe_loaders_.clear();
    probe_ranks_ = other_ranks(reading.s.children, target_pid_);
  }
  if (reading.rollup) {
    // At 5 % of a core a round is never sooner than 20 times its CPU time after the last (a torch
    // process's map costs the kernel ~7 ms to walk, so 5 of them are read every 0.7 s).
    const double share = memory_round_share(options_, reading.rollup_reads);
    next_rollup_ns_ = now_ns + std::max(static_cast<std::int64_t>(1e9 / options_.memory_hz),
                                        static_cast<std::int64_t>(static_cast<double>(reading.rollup_cost_ns) / share));
  }
  previous_ = std::move(reading.next);
  // The files of processes and threads not read since the last walk of the tree, whose children
  // files are kept open until the next.
  if (reading.walked) files_.sweep();
  UtilizationSample s = std::move(reading.s);
  if (have_previous) record(s);
  if (options_.retarget && have_previous)
    if (const int pid = options_.retarget(s); pid > 0) follow(pid);
  return s;
}


void UtilizationSampler::record(const UtilizationSample& s) {
  std::lock_guard lock(mutex_);
  ring_[ring_next_] = s;
  ring_next_ = (ring_next_ + 1) % ring_.size();
  ++total_samples_;
  auto put = [&](const std::string& key, std::optional<double> value) {
    if (value) series_[key].add(*value);
  };
  put("cpu_system_ratio", s.cpu_system_ratio);
  put("cpu_process_ratio", s.cpu_process_ratio);
  // Cores taken by the process's threads that are no span lane (a BLAS or OpenMP pool, the
  // user's own threads): what competes with the loader's workers for the CPUs.
  if (!s.threads.empty()) {
    double other = 0;
    for (const ThreadCpu& t : s.threads)
      if (!t.lane) other += t.ratio;
    put("cpu_other_threads_cores", other);
  }
  // Cores taken by descendant processes: a PyTorch DataLoader's workers, in a wrapped loop.
  if (s.cpu_process_ratio) {
    double children = 0;
    for (const ProcessCpu& p : s.children) children += p.cores;
    put("cpu_child_processes_cores", children);
  }
  if (s.memory_available_bytes) put("memory_available_bytes", static_cast<double>(*s.memory_available_bytes));
  if (s.rss_bytes) put("rss_bytes", static_cast<double>(*s.rss_bytes));
  put("pinned_bytes", static_cast<double>(s.pinned_bytes));
  if (!s.disks.empty()) {
    double read = 0, busy = 0;
    for (const DiskSample& d : s.disks) read += d.read_bytes_per_s, busy = std::max(busy, d.busy_ratio);
    put("disk_read_bytes_per_s", read);
    put("disk_busy_ratio", busy);
  }
  if (s.cpu_pressure) put("cpu_pressure_ratio", s.cpu_pressure->some_avg10);
  if (s.io_pressure) put("io_pressure_ratio", s.io_pressure->some_avg10);
  if (s.memory_pressure) put("memory_pressure_ratio", s.memory_pressure->some_avg10);
  for (const GpuSample& g : s.gpus) {
    const std::string gpu = "gpu" + std::to_string(g.index) + "_";
    put(gpu + "util_ratio", g.util_ratio);
    if (g.memory_used_bytes)
      put(gpu + "memory_used_bytes", static_cast<double>(*g.memory_used_bytes));
    put(gpu + "pcie_rx_bytes_per_s", g.pcie_rx_bytes_per_s);
    const bool sm_share =
        std::any_of(g.processes.begin(), g.processes.end(),
                    [](const GpuProcessSample& p) { return p.sm_util_ratio.has_value(); });
    const std::pair<const char*, bool> readings[] = {
        {"util_ratio", g.util_ratio.has_value()},
        {"memory_util_ratio", g.memory_util_ratio.has_value()},
        {"memory_used_bytes", g.memory_used_bytes.has_value()},
        {"memory_total_bytes", g.memory_total_bytes.has_value()},
        {"pcie_tx_bytes_per_s", g.pcie_tx_bytes_per_s.has_value()},
        {"pcie_rx_bytes_per_s", g.pcie_rx_bytes_per_s.has_value()},
        {"sm_clock_mhz", g.sm_clock_mhz.has_value()},
        {"power_watts", g.power_watts.has_value()},
        {"process_sm_util_ratio", sm_share}};
    for (const auto& [reading, taken] : readings)
      if (taken) gpu_readings_taken_.insert(gpu + reading);
    for (const auto& [reading, why] : g.unavailable)
      gpu_readings_failed_.emplace(gpu + reading, why);
  }
  for (const ThreadCpu& t : s.threads) {
    auto& [sum, count] = thread_busy_[t.name];
    sum += t.ratio;
    ++count;
  }
}

void UtilizationSampler::start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard lock(run_mutex_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { run(); });
}

void UtilizationSampler::stop() {
  {
    std::lock_guard lock(run_mutex_);
    stopping_ = true;
  }
  run_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// Every other look is at the process read thread by thread; the rest go to the job's other ranks
// in turn, so that each rank's data stall is measured too.
void UtilizationSampler::look_at_main_thread() {
  const bool other_rank = !probe_ranks_.empty() && probe_turn_++ % 2 == 1;
  const int pid = other_rank ? probe_ranks_[rank_turn_++ % probe_ranks_.size()] : target_pid_;
  // Its own descendants only, found once a sample: a pipe or socket another rank holds is no
  // loader's.
  auto [loaders, fresh] = probe_loaders_.try_emplace(pid);
  if (fresh) loaders->second = descendants_in(probe_children_, pid > 0 ? pid : ::getpid());
  const MainThreadState state = wait_probe_->look(pid, loaders->second);
  add_look(other_rank ? pending_rank_waits_[pid] : pending_waits_, state, wait_probe_->stack_read());
  if (!wait_probe_->why_not().empty()) note_unavailable("main_thread_wait", wait_probe_->why_not());
}

void UtilizationSampler::run() {
  using Clock = std::chrono::steady_clock;
  const auto period = std::chrono::nanoseconds(static_cast<std::int64_t>(1e9 / options_.hz));
  const auto period_of = [](double hz) {
    return std::chrono::nanoseconds(static_cast<std::int64_t>(1e9 / hz));
  };
  const auto started = Clock::now();
  auto next = started;
  std::unique_lock lock(run_mutex_);
  while (!stopping_) {
    const bool later = options_.wait_probe_later_hz > 0 && next - started >= kWaitProbeFastPeriod;
    // Later never more often than at first (a per-task watch shares a machine's looks).
    const auto look_period =
        !wait_probe_ ? period
        : later      ? period_of(std::min(options_.wait_probe_later_hz, options_.wait_probe_hz))
                     : period_of(options_.wait_probe_hz);
    lock.unlock();
    const UtilizationSample s = sample(steady_now_ns());
    if (options_.on_sample && s.cpu_system_ratio) {
      try {
        options_.on_sample(s);
      } catch (...) {
        // A failing consumer (a full disk under timeseries.csv) must not stop the sampling.
      }
    }
    lock.lock();
    next += period;
    // The looks between two samples, evenly spaced from the last one's start (a sample can take
    // tens of milliseconds of a big tree); those whose time has passed are skipped.
    for (auto look = next - period + look_period; wait_probe_ && look + look_period / 2 < next;
         look += look_period) {
      if (look < Clock::now()) continue;
      if (run_cv_.wait_until(lock, look, [this] { return stopping_; })) return;
      lock.unlock();
      look_at_main_thread();
      lock.lock();
    }
    run_cv_.wait_until(lock, next, [this] { return stopping_; });
  }
}

void UtilizationSampler::follow(int pid) {
  if (pid == target_pid_) return;
  target_pid_ = pid;
  proc_ = std::to_string(pid);
  previous_.process_ticks.reset();  // another process's CPU time: no ratio across the switch
}

std::vector<UtilizationSample> UtilizationSampler::recent() const {
  std::lock_guard lock(mutex_);
  std::vector<UtilizationSample> out;
  const std::size_t n = std::min(total_samples_, ring_.size());
  const std::size_t first = (ring_next_ + ring_.size() - n) % ring_.size();
  for (std::size_t i = 0; i < n; ++i) out.push_back(ring_[(first + i) % ring_.size()]);
  return out;
}

UtilizationSummary UtilizationSampler::summary() const {
  std::lock_guard lock(mutex_);
  UtilizationSummary out;
  out.samples = total_samples_;
  for (const auto& [key, values] : series_) {
    SeriesSummary s;
    s.count = values.count();
    s.mean = values.mean();
    s.p95 = values.quantile(0.95);
    s.max = values.max();
    out.series[key] = s;
  }
  for (const auto& [name, acc] : thread_busy_)
    out.thread_busy_mean[name] = acc.first / static_cast<double>(std::max<std::size_t>(acc.second, 1));
  out.unavailable = unavailable_;
  // A GPU reading that failed at times but came at others is measured, with fewer samples.
  for (const auto& [reading, why] : gpu_readings_failed_)
    if (!gpu_readings_taken_.contains(reading)) out.unavailable.emplace(reading, why);
  return out;
}

}  // namespace feedscope
