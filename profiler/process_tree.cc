#include "profiler/process_tree.h"

#include <algorithm>

namespace feedscope {

const char* to_string(ProcessRole role) {
  switch (role) {
    case ProcessRole::trainer: return "trainer";
    case ProcessRole::loader_worker: return "loader_worker";
    case ProcessRole::other: return "other";
  }
  return "other";
}

ProcessRole classify_descendant(const ProcessCpu& p, int trainer_pid, const std::string& trainer_name) {
  const auto starts = [&](const char* prefix) { return p.name.rfind(prefix, 0) == 0; };
  const auto runs = [&](const char* text) { return p.cmdline.find(text) != std::string::npos; };
  if (starts("pt_data_worker") || starts("pt_multiprocess")) return ProcessRole::loader_worker;
  // multiprocessing's spawn and forkserver start methods run a fresh interpreter per worker.
  if (runs("multiprocessing.spawn") || runs("--multiprocessing-fork")) return ProcessRole::loader_worker;
  // The fork start method (Linux's default): a copy of the trainer, same name and command line;
  // multiprocessing's own helpers run `-c "from multiprocessing.<module> import main"`.
  if (p.ppid == trainer_pid && p.name == trainer_name && !runs("multiprocessing."))
    return ProcessRole::loader_worker;
  return ProcessRole::other;
}

void ProcessTreeDigest::add(const UtilizationSample& s) {
  std::lock_guard lock(mutex_);
  const double dt = samples_ > 0 ? static_cast<double>(s.time_ns - previous_ns_) / 1e9 : 0;
  previous_ns_ = s.time_ns;
  if (samples_ == 0) first_ns_ = s.time_ns;
  last_ns_ = s.time_ns;
  ++samples_;
  const double cpus = static_cast<double>(std::max<std::size_t>(s.cpu_core_ratio.size(), 1));

  double other_threads = 0;
  char main_state = '?';
  for (const ThreadCpu& t : s.threads) {
    if (t.tid == trainer_pid_) {
      if (trainer_name_.empty()) trainer_name_ = t.name;
      main_state = t.state;
      main_busy_sum_ += t.ratio;
      main_io_wait_ += t.state == 'D';
      ++main_samples_;
      continue;
    }
    other_threads += t.ratio;
    Thread& thread = threads_[t.tid];
    thread.name = t.name;
    thread.busy_sum += t.ratio;
  }
  other_threads_sum_ += other_threads;

  const auto account = [&](Accumulated& a, double cores, char state, std::uint64_t rss,
                           std::optional<std::uint64_t> read) {
    ++a.process.samples;
    a.cores_sum += cores;
    a.process.cpu_core_seconds += cores * dt;
    a.io_wait_samples += state == 'D';
    a.process.rss_peak_bytes = std::max(a.process.rss_peak_bytes, rss);
    if (read) {
      if (!a.first_read) a.first_read = read;
      a.last_read = read;
    }
  };
  Accumulated& trainer = processes_[trainer_pid_];
  trainer.process.pid = trainer_pid_;
  trainer.process.ppid = parent_pid_;
  trainer.process.name = trainer_name_;
  trainer.process.role = ProcessRole::trainer;
  account(trainer, s.cpu_process_ratio.value_or(0) * cpus, main_state, s.rss_bytes.value_or(0),
          s.process_read_bytes_total);

  double workers = 0, others = 0;
  int alive = 0;
  for (const ProcessCpu& p : s.children) {
    Accumulated& a = processes_[p.pid];
    if (a.process.samples == 0) {
      a.process.pid = p.pid;
      a.process.ppid = p.ppid;
      a.process.role = classify_descendant(p, trainer_pid_, trainer_name_);
    }
    // torch 2.x's workers name themselves a moment after they start.
    if (a.process.role != ProcessRole::loader_worker &&
        classify_descendant(p, trainer_pid_, trainer_name_) == ProcessRole::loader_worker)
      a.process.role = ProcessRole::loader_worker;
    a.process.name = p.name;
    account(a, p.cores, p.state, p.rss_bytes, p.read_bytes_total);
    if (a.process.role == ProcessRole::loader_worker) {
      workers += p.cores;
      ++alive;
      worker_busy_sum_ += std::min(p.cores, 1.0);
      ++worker_readings_;
    } else {
      others += p.cores;
    }
  }
  workers_cores_sum_ += workers;
  worker_samples_ += alive > 0;

  // NVML's per-process readings, for the processes of this tree.
  std::uint64_t gpu_memory = 0;
  for (const GpuSample& g : s.gpus)
    for (const GpuProcessSample& p : g.processes) {
      const auto it = processes_.find(p.pid);
      if (it == processes_.end()) continue;
      WatchedProcess& w = it->second.process;
      const std::uint64_t memory = p.memory_used_bytes.value_or(0);
      w.gpu_memory_peak_bytes = std::max(w.gpu_memory_peak_bytes, memory);
      gpu_memory += memory;
      on_gpu_ = true;
      if (p.sm_util_ratio) {
        it->second.sm_sum += *p.sm_util_ratio;
        ++it->second.sm_samples;
      }
    }
  tree_gpu_memory_peak_ = std::max(tree_gpu_memory_peak_, gpu_memory);
  other_processes_sum_ += others;
  workers_max_ = std::max(workers_max_, alive);
}

ProcessTreeSummary ProcessTreeDigest::summary() const {
  std::lock_guard lock(mutex_);
  ProcessTreeSummary out;
  out.trainer_pid = trainer_pid_;
  out.trainer_name = trainer_name_;
  out.samples = samples_;
  out.sampled_s = static_cast<double>(last_ns_ - first_ns_) / 1e9;
  const auto mean = [](double sum, std::size_t n) { return n == 0 ? 0.0 : sum / static_cast<double>(n); };
  out.main_thread_busy = mean(main_busy_sum_, main_samples_);
  out.main_thread_io_wait = mean(static_cast<double>(main_io_wait_), main_samples_);
  out.other_threads_cores = mean(other_threads_sum_, samples_);
  for (const auto& [tid, thread] : threads_) {
    const double busy = mean(thread.busy_sum, samples_);  // over the run: a thread gone is idle
    if (busy > out.busiest_thread_busy) {
      out.busiest_thread = thread.name + " (" + std::to_string(tid) + ")";
      out.busiest_thread_busy = busy;
    }
  }
  out.workers = workers_max_;
  out.workers_cores = mean(workers_cores_sum_, worker_samples_);
  out.other_processes_cores = mean(other_processes_sum_, samples_);

  std::size_t worker_readings = 0, worker_io_wait = 0;
  std::uint64_t read_bytes = 0;
  bool read_known = false;
  for (const auto& [pid, a] : processes_) {
    WatchedProcess p = a.process;
    p.cpu_cores_mean = mean(a.cores_sum, p.samples);
    p.io_wait_share = mean(static_cast<double>(a.io_wait_samples), p.samples);
    if (a.first_read && a.last_read && *a.last_read >= *a.first_read) {
      p.read_bytes = *a.last_read - *a.first_read;
      read_bytes += p.read_bytes;
      read_known = true;
    }
    if (a.sm_samples > 0) p.gpu_sm_util = a.sm_sum / static_cast<double>(a.sm_samples);
    if (p.role == ProcessRole::trainer) {
      out.trainer_cores = p.cpu_cores_mean;
      out.trainer_gpu_sm_util = p.gpu_sm_util;
    }
    if (p.role == ProcessRole::loader_worker) {
      worker_readings += p.samples;
      worker_io_wait += a.io_wait_samples;
      out.worker_busy_max = std::max(out.worker_busy_max, std::min(p.cpu_cores_mean, 1.0));
    }
    out.processes.push_back(std::move(p));
  }
  out.on_gpu = on_gpu_;
  out.gpu_memory_peak_bytes = tree_gpu_memory_peak_;
  out.worker_busy = mean(worker_busy_sum_, worker_readings_);
  out.workers_io_wait = mean(static_cast<double>(worker_io_wait), worker_readings);
  if (read_known && out.sampled_s > 0)
    out.storage_read_bytes_per_s = static_cast<double>(read_bytes) / out.sampled_s;
  std::stable_partition(out.processes.begin(), out.processes.end(),
                        [](const WatchedProcess& p) { return p.role == ProcessRole::trainer; });
  return out;
}

}  // namespace feedscope
