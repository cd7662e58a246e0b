#include "profiler/rules/facts.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "profiler/diagnosis.h"
#include "profiler/stage_stats.h"
#include "profiler/watch_diagnosis.h"

namespace feedscope {

namespace {

LoaderWork loader_work(const Evidence& e) {
  const LoopSpans& in = *e.loop;
  LoaderWork w;
  for (const Stage stage : {Stage::read, Stage::decode, Stage::transform, Stage::collate}) {
    const StageStats* st = find_stage(in.stages, stage);
    if (st == nullptr || st->count == 0) continue;
    w.busy_s += st->busy_s;
    w.measured = true;
  }
  if (w.measured || in.loader_only || in.num_workers <= 0) return w;
  const std::optional<double> children = e.utilization.cpu_child_processes_cores;
  if (children && *children > 0) {
    w.busy_s = *children * in.wall_s;
    w.measured = true;
    w.from_processes = true;
  }
  return w;
}

// On a GPU a step costs at least the device's time for it: with a loader that keeps the loop
// waiting, the device runs each step's kernels during the wait, after the step's span has closed.
Costs measure_costs(const Evidence& e, const LoaderWork& loader) {
  const LoopSpans& in = *e.loop;
  Costs c;
  const double batches = static_cast<double>(std::max<std::int64_t>(in.batches, 1));
  c.worker = loader.busy_s / batches;
  c.step = in.loader_only ? 0.0 : mean_s(in, Stage::step);
  if (!in.loader_only && in.on_gpu && e.gpu_trace && e.gpu_trace->steps > 0)
    c.step = std::max(c.step, e.gpu_trace->device_s_per_step);
  c.submit = in.h2d_submit_s / batches;
  if (in.batches > 0) c.outside = std::max(0.0, in.wall_s / batches - mean_s(in, Stage::step));
  c.other = std::max(0.0, c.outside - c.submit);
  return c;
}

LoopFacts loop_facts(const Evidence& e) {
  const LoopSpans& in = *e.loop;
  LoopFacts f;
  f.wall = std::max(in.wall_s, 1e-9);
  f.wait = busy(in, Stage::wait);
  f.stall = std::clamp(f.wait / f.wall, 0.0, 1.0);
  f.measured = in.samples_per_s;
  f.loader = loader_work(e);
  f.c = measure_costs(e, f.loader);
  f.load_s = f.loader.busy_s;
  f.h2d_s = busy(in, Stage::h2d);
  f.worker_capacity_s = f.wall * std::max(1, in.num_workers);
  f.cpu_saturation = e.utilization.cpu_process_ratio;
  if (in.on_gpu && e.gpu_trace && e.gpu_trace->steps > 0) f.gpu = &*e.gpu_trace;
  // The training thread handing its batches to the copy engine, a copy from pageable memory being
  // the copy itself: time outside both the wait and the step.
  f.submit_share = in.h2d_submit_s / f.wall;
  const double per_batch = in.batches > 0 ? f.wall / static_cast<double>(in.batches) : 0.0;
  f.gpu_paces_loop = f.gpu != nullptr && per_batch > 0 &&
                     f.gpu->device_s_per_step >= kGpuBusyCompute * per_batch;
  f.copies_on_the_thread = f.submit_share >= kH2dStepShare && !f.gpu_paces_loop;
  f.input_side = !f.copies_on_the_thread && (in.loader_only || f.stall >= kModeratelyInputBound);
  f.loader_rate = predicted_batches_per_s(Costs{f.c.worker, 0}, std::max(1, in.num_workers),
                                          e.cpus, in.on_gpu) *
                  static_cast<double>(in.batch_size);
  return f;
}

CpuBudget cpu_budget(const Evidence& e) {
  const ProcessTreeSummary& t = *e.tree;
  CpuBudget b;
  b.system_busy = series_mean(e.utilization, "cpu_system_ratio").value_or(0);
  // Threads that yield their core spin only because nothing else wants it: their time is idle.
  b.idle_cores = std::min<double>(e.cpus, std::max(0.0, e.cpus * (1 - b.system_busy)) +
                                              t.yielding_threads_cores);
  b.program_cores = std::max(0.0, t.trainer_cores + t.workers_cores + t.other_processes_cores -
                                      t.yielding_threads_cores);
  b.queued_cores = t.main_thread_run_wait.value_or(0) + t.workers * t.worker_run_wait.value_or(0);
  return b;
}

TreeFacts tree_facts(const Evidence& e) {
  const ProcessTreeSummary& t = *e.tree;
  TreeFacts f;
  f.cpu = cpu_budget(e);
  f.traced = e.gpu_trace && e.gpu_trace->kernels > 0;
  // A training thread spinning in a CUDA sync is waiting, not working: that time comes out of its
  // busy share before any threshold.
  f.spinning = f.traced ? std::min(sync_share(*e.gpu_trace), t.main_thread_busy) : 0.0;
  f.working = t.main_thread_busy - f.spinning;
  f.trainer_pinned = f.working >= kThreadPinned;
  f.workers_busy = t.workers > 0 && worker_demand(t) >= kWorkersSaturated;
  f.io_wait = t.workers > 0 ? t.workers_io_wait : t.main_thread_io_wait;
  f.storage = f.io_wait >= kIoWaitHigh && t.storage_read_bytes_per_s &&
              *t.storage_read_bytes_per_s >= kStorageReadBytesPerS;
  // With workers, the queue's waits measure it; without, only the Python stack tells loading
  // from stepping, so most looks must have read it, and one at least must have seen the
  // DataLoader: a program that loads some other way (its own iterator, DALI) is not measured.
  if (const auto& w = t.main_thread_waits;
      w && w->looks >= kMinQueueLooks &&
      (t.workers > 0 || (2 * w->stack_looks >= w->looks && w->loading > 0)))
    f.queue_stall = static_cast<double>(w->on_loader()) / static_cast<double>(w->looks);
  f.not_waiting = f.queue_stall ? 1.0 - *f.queue_stall : f.working;
  const double demand = worker_demand(t);
  f.loader_pace = t.workers > 0 && demand > 0.05 ? 1.0 / demand : 0.0;
  return f;
}

MemoryFacts memory_facts(const ProcessTreeSummary& t) {
  MemoryFacts m;
  if (t.memory && t.memory->available_last_bytes > 0)
    m.headroom_bytes = static_cast<double>(t.memory->available_last_bytes);
  double private_sum = 0, shared_sum = 0;
  for (const WatchedProcess& p : t.processes) {
    if (!p.memory) continue;
    if (p.role == ProcessRole::trainer) m.trainer = &p;
    if (!p.memory->private_bytes_per_s) continue;
    if (p.role == ProcessRole::loader_worker) m.workers.push_back(&p);
    if (!memory_grows(p)) continue;
    m.growing.push_back(&p);
    const double shared = p.memory->shared_bytes_per_s.value_or(0);
    if (p.role == ProcessRole::loader_worker &&
        -shared >= kMemoryCopiedShare * *p.memory->private_bytes_per_s) {
      m.copying.push_back(&p);
      private_sum += *p.memory->private_bytes_per_s;
      shared_sum += shared;
    }
  }
  if (!m.copying.empty()) {
    const double alive = std::max(t.workers, 1);
    m.copy_private_bytes_per_s = private_sum / static_cast<double>(m.copying.size()) * alive;
    m.copy_shared_bytes_per_s = shared_sum / static_cast<double>(m.copying.size()) * alive;
  }
  return m;
}

}  // namespace

bool memory_grows(const WatchedProcess& p) {
  if (!p.memory || !p.memory->private_bytes_per_s || !p.memory->steady) return false;
  const double rate = *p.memory->private_bytes_per_s;
  return rate >= kMemoryGrowthBytesPerS && rate * p.memory->window_s >= kMemoryGrowthBytes;
}

double busy(const LoopSpans& in, Stage stage) {
  const StageStats* st = find_stage(in.stages, stage);
  return st ? st->busy_s : 0.0;
}

double mean_s(const LoopSpans& in, Stage stage) {
  const StageStats* st = find_stage(in.stages, stage);
  return st ? st->mean_ms / 1e3 : 0.0;
}

double predicted_batches_per_s(const Costs& c, int workers, double cpus, bool on_gpu) {
  if (c.worker <= 0 && c.step <= 0) return 0;
  if (workers == 0) return 1.0 / (c.worker + c.step);
  double rate = c.worker > 0 ? workers / c.worker : INFINITY;
  if (c.step > 0) rate = std::min(rate, 1.0 / c.step);
  const double cpu_per_batch = c.worker + (on_gpu ? 0.0 : c.step);
  if (cpu_per_batch > 0) rate = std::min(rate, cpus / cpu_per_batch);
  return rate;
}

double CpuBudget::usable_idle() const { return std::max(0.0, idle_cores - queued_cores); }

bool CpuBudget::full() const { return usable_idle() < kIdleCoresFull; }

double CpuBudget::growth() const {
  return program_cores > 0 ? (program_cores + usable_idle()) / program_cores : 1.0;
}

std::optional<double> series_mean(const Utilization& u, const char* name) {
  const auto it = u.series.find(name);
  if (it == u.series.end()) return std::nullopt;
  return it->second.mean;
}

double worker_demand(const ProcessTreeSummary& t) {
  return std::min(1.0, t.worker_busy + t.worker_run_wait.value_or(0));
}

double sync_share(const GpuTraceSummary& g) {
  return g.step_wall_s > 0 ? std::clamp(g.sync_wait_s / g.step_wall_s, 0.0, 1.0) : 0.0;
}

double gpu_work_share(const GpuTraceSummary& g) {
  double busy = g.gpu_busy_ratio;
  // Several devices: the busiest one's, not the union's, which reads busy while any one is.
  if (const GpuTraceSummary::DeviceBusy* d = busiest_device(g)) busy = std::min(busy, d->busy_ratio);
  return std::max(0.0, busy - g.collective_alone_share);
}

const GpuTraceSummary::DeviceBusy* busiest_device(const GpuTraceSummary& g) {
  const GpuTraceSummary::DeviceBusy* out = nullptr;
  for (const GpuTraceSummary::DeviceBusy& d : g.devices)
    if (out == nullptr || d.busy_ratio > out->busy_ratio) out = &d;
  return out;
}

const GpuTraceSummary::DeviceBusy* idlest_device(const GpuTraceSummary& g) {
  const GpuTraceSummary::DeviceBusy* out = nullptr;
  for (const GpuTraceSummary::DeviceBusy& d : g.devices)
    if (out == nullptr || d.busy_ratio < out->busy_ratio) out = &d;
  return out;
}

bool graphed(const GpuTraceSummary& g) { return g.kernels > 0 && 2 * g.graph_kernels >= g.kernels; }

// launch_calls counts driver launches too where the tracer names them as launches; either way
// they are at most all of them.
bool compiled(const GpuTraceSummary& g) {
  return g.triton_kernels > 0 && 2 * g.triton_kernels >= g.kernels;
}

double launch_host_share(const GpuTraceSummary& g) {
  if (g.step_wall_s <= 0) return 0;
  return static_cast<double>(g.launch_calls) * g.mean_launch_call_us / 1e6 / g.step_wall_s;
}

double other_syncs_per_step(const GpuTraceSummary& g) {
  const double steps = static_cast<double>(std::max<std::int64_t>(g.steps, 1));
  return std::max(0.0, g.syncs_per_step - static_cast<double>(g.syncs_after_h2d) / steps);
}

double other_sync_wait_s(const GpuTraceSummary& g) {
  return std::max(0.0, g.sync_wait_s - g.sync_after_h2d_wait_s);
}

std::string syncs_by_call(const GpuTraceSummary& g) {
  std::vector<std::pair<std::int64_t, std::string>> calls;
  for (const auto& [call, n] : g.syncs_by_call) calls.emplace_back(n, call);
  std::sort(calls.rbegin(), calls.rend());
  std::string out;
  for (const auto& [n, call] : calls) out += (out.empty() ? "" : ", ") + call + " " + std::to_string(n);
  return out;
}

Facts facts_of(const Evidence& e) {
  Facts f{e, std::nullopt, std::nullopt, std::nullopt};
  if (e.loop) f.loop = loop_facts(e);
  if (e.tree) f.tree = tree_facts(e);
  if (e.tree && e.tree->memory && e.tree->memory->rollup_readings > 0) f.memory = memory_facts(*e.tree);
  return f;
}

}  // namespace feedscope
