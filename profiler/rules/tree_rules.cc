// The rules that read a program from outside (`feedscope watch` without a Session's spans): its
// process tree by role, the machine's cores, the CUDA trace or NVML. In docs/diagnosis.md's order.
#include <algorithm>
#include <cmath>
#include <string>

#include "profiler/detail/format.h"
#include "profiler/diagnosis.h"
#include "profiler/program_torch.h"
#include "profiler/rules/loop_advice.h"
#include "profiler/rules/rules.h"
#include "profiler/watch_diagnosis.h"

namespace feedscope::rules {

using detail::fmt;

namespace {

Recommendation advice(std::string setting, std::string action, std::string basis) {
  Recommendation r;
  r.setting = std::move(setting);
  r.action = std::move(action);
  r.basis = std::move(basis);
  return r;
}


// "the trainer 0.97 cores, 2 loader workers 1.00 cores, other processes 0.02 cores": who holds
// the cores, and who waited for one.
std::string cpu_holders(const ProcessTreeSummary& t, const CpuBudget& b, int cpus) {
  // Hogwild's N training processes are named together; the ones not followed thread by thread
  // are otherwise among the "other processes".
  double other_trainers = 0;
  for (const WatchedProcess& p : t.processes)
    if (p.role == ProcessRole::trainer && p.pid != t.trainer_pid) other_trainers += p.cpu_cores_mean;
  std::string out = t.trainers > 1 ? fmt("%d training processes %.2f cores", t.trainers, t.trainer_cores + other_trainers)
                                   : fmt("the training process %.2f cores", t.trainer_cores);
  if (t.workers > 0) out += fmt(", %d loader workers %.2f cores", t.workers, t.workers_cores);
  const double others = std::max(0.0, t.other_processes_cores - other_trainers);
  if (others >= 0.01)
    out += fmt(t.ranks > 1 ? ", the job's other ranks and processes %.2f cores" : ", its other processes %.2f cores",
               others);
  const double outside = cpus * b.system_busy - b.program_cores;
  if (outside >= 0.05) out += fmt(", processes outside the %s %.2f cores", t.ranks > 1 ? "job" : "program", outside);
  if (t.main_thread_run_wait || t.worker_run_wait) {
    out += "; waiting for a core (run queue):";
    if (t.main_thread_run_wait) out += fmt(" the training thread %.0f%% of the time", 100 * *t.main_thread_run_wait);
    if (t.worker_run_wait)
      out += fmt("%s a loader worker %.0f%%", t.main_thread_run_wait ? "," : "", 100 * *t.worker_run_wait);
  }
  return out;
}


// What to make cheaper in the workers, by the data they were seen opening: image advice only for
// images; for shards, decoding their members; for none (data in memory, a memory-mapped array, a
// format of its own), the Dataset's own code.
Recommendation cheaper_preprocessing(const Evidence& in) {
  const std::string basis = "no prediction: the cost of each transform is not measured without spans";
  if (in.data_kind == "none")
    return advice("", "Make the Dataset's own work cheaper: its workers were not seen opening an "
                      "image or shard file (the data is in memory, a memory-mapped array, or a format of its "
                      "own), so the time is its __getitem__ and collate: precompute what each "
                      "sample computes, or batch it (a sampler that yields index lists). A "
                      "feedscope Session's custom stages time each part.",
                  basis);
  if (in.data_kind == "shards")
    return advice("", "Make preprocessing cheaper: the workers read tar or TFRecord shards; decode "
                      "their members at reduced size, crop before resizing, cache decoded "
                      "samples, or move augmentation to the GPU.",
                  basis);
  return advice("", std::string(in.data_kind == "images" ? "Make preprocessing cheaper: the workers decode image files; " :
                                                           "Make preprocessing cheaper: if it decodes images, ") +
                        "decode at reduced size, crop before resizing, cache decoded samples, or "
                        "move augmentation to the GPU.",
                basis);
}

// Loader workers at their limit: more of them where cores are idle, with a speed-up from their
// measured rate and the cores they would get; cheaper preprocessing where none are.
void workers_saturated(const Evidence& in, const TreeFacts& T, Diagnosis& d) {
  const CpuBudget& cpu = T.cpu;
  // What the training thread does beside waiting for data: measured where its waits on the
  // queue were looked at, else its busy share.
  const double working = T.not_waiting;
  const std::string working_basis = T.queue_stall ? "measured: the rest of its time it was blocked on the DataLoader queue"
                                                  : "its busy share";
  const ProcessTreeSummary& t = *in.tree;
  d.bottleneck = "cpu_preprocess";
  // Samples/s grows with the workers until the training thread is full (it works `working` of
  // its time per batch today) or the machine's cores are: a fraction of an idle core is worth a
  // worker while the training thread waits.
  const double by_trainer = 1.0 / std::max(working, 0.05);
  const double by_cores = cpu.growth();
  const double reachable = std::min(by_trainer, by_cores);
  const int workers = static_cast<int>(std::ceil(t.workers * reachable - 1e-9));
  const double by_workers = static_cast<double>(workers) / t.workers;
  const double predicted = std::min({by_workers, by_trainer, by_cores});
  if (workers > t.workers && predicted >= kMinUsefulSpeedup) {
    Recommendation r = advice(
        "num_workers=" + std::to_string(workers),
        fmt("Raise num_workers from %d to %d: a worker is busy %.0f%% of a core and %.1f cores "
            "are idle.",
            t.workers, workers, 100 * worker_demand(t), cpu.usable_idle()),
        fmt("what-if: samples/s grows with the workers (%d/%d = %.2fx) until the training thread, "
            "working %.0f%% of its time now (%s), is full (%.2fx) or the cores are (the program's "
            "%.2f cores and the %.2f idle: %.2fx); sure to the extent each worker keeps its "
            "measured rate: medium (no spans: the rate is inferred from CPU, not counted in samples)",
            workers, t.workers, by_workers, 100 * working, working_basis.c_str(), by_trainer,
            cpu.program_cores, cpu.usable_idle(), by_cores));
    r.predicted_speedup = predicted;
    d.verdict = fmt("Input-bound: the %d loader workers are busy while the training thread waits; "
                    "raise num_workers to %d (predicted %.2fx).",
                    t.workers, workers, predicted);
    d.recommendations.push_back(std::move(r));
    return;
  }
  d.verdict = cpu.full()
                  ? fmt("Input-bound with no idle core: the %d loader workers are busy and the "
                        "machine's %d cores are full (%s); make preprocessing cheaper.",
                        t.workers, in.cpus, cpu_holders(t, cpu, in.cpus).c_str())
                  : fmt("Input-bound: the %d loader workers are busy; more of them would gain "
                        "less than %.0f%% (the training thread caps it at %.2fx, the %.1f idle "
                        "cores at %.2fx); make preprocessing cheaper.",
                        t.workers, 100 * (kMinUsefulSpeedup - 1), by_trainer, cpu.usable_idle(),
                        by_cores);
  d.recommendations.push_back(cheaper_preprocessing(in));
}


// The training step on the CPU is the limit. On one thread beside idle cores, torch's intra-op
// pool is the first thing to try; a cheaper step is the rest, in the program's torch.
void step_bound(const Evidence& in, const CpuBudget& cpu, Diagnosis& d) {
  const ProcessTreeSummary& t = *in.tree;
  d.bottleneck = "cpu_compute";
  const double computing = t.working_other_threads_cores();
  const bool one_thread = computing < kOneThreadOthers;
  d.verdict = fmt("CPU-bound: the training step is the limit (main thread busy %.0f%%, its "
                  "compute threads %.2f cores)%s.",
                  100 * t.main_thread_busy, computing,
                  t.workers > 0 ? "; the loader workers keep up" : "");
  if (one_thread && cpu.usable_idle() >= kIdleCoreWorthAThread) {
    // A second thread from half an idle core on; one more for each further whole core.
    const int threads = 1 + std::max(1, static_cast<int>(std::floor(cpu.usable_idle() + 0.25)));
    d.verdict += fmt(" The step runs on one thread while %.1f cores are idle.", cpu.usable_idle());
    // A suggestion to measure, not a setting claimed: on the corpus (tests/corpus,
    // bench/corpus_public.json) a second thread measured 1.17x to 1.61x on four programs and 0.57x
    // to 0.78x on three, from the same outside view: what the pool's threads cost the processes
    // beside them is not seen from outside any more than the step's parallel share.
    d.recommendations.push_back(advice(
        "", fmt("Try giving torch's intra-op pool the idle cores, and measure it: run once with "
                "OMP_NUM_THREADS=%d (or torch.set_num_threads(%d); remove a set_num_threads(1)). "
                "It can also slow the program down where the threads compete with its loader "
                "workers.",
                threads, threads),
        fmt("no prediction: the share of the step that runs in parallel, and what more threads "
            "cost the processes beside them, are not seen from outside; at most %.2fx, the cores "
            "it would get",
            std::min(static_cast<double>(threads), 1 + cpu.usable_idle()))));
    d.recommendations.back().changes = {fmt("threads=%d", threads)};  // `watch --try` settles it
  }
  const bool compile = in.torch && torch_major(in.torch->version) >= 2;
  d.recommendations.push_back(advice(
      "", std::string("Make the step cheaper (a smaller model, fewer or cheaper operations") +
              (compile ? ", torch.compile" : "") + ") or run it on a GPU" +
              (t.workers > 0 ? "; more loader workers would not help." : "."),
      "no prediction: the step's cost is not measured without spans"));
  if (in.torch && !compile)
    d.evidence.push_back("the program runs torch " + in.torch->version + " (" + in.torch->source +
                         "): torch.compile needs 2.0 or later");
}


// One thread loads and steps (num_workers=0): from outside, which of the two holds it is not
// seen. A worker helps where loading does, more threads where the step does; either guess told
// as the answer is wrong for half the programs (the corpus' LSTM has no DataLoader at all), so
// both are offered as what to try, with no setting claimed, and the four lines that would tell.
void loads_and_steps_in_one_thread(const Evidence& in, const CpuBudget& cpu, Diagnosis& d) {
  const ProcessTreeSummary& t = *in.tree;
  d.bottleneck = "cpu_compute";
  d.verdict = fmt("CPU-bound: the training thread is busy %.0f%% and loads its own data "
                  "(num_workers=0); from outside feedscope cannot split loading from the step.",
                  100 * t.main_thread_busy);
  if (cpu.usable_idle() < kIdleCoreWorthAThread) {
    d.verdict += fmt(" No core is free for a loader worker or a second thread (%.1f idle).",
                     cpu.usable_idle());
    d.recommendations.push_back(advice(
        "", "Make the loading or the step cheaper; wrap the loop with feedscope (four lines) to "
            "see which one it is.",
        "no prediction: loading and the step share one thread"));
    return;
  }
  d.recommendations.push_back(advice(
      "", fmt("Try what the %.1f idle cores allow: if it loads with a DataLoader, num_workers=2 "
              "(feedscope sweep -- COMMAND ... {num_workers}); if the step is torch on one thread, "
              "torch.set_num_threads(2). Wrapping the loop with feedscope (four lines) measures "
              "loading and the step apart and says which.",
              cpu.usable_idle()),
      "no prediction: loading and the step share one thread, and which of them holds it is not "
      "seen from outside"));
  d.recommendations.back().changes = {"num_workers=2", "threads=2"};
}


// num_workers=0, its loading measured by its Python stack: DataLoader workers take the loading off
// the training thread, as many as keep up with the step that is left, where a core is free for
// them. With none free, a worker takes its core from the step: pytorch/examples' mnist_hogwild (two
// training processes on 2 cores, 35 % of their looks loading, 0.2 cores idle) was told
// num_workers=1 at 1.06x and measured 0.46x (its spawned workers start again every epoch).
void loading_share_measured(const TreeFacts& T, Diagnosis& d) {
  const double load = *T.queue_stall;
  d.bottleneck = "cpu_preprocess";
  const double by_cores = T.cpu.growth();
  d.verdict = fmt("Input-bound: the training thread loads its own data (num_workers=0) %.0f%% of the "
                  "time (its Python stack in torch.utils.data, measured from outside); DataLoader "
                  "workers would load while it steps.",
                  100 * load);
  if (T.cpu.usable_idle() < kIdleCoreWorthAThread) {
    d.verdict += fmt(" No core is free for them (%.1f idle).", T.cpu.usable_idle());
    d.recommendations.push_back(advice(
        "", "Make the loading cheaper (decode and transform less per sample, or keep the data "
            "ready-made in memory), or free cores for loader workers: a worker would take its "
            "core from the step.",
        fmt("no prediction: at most %.2fx, the idle cores given to the program, less what a "
            "worker costs to start and to pickle its batches across",
            by_cores)));
    return;
  }
  const double by_thread = 1.0 / std::max(1.0 - load, 0.05);
  const double predicted = std::min(by_thread, by_cores);
  // Each worker loads at most a core's worth: as many as carry the loading at the predicted pace.
  const int workers = std::max(1, static_cast<int>(std::ceil(predicted * load - 1e-9)));
  Recommendation r = advice(
      "num_workers=" + std::to_string(workers),
      fmt("Set num_workers=%d: %s load%s while the training thread steps.", workers,
          workers == 1 ? "a worker process" : fmt("%d worker processes", workers).c_str(),
          workers == 1 ? "s" : ""),
      fmt("what-if: the step alone is %.0f%% of the thread's time now: %.2fx once the loading is "
          "off it, or what the cores allow (the program's %.2f cores and the %.2f idle: %.2fx); "
          "sure to the extent the loading moves whole into workers (each batch is then also "
          "pickled across): medium",
          100 * (1 - load), by_thread, T.cpu.program_cores, T.cpu.usable_idle(), by_cores));
  r.predicted_speedup = predicted;
  d.recommendations.push_back(std::move(r));
}

// Nothing pinned, nothing saturated by itself, but the machine's cores are full: the processes
// share them, and the one that needs more cannot get it.
void cores_full(const Evidence& in, const CpuBudget& cpu, Diagnosis& d) {
  const ProcessTreeSummary& t = *in.tree;
  d.bottleneck = t.workers_cores > t.trainer_cores ? "cpu_preprocess" : "cpu_compute";
  d.verdict = fmt("CPU-bound: the machine's %d cores are full (%.0f%% busy): %s.", in.cpus,
                  100 * cpu.system_busy, cpu_holders(t, cpu, in.cpus).c_str());
  d.recommendations.push_back(advice(
      "", t.workers > 0
              ? "More loader workers would not help: no core is free. Make the work on the "
                "busiest processes cheaper, or stop what else runs on the machine."
              : "No core is free: make the step or the loading cheaper, or stop what else runs on "
                "the machine.",
      "no prediction: with every core shared, which process gains from a freed core is not "
      "measured"));
}


// Which GPU-side limit the trace shows, or none where neither the GPU nor the host is busy.
// `host_busy`: the training thread is on its core all the time, launching or spinning in a sync;
// either way the host's loop around the GPU sets the pace.
const char* gpu_limit(const GpuTraceSummary& g, bool host_busy) {
  if (g.h2d_share >= kH2dStepShare && g.h2d_pageable_bytes > g.h2d_pinned_bytes) return "host_to_device";
  if (gpu_work_share(g) >= kGpuBusyCompute) return "gpu_compute";
  // An idle GPU is launch-bound only while the host is busy launching (or waiting on it).
  if (host_busy) return "launch_overhead";
  return nullptr;
}


// `loader_pace`: how many times today's rate the loader workers can carry (1 / their demand of a
// core), 0 where there are none; a faster loop waits for them.
void gpu_diagnosis(const std::string& limit, const GpuTraceSummary& g, double launching,
                   double loader_pace, Diagnosis& d) {
  d.bottleneck = limit;
  if (limit == "host_to_device") {
    d.verdict = fmt("Copy-bound: host-to-device copies take %.0f%% of the time, mostly from "
                    "pageable memory.",
                    100 * g.h2d_share);
    d.recommendations.push_back(advice(
        "pin_memory=True", "Set pin_memory=True in the DataLoader and copy with "
                           ".to(device, non_blocking=True).",
        "no prediction: pinned copy speed on this machine is not measured in this run"));
  } else if (limit == "gpu_compute") {
    d.verdict = fmt("GPU-bound: the GPU is busy %.0f%% of the time; the input keeps up.",
                    100 * gpu_work_share(g));
    d.recommendations.push_back(advice(
        "", "Make the GPU's work cheaper: mixed precision (torch.autocast), channels_last, "
            "a fused optimizer.",
        "no prediction: depends on the model's kernels"));
  } else {
    const double waiting = sync_share(g);
    // Kernels from CUDA graph replays or compiled code, with little host time in launch calls:
    // the launches are not what the host spends its time on.
    const bool launches_cheap = (graphed(g) || compiled(g)) && launch_host_share(g) < kLaunchHostShare;
    if (waiting < kSyncWaitDominant && launches_cheap) {
      host_dispatch_finding(g, launching, loader_pace, d);
      return;
    }
    if (waiting >= kSyncWaitDominant) {
      d.verdict = fmt("Sync-bound: the training thread waits in host syncs %.0f%% of the time (%.0f "
                      "per second: %s), and between them the GPU idles: it is busy only %.0f%%.",
                      100 * waiting, g.syncs / std::max(g.step_wall_s, 1e-9),
                      syncs_by_call(g).c_str(), 100 * g.gpu_busy_ratio);
    } else {
      d.verdict = fmt("Launch-bound: the GPU is busy only %.0f%% of the time, running %.1f us "
                      "kernels, while the training thread is busy %.0f%% launching them.",
                      100 * g.gpu_busy_ratio, g.mean_kernel_us, 100 * launching);
    }
    // The syncs after an input copy (.to(device)) have their own advice (blocking_input_copy).
    if (g.syncs > g.syncs_after_h2d && other_sync_wait_s(g) > 0.05 * g.step_wall_s) {
      // Without the waits the host queues ahead, and an iteration costs the longer of the host's
      // own work and the GPU's: each is a share of the same traced time.
      Recommendation r = advice(
          "no per-step sync",
          "Remove the host sync in every iteration (.item(), .cpu(), printing a tensor): read the "
          "loss every N steps, so the CPU queues work ahead of the GPU.",
          fmt("what-if: without the %.0f%% of the time blocked in syncs, the loop runs at the pace "
              "of the longer of the training thread's own work (%.0f%% of the time) and the GPU's "
              "(busy %.0f%%): 1 / max(%.2f, %.2f)",
              100 * waiting, 100 * launching, 100 * g.gpu_busy_ratio, launching, g.gpu_busy_ratio));
      if (launching > 0.05 || g.gpu_busy_ratio > 0.05) {
        r.predicted_speedup = 1.0 / std::max(launching, g.gpu_busy_ratio);
        if (loader_pace > 0 && loader_pace < *r.predicted_speedup) {
          r.predicted_speedup = loader_pace;
          r.basis += fmt("; capped at %.2fx by the loader workers, busy %.0f%% of a core each",
                         loader_pace, 100 / loader_pace);
        }
      }
      d.recommendations.push_back(std::move(r));
    }
    // A step in a CUDA graph already is not told to capture itself in one.
    d.recommendations.push_back(advice(
        "", graphed(g) ? "Raise the batch size: the launches cost the same at any batch."
                       : "Raise the batch size, or capture the step in a CUDA graph "
                         "(torch.compile(mode=\"reduce-overhead\")): the launches cost the same "
                         "at any batch.",
        "no prediction without step spans"));
    if (g.mean_kernel_us < kShortKernelUs)
      d.recommendations.push_back(advice(
          "device=cpu", "For a model this small, try the CPU: each step is a handful of "
                        "microsecond kernels plus a sync.",
          "no prediction: the model's CPU cost is not measured"));
  }
}

}  // namespace

bool tree_storage(const Facts& f, Diagnosis& d) {
  const ProcessTreeSummary& t = *f.e.tree;
  const TreeFacts& T = *f.tree;
  if (!T.storage) return false;
  d.bottleneck = "storage_io";
  d.verdict = fmt("Storage-bound: the %s waits on storage in %.0f%% of readings while reading "
                  "%.0f MB/s.",
                  t.workers > 0 ? "loader workers" : "training thread", 100 * T.io_wait,
                  *t.storage_read_bytes_per_s / 1e6);
  if (const auto disk_busy = series_mean(f.e.utilization, "disk_busy_ratio"))
    d.evidence.push_back(fmt("busiest disk busy %.0f%% of the time", 100 * *disk_busy));
  d.recommendations.push_back(advice(
      t.workers > 0 ? "num_workers=" + std::to_string(t.workers * 2) : "num_workers=2",
      "Overlap more reads: more loader workers (each waits on its own read), larger sequential "
      "shards, or data on faster storage / in the page cache.",
      "no prediction: how the storage scales with concurrent reads is not measured"));
  return true;
}

// A rank whose GPU runs NCCL's collectives alone much of the time waits for the other ranks:
// neither its compute nor its launches are the limit.
bool tree_gpu_collective_wait(const Facts& f, Diagnosis& d) {
  if (!f.tree->traced || f.tree->workers_busy ||
      f.e.gpu_trace->collective_alone_share < kCollectiveWaitDominant)
    return false;
  collective_wait_finding(*f.e.gpu_trace, d);
  return true;
}

bool tree_gpu_trace(const Facts& f, Diagnosis& d) {
  const ProcessTreeSummary& t = *f.e.tree;
  const TreeFacts& T = *f.tree;
  if (!T.traced || T.workers_busy) return false;
  const char* limit = gpu_limit(*f.e.gpu_trace, t.main_thread_busy >= kThreadPinned);
  if (limit == nullptr) return false;
  gpu_diagnosis(limit, *f.e.gpu_trace, T.working, T.loader_pace, d);
  return true;
}

// No CUDA trace (the report says why), but NVML saw the training process on a GPU.
bool tree_gpu_nvml(const Facts& f, Diagnosis& d) {
  const ProcessTreeSummary& t = *f.e.tree;
  const TreeFacts& T = *f.tree;
  if (T.traced || !t.trainer_gpu_sm_util || T.workers_busy ||
      !(*t.trainer_gpu_sm_util >= kGpuBusyCompute || T.trainer_pinned))
    return false;
  const bool busy = *t.trainer_gpu_sm_util >= kGpuBusyCompute;
  d.bottleneck = busy ? "gpu_compute" : "launch_overhead";
  d.verdict = busy ? fmt("GPU-bound (from NVML, no CUDA trace): the training process used the "
                         "SMs %.0f%% of the time.",
                         100 * *t.trainer_gpu_sm_util)
                   : fmt("Host-bound on a GPU (from NVML, no CUDA trace): the SMs are busy %.0f%% "
                         "while the training thread is busy %.0f%%: launches and syncs set the "
                         "pace.",
                         100 * *t.trainer_gpu_sm_util, 100 * t.main_thread_busy);
  d.recommendations.push_back(advice(
      "", busy ? "Make the GPU's work cheaper: mixed precision (torch.autocast), channels_last."
               : "Raise the batch size, drop per-step host syncs (.item()), or capture the step "
                 "in a CUDA graph.",
      "no prediction: without a CUDA trace the kernels are not measured"));
  return true;
}

// Many more workers than cores, each mostly idle (torchvision's reference trainer starts 16 by
// default): they cost start-up at every epoch (without persistent_workers) and memory, and fewer
// would carry the same work. No speed-up is claimed: fewer workers make no batch sooner.
bool tree_idle_workers(const Facts& f, Diagnosis& d) {
  const ProcessTreeSummary& t = *f.e.tree;
  if (t.workers < kIdleWorkersPerCore * f.e.cpus || worker_demand(t) >= kIdleWorkerDemand) return false;
  if (f.tree->queue_stall && *f.tree->queue_stall >= kHighlyInputBound) return false;  // waited for
  const int enough = std::clamp(static_cast<int>(std::ceil(t.workers_cores / kIdleWorkerDemand - 1e-9)), 1,
                                std::max(f.e.cpus, 1));
  std::string memory;
  if (t.memory && t.memory->workers_private_peak_bytes > 0)
    memory = fmt(" and %.0f MiB of private memory together",
                 static_cast<double>(t.memory->workers_private_peak_bytes) / (1 << 20));
  d.evidence.push_back(fmt("%d loader workers on %d cores, each busy %.0f%% of a core on average: "
                           "together %.2f cores of work, which %d would carry",
                           t.workers, f.e.cpus, 100 * worker_demand(t), t.workers_cores, enough));
  d.recommendations.push_back(advice(
      "num_workers=" + std::to_string(enough),
      fmt("Lower num_workers from %d to %d: the %d workers are %d processes%s, start again at "
          "every epoch unless persistent_workers=True, and mostly wait.",
          t.workers, enough, t.workers, t.workers, memory.c_str()),
      fmt("a bound, not a prediction: %d workers busy %.0f%% of a core each do %.2f cores of "
          "work, which %d workers at %.0f%% carry; fewer workers make no batch sooner, so the gain "
          "is the start-up and memory they hold, not measured here",
          t.workers, 100 * worker_demand(t), t.workers_cores, enough, 100 * kIdleWorkerDemand)));
  return true;
}

bool tree_workers_saturated(const Facts& f, Diagnosis& d) {
  const TreeFacts& T = *f.tree;
  if (!T.workers_busy || T.trainer_pinned) return false;
  // Busy workers that keep up: the training thread seldom waits for them.
  if (T.queue_stall && *T.queue_stall < kModeratelyInputBound) {
    d.evidence.push_back(fmt("the loader workers are busy (%.0f%% of a core each) and keep up: the "
                             "training thread waits for them %.1f%% of the time",
                             100 * worker_demand(*f.e.tree), 100 * *T.queue_stall));
    return false;
  }
  workers_saturated(f.e, T, d);
  return true;
}

// The training thread's looks that found it busy with data (sampler/thread_wait.h): blocked on
// its loader workers' queue, or in torch.utils.data's code by its Python stack. The data stall
// measured from outside, for every later rule.
bool queue_data_stall(const Facts& f, Diagnosis& d) {
  const ProcessTreeSummary& t = *f.e.tree;
  const auto& waits = t.main_thread_waits;
  if (!f.tree->queue_stall) {
    if (waits && t.workers > 0)
      d.evidence.push_back(fmt("the training thread was looked at %zu times while its loader workers "
                               "were alive, fewer than the %zu a data stall needs: not measured",
                               waits->looks, kMinQueueLooks));
    else if (waits && waits->looks >= kMinQueueLooks && 2 * waits->stack_looks < waits->looks)
      d.evidence.push_back(fmt("the training thread's Python stack was read at %zu of %zu looks: too "
                               "few to tell its loading from its step (a CPython 3.11 to 3.13 "
                               "program's can be read): not measured",
                               waits->stack_looks, waits->looks));
    else if (waits && waits->looks >= kMinQueueLooks)
      d.evidence.push_back(fmt("the training thread was never in torch.utils.data's code at %zu looks "
                               "at its Python stack: it loads some other way, or in no time; its "
                               "data stall is not measured from outside",
                               waits->looks));
    return false;
  }
  const double stall = *f.tree->queue_stall;
  d.data_stall_ratio = stall;
  d.input_bound = input_bound_class(stall);
  if (t.workers == 0) {
    d.data_stall_source = kLoadingStackSource;
    d.evidence.push_back(fmt("the training thread was in torch.utils.data's code (loading its own "
                             "data, num_workers=0) at %zu of %zu looks at its Python stack: a data "
                             "stall of %.1f%%, measured from outside",
                             waits->loading, waits->looks, 100 * stall));
    return true;
  }
  d.data_stall_source = kQueueStallSource;
  std::string how = fmt("%zu blocked on their queue", waits->loader_queue);
  if (waits->loader_thread > 0) how += fmt(", %zu through pin_memory's thread", waits->loader_thread);
  if (waits->loading > 0) how += fmt(", %zu taking a batch in (torch.utils.data's code)", waits->loading);
  d.evidence.push_back(fmt("the training thread was waiting for its loader workers at %zu of %zu "
                           "looks while they were alive (%s): a data stall of %.1f%%, measured "
                           "from outside",
                           waits->on_loader(), waits->looks, how.c_str(), 100 * stall));
  return true;
}

// The training thread waits on its workers' queue, though they are not busy: each waits on
// something that takes time without CPU (a remote source, a slow disk's latency, a sleep, a
// lock). Where that is latency, workers wait in parallel: more of them fetch more at once.
bool tree_queue_data_wait(const Facts& f, Diagnosis& d) {
  const TreeFacts& T = *f.tree;
  if (!T.queue_stall || *T.queue_stall < kHighlyInputBound) return false;
  const ProcessTreeSummary& t = *f.e.tree;
  const double stall = *T.queue_stall;
  // Storage at work is tree_storage's, asked before: the workers here wait on something else.
  d.bottleneck = "cpu_preprocess";
  d.verdict = fmt("Input-bound: the training thread waits for its loader workers %.0f%% of the "
                  "time (blocked on the DataLoader queue, measured from outside), though the %d "
                  "workers are busy only %.0f%% of a core each: they wait on something that is not "
                  "CPU (a remote source, storage latency, a sleep, a lock).",
                  100 * stall, t.workers, 100 * worker_demand(t));
  const double by_trainer = 1.0 / std::max(T.not_waiting, 0.05);
  const int workers = static_cast<int>(std::ceil(t.workers * by_trainer - 1e-9));
  Recommendation r = advice(
      "num_workers=" + std::to_string(workers),
      fmt("Raise num_workers from %d to %d (or prefetch_factor): workers that wait without "
          "using a core wait side by side.",
          t.workers, workers),
      fmt("what-if: batches come %d/%d times as often until the training thread, waiting for "
          "data %.0f%% of its time now, no longer waits (%.2fx); sure to the extent what the "
          "workers wait for serves several at once (latency, not bandwidth): low",
          workers, t.workers, 100 * stall, by_trainer));
  r.predicted_speedup = by_trainer;
  d.recommendations.push_back(std::move(r));
  return true;
}

// No loader workers, no data file seen open, no storage read: the data is in memory (a tensor
// data set, synthetic data), so a pinned training thread is stepping, not loading, and more
// workers would have nothing to load.
bool tree_data_in_memory(const Facts& f, Diagnosis& d) {
  const ProcessTreeSummary& t = *f.e.tree;
  const double reads = t.storage_read_bytes_per_s.value_or(0);
  // Its Python stack measured its loading: that decides (tree_one_thread), in memory or not.
  if (f.tree->queue_stall) return false;
  if (t.workers != 0 || !f.tree->trainer_pinned || *f.e.data_files_seen > 0 ||
      reads >= kInMemoryReadBytesPerS)
    return false;
  d.evidence.push_back(fmt("data in memory: no loader workers, no data file (images, shards) seen "
                           "open, %.2f MB/s read from storage: the training thread's time is the "
                           "step's",
                           reads / 1e6));
  step_bound(f.e, f.tree->cpu, d);
  return true;
}

bool tree_one_thread(const Facts& f, Diagnosis& d) {
  if (f.e.tree->workers != 0) return false;
  if (f.tree->queue_stall) {
    if (*f.tree->queue_stall < kModeratelyInputBound) {
      step_bound(f.e, f.tree->cpu, d);
      d.verdict += fmt(" It loads its own data (num_workers=0) only %.1f%% of the time.",
                       100 * *f.tree->queue_stall);
    } else {
      loading_share_measured(*f.tree, d);
    }
    return true;
  }
  if (!f.tree->trainer_pinned) return false;
  loads_and_steps_in_one_thread(f.e, f.tree->cpu, d);
  return true;
}

bool tree_step_bound(const Facts& f, Diagnosis& d) {
  if (!f.tree->trainer_pinned && f.e.tree->working_other_threads_cores() < 0.5) return false;
  step_bound(f.e, f.tree->cpu, d);
  return true;
}

// Nothing pinned, nothing saturated by itself, but the machine's cores are full.
bool tree_cores_full(const Facts& f, Diagnosis& d) {
  if (!f.tree->cpu.full()) return false;
  cores_full(f.e, f.tree->cpu, d);
  return true;
}

// Nothing the tree shows holds the program back, but its own lines say its loop waits for data:
// that wait is the verdict. Its loaders are not busy and do not wait on storage (the rules above
// would have said so): the time goes where the tree cannot see (a remote source, a lock, a sleep,
// too few batches asked for ahead).
bool tree_printed_data_wait(const Facts& f, Diagnosis& d) {
  const PrintedDataWait& w = *f.e.printed;
  if (!w.share || *w.share < kHighlyInputBound) return false;
  const ProcessTreeSummary& t = *f.e.tree;
  d.bottleneck = "cpu_preprocess";
  const std::string loaders =
      t.workers > 0 ? fmt("its %d loader workers are busy %.0f%% of a core each", t.workers, 100 * worker_demand(t))
                    : std::string("it loads in the training process (num_workers=0)");
  d.verdict = fmt("Input-bound: the loop waits for data %.0f%% of the time (the program's own %s), "
                  "though %s and %.1f of the machine's %d cores are idle; the wait is for something "
                  "the process tree does not show (a remote source, a lock, batches not asked for "
                  "early enough).",
                  100 * *w.share, w.columns.c_str(), loaders.c_str(), f.tree->cpu.idle_cores, f.e.cpus);
  d.recommendations.push_back(advice(
      t.workers > 0 ? "prefetch_factor" : "num_workers",
      t.workers > 0 ? "Ask for batches earlier: a larger prefetch_factor (or more workers) keeps more "
                      "batches in flight while each waits for its source."
                    : "Load in DataLoader workers (num_workers > 0), so batches are fetched while the "
                      "step runs.",
      "no prediction: what the loop waits for is not measured from outside"));
  return true;
}

bool tree_no_clear_limit(const Facts& f, Diagnosis& d) {
  const ProcessTreeSummary& t = *f.e.tree;
  d.bottleneck = t.workers > 0 && t.worker_busy >= t.main_thread_busy ? "cpu_preprocess"
                                                                       : "cpu_compute";
  d.verdict = fmt("No clear limit: neither the training thread nor the loader workers are busy, "
                  "and %.1f of the machine's %d cores are idle; the program may wait on "
                  "something else (network, sleep, a lock).",
                  f.tree->cpu.idle_cores, f.e.cpus);
  return true;
}

}  // namespace feedscope::rules
