#include "profiler/diagnosis.h"
#include "profiler/autotune_diagnosis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "profiler/detail/format.h"
#include "profiler/gpu_trace.h"
#include "profiler/stage_stats.h"

namespace feedscope {

namespace {

using detail::fmt;

double busy(const DiagnosisInput& in, Stage stage) {
  const StageStats* st = find_stage(in.stages, stage);
  return st ? st->busy_s : 0.0;
}

double mean_s(const DiagnosisInput& in, Stage stage) {
  const StageStats* st = find_stage(in.stages, stage);
  return st ? st->mean_ms / 1e3 : 0.0;
}

// Per-batch costs, in seconds, that the what-if model composes.
struct Costs {
  double worker = 0;  // read+decode+transform+collate per batch, one thread
  double step = 0;    // training step per batch
  double submit = 0;  // the training thread's copy submission per batch (h2d_submit)
  // The loop's time per batch beyond its step span (the wait, the submission, its bookkeeping),
  // and the same without the submission: what a change to the step or the copy leaves as it was.
  double outside = 0;
  double other = 0;
};

// The loader's work over the window, in seconds of one core, and where it was measured: the
// loader's stage spans where feedscope loads (`feedscope run`), else the CPU its worker processes
// took (a wrapped loop over a PyTorch DataLoader with workers, sampled as this process's
// children). Nothing where neither was measured: a wrapped loop that loads in its own thread, or
// in threads feedscope cannot tell apart.
struct LoaderWork {
  double busy_s = 0;
  bool measured = false;
  bool from_processes = false;
};

LoaderWork loader_work(const DiagnosisInput& in) {
  LoaderWork w;
  for (const Stage stage : {Stage::read, Stage::decode, Stage::transform, Stage::collate}) {
    const StageStats* st = find_stage(in.stages, stage);
    if (st == nullptr || st->count == 0) continue;
    w.busy_s += st->busy_s;
    w.measured = true;
  }
  if (w.measured || in.loader_only || in.num_workers <= 0) return w;
  const std::optional<double> children = in.utilization.cpu_child_processes_cores;
  if (children && *children > 0) {
    w.busy_s = *children * in.wall_s;
    w.measured = true;
    w.from_processes = true;
  }
  return w;
}

// On a GPU a step costs at least the device's time for it: with a loader that keeps the loop
// waiting, the device runs each step's kernels during the wait, after the step's span has closed.
Costs measure_costs(const DiagnosisInput& in, const LoaderWork& loader) {
  Costs c;
  const double batches = static_cast<double>(std::max<std::int64_t>(in.batches, 1));
  c.worker = loader.busy_s / batches;
  c.step = in.loader_only ? 0.0 : mean_s(in, Stage::step);
  if (!in.loader_only && in.on_gpu && in.gpu_trace && in.gpu_trace->steps > 0)
    c.step = std::max(c.step, in.gpu_trace->device_s_per_step);
  c.submit = in.h2d_submit_s / batches;
  if (in.batches > 0) c.outside = std::max(0.0, in.wall_s / batches - mean_s(in, Stage::step));
  c.other = std::max(0.0, c.outside - c.submit);
  return c;
}

// Batches per second the pipeline sustains with `workers` loader threads. Workers overlap with
// the step; with none, loading and stepping alternate in one thread. On the CPU the step and the
// workers share the cores, so their summed CPU time per batch bounds the rate too.
double predicted_batches_per_s(const Costs& c, int workers, double cpus, bool on_gpu) {
  if (c.worker <= 0 && c.step <= 0) return 0;
  if (workers == 0) return 1.0 / (c.worker + c.step);
  double rate = c.worker > 0 ? workers / c.worker : INFINITY;
  if (c.step > 0) rate = std::min(rate, 1.0 / c.step);
  const double cpu_per_batch = c.worker + (on_gpu ? 0.0 : c.step);
  if (cpu_per_batch > 0) rate = std::min(rate, cpus / cpu_per_batch);
  return rate;
}

// The cores a wrapped loop's loader and step can have: those the process's other threads (torch's
// intra-op pool spinning between the step's parallel regions, OpenBLAS's) leave. A DataLoader
// with worker processes competes with them: a wrapped Python loop with 1 worker on 2 cores had
// 0.72 cores in other threads, and a second worker gave 1.12-1.32x, not the 1.9x the bare core
// count promised.
double cores_left_for_workers(const DiagnosisInput& in, bool workers_are_processes) {
  if (!workers_are_processes) return in.cpus;
  const auto other = in.utilization.series.find("cpu_other_threads_cores");
  if (other == in.utilization.series.end()) return in.cpus;
  return std::max(1.0, in.cpus - other->second.mean);
}

// A number only where both rates are: a what-if with nothing measured under it predicts nothing.
Recommendation with_prediction(Recommendation r, double rate, double measured) {
  if (rate > 0 && std::isfinite(rate) && measured > 0) {
    r.predicted_samples_per_s = rate;
    r.predicted_speedup = rate / measured;
  }
  return r;
}

Recommendation more_workers(const DiagnosisInput& in, const Costs& c, double measured,
                            bool workers_are_processes) {
  // Enough workers that the loader outruns the step, but no more than the cores.
  int target = in.num_workers + 1;
  // The epsilon keeps 0.030/0.010 from rounding up to 4 workers.
  if (c.step > 0) target = std::max(target, static_cast<int>(std::ceil(c.worker / c.step - 1e-9)));
  target = std::min(target, in.cpus);
  Recommendation r;
  r.setting = "num_workers=" + std::to_string(target);
  if (c.worker <= 0) {  // what loading costs was not measured: no number to stand on
    r.action = fmt("Raise num_workers from %d to %d: the loop waits for its batches.",
                   in.num_workers, target);
    r.basis = "no prediction: the loader's work per batch was not measured (no loader spans, no "
              "worker processes)";
    return r;
  }
  r.action = fmt("Raise num_workers from %d to %d: loading a batch takes %.1f ms of one core, "
                 "the step %.1f ms.",
                 in.num_workers, target, c.worker * 1e3, c.step * 1e3);
  const double cores = cores_left_for_workers(in, workers_are_processes);
  const double rate =
      predicted_batches_per_s(c, target, cores, in.on_gpu) * static_cast<double>(in.batch_size);
  r = with_prediction(std::move(r), rate, measured);
  r.basis = "what-if: rate = min(workers / load time, 1 / step time, cores / CPU time per batch)"
            ", from this run's per-batch stage means";
  if (cores < in.cpus)
    r.basis += fmt("; %.2f of the %d cores, what the process's other threads leave", cores,
                   in.cpus);
  return r;
}

// Which GPU-side limit the trace shows, for a run that is not input-bound. A GPU idle a fifth of
// the step or more is not the limit, whatever its kernels' length: the host feeds it late, with
// launches, syncs or its own work between them (long kernels fed late by the copies would show
// as H2D time in the step, asked first).
const char* gpu_bottleneck(const GpuTraceSummary& g) {
  const bool pageable_heavy = g.h2d_pageable_bytes > g.h2d_pinned_bytes;
  const bool slow_pinned = g.h2d_pinned_gbps && *g.h2d_pinned_gbps < kAssumedPinnedGbps / 2;
  if (g.h2d_share >= kH2dStepShare && (pageable_heavy || slow_pinned)) return "host_to_device";
  if (g.gpu_busy_ratio >= kGpuBusyCompute) return "gpu_compute";
  return "launch_overhead";
}

void add_gpu_evidence(const GpuTraceSummary& g, Diagnosis& d) {
  d.evidence.push_back(fmt("GPU busy %.0f%% of step time (union of kernels and copies over all "
                           "streams); %.1f kernels per step, mean %.1f us, p95 %.1f us",
                           100 * g.gpu_busy_ratio, g.kernels_per_step, g.mean_kernel_us,
                           g.p95_kernel_us));
  if (g.launch_gaps > 0)
    d.evidence.push_back(fmt("GPU idle between launches %.0f%% of step time: %lld gaps, mean "
                             "%.1f us, p95 %.1f us",
                             100 * g.gap_share, static_cast<long long>(g.launch_gaps),
                             g.mean_gap_us, g.p95_gap_us));
  if (g.launch_calls > 0)
    d.evidence.push_back(fmt("kernel launch calls take %.1f us of host time each",
                             g.mean_launch_call_us));
  if (g.h2d_pinned_bytes + g.h2d_pageable_bytes + g.h2d_other_bytes > 0) {
    std::string rates;
    if (g.h2d_pinned_gbps) rates += fmt(", pinned at %.1f GB/s", *g.h2d_pinned_gbps);
    if (g.h2d_pageable_gbps) rates += fmt(", pageable at %.1f GB/s", *g.h2d_pageable_gbps);
    d.evidence.push_back(fmt("H2D copies %.0f%% of step time: %.1f MB pinned, %.1f MB pageable%s",
                             100 * g.h2d_share, static_cast<double>(g.h2d_pinned_bytes) / 1e6,
                             static_cast<double>(g.h2d_pageable_bytes) / 1e6, rates.c_str()));
  }
  if (g.syncs_per_step >= 1)
    d.evidence.push_back(fmt("%.1f host syncs per step (%lld in all), blocking the host "
                             "%.2f ms per step: the CPU cannot queue work ahead of the GPU",
                             g.syncs_per_step, static_cast<long long>(g.syncs),
                             g.sync_wait_s / static_cast<double>(std::max<std::int64_t>(g.steps, 1)) * 1e3));
  for (std::string& loss : gpu_trace_losses(g)) d.evidence.push_back(std::move(loss));
}

}  // namespace

int bigger_batch_factor(const GpuTraceSummary& g) {
  int k = 2;
  while (k < 16 && g.gpu_busy_ratio * k * 2 <= 1.0) k *= 2;
  return k;
}

namespace {

// Launch-bound step: the launches cost the same per step whatever the batch, while the GPU's
// work grows with it, so a bigger batch fills the idle GPU. How much is what `run` measured by
// trying it (WhatIfTrials); a wrapped loop's model is not feedscope's to try: no number.
Recommendation bigger_batch(const DiagnosisInput& in, const GpuTraceSummary& g, const Costs& c,
                            double loader_rate, double measured) {
  const int k = bigger_batch_factor(g);
  const std::int64_t batch = in.batch_size * k;
  Recommendation r;
  r.setting = "batch_size=" + std::to_string(batch);
  r.action = fmt("Raise batch_size from %lld to %lld: the step's %.0f launches cost the same at "
                 "any batch, while the GPU is busy only %.0f%% of the step.",
                 static_cast<long long>(in.batch_size), static_cast<long long>(batch),
                 g.kernels_per_step, 100 * g.gpu_busy_ratio);
  const WhatIfTrials* t = in.trials ? &*in.trials : nullptr;
  if (!t || t->bigger_batch != batch || !t->bigger_batch_step_s || !t->run_batch_step_s) {
    r.basis = fmt("no prediction: a batch of %lld was not tried%s", static_cast<long long>(batch),
                  t && t->bigger_batch == batch ? " (the trial failed: see trials.not_run)" : "");
    return r;
  }
  const double scale = *t->bigger_batch_step_s / *t->run_batch_step_s;
  const double step = mean_s(in, Stage::step) * scale;
  const double per_batch = step + c.outside;
  const double model_rate = static_cast<double>(batch) / per_batch;
  const double rate = loader_rate > 0 ? std::min(model_rate, loader_rate) : model_rate;
  r.basis = fmt("measured: the same model stepped at batch %lld on this GPU in %.3f ms, at %lld in "
                "%.3f ms (inputs already there): the run's %.3f ms step x %.2f, plus the %.3f ms a "
                "batch the loop spends outside its step = %.3f ms a batch; capped by the loader's "
                "%.0f samples/s",
                static_cast<long long>(batch), *t->bigger_batch_step_s * 1e3,
                static_cast<long long>(in.batch_size), *t->run_batch_step_s * 1e3,
                mean_s(in, Stage::step) * 1e3, scale, c.outside * 1e3, per_batch * 1e3,
                loader_rate);
  return with_prediction(std::move(r), rate, measured);
}

// The CPU's step is what `run` measured by stepping the model there; without it, no number.
Recommendation tiny_model_on_cpu(const DiagnosisInput& in, const Costs& c, double measured) {
  Recommendation r;
  r.setting = "device=cpu";
  r.action = fmt("Run the model on the CPU: with %lld parameters a step is a handful of "
                 "microsecond kernels, each costing its launch.",
                 static_cast<long long>(in.model_parameters));
  const WhatIfTrials* t = in.trials ? &*in.trials : nullptr;
  if (!t || !t->cpu_step_s) {
    r.basis = "no prediction: the model's step on the CPU was not measured";
    return r;
  }
  // The loop's cost outside the step stays, less the copy submission a CPU run has none of;
  // loading shares the cores with the step.
  const double per_batch = *t->cpu_step_s + c.other;
  const double rate = predicted_batches_per_s(Costs{c.worker, per_batch}, in.num_workers, in.cpus,
                                              false) *
                      static_cast<double>(in.batch_size);
  r.basis = fmt("measured: the same model stepped at batch %lld on the CPU (%d threads) in %.3f "
                "ms a step, plus the %.3f ms a batch the loop spends outside its step and the copy; loading and "
                "the step share the %d cores",
                static_cast<long long>(in.batch_size), t->cpu_threads, *t->cpu_step_s * 1e3,
                c.other * 1e3, in.cpus);
  return with_prediction(std::move(r), rate, measured);
}

// The pinned host-to-device rate of this machine: what `run` measured by trying one batch, else
// what the trace saw of pinned copies.
std::optional<double> measured_pinned_gbps(const DiagnosisInput& in, const GpuTraceSummary& g) {
  if (in.trials && in.trials->pinned_h2d_gbps) return in.trials->pinned_h2d_gbps;
  return g.h2d_pinned_gbps;
}

// A loader that pins already (pin_memory known on) leaves the pageable copies to the loop's own
// tensors: those are what to pin, and the loader's setting is not.
Recommendation pin_memory(const DiagnosisInput& in, const GpuTraceSummary& g, const Costs& c,
                          double loader_rate, double measured) {
  const double steps = static_cast<double>(std::max<std::int64_t>(g.steps, 1));
  const double pageable_bytes = static_cast<double>(g.h2d_pageable_bytes) / steps;
  Recommendation r;
  if (in.pin_memory.value_or(false)) {
    r.setting = "pin the loop's own copies";
    r.action = fmt("Pin what the loop copies itself: the loader pins its batches already "
                   "(pin_memory on), yet %.1f MB per step come from pageable memory at %.1f GB/s "
                   "(tensors made or moved outside the loader); pin them once (.pin_memory()) or "
                   "make them on the device.",
                   pageable_bytes / 1e6, g.h2d_pageable_gbps.value_or(0.0));
  } else {
    r.setting = "pin_memory=on";
    r.action = fmt("Copy from pinned memory (pin_memory=on): %.1f MB per step come from pageable "
                   "memory at %.1f GB/s, which the driver stages through a bounce buffer.",
                   pageable_bytes / 1e6, g.h2d_pageable_gbps.value_or(0.0));
  }
  const std::optional<double> pinned_gbps = measured_pinned_gbps(in, g);
  if (!pinned_gbps) {
    r.basis = "no prediction: no copy from pinned memory was measured on this machine";
    return r;
  }
  const double pinned_s = pageable_bytes / (*pinned_gbps * 1e9);
  const double step_after = std::max(c.step - g.h2d_pageable_s_per_step + pinned_s, 1e-9);
  const double model_rate = static_cast<double>(in.batch_size) / step_after;
  const double rate = loader_rate > 0 ? std::min(model_rate, loader_rate) : model_rate;
  r.basis = fmt("what-if: the pageable copy time per step (%.2f ms) becomes the same bytes at the "
                "measured pinned rate of %.1f GB/s (%.2f ms), copies still serial with the step; "
                "capped by the loader's %.0f samples/s",
                g.h2d_pageable_s_per_step * 1e3, *pinned_gbps, pinned_s * 1e3, loader_rate);
  return with_prediction(std::move(r), rate, measured);
}

// A `run` whose training thread copies its batches from pageable memory (the copy engine's
// submission returns only once CUDA has staged the bytes): pinned, the copy runs on the engine's
// stream beside the step, and each batch costs the longest of the step, the loader's share and
// the copy.
Recommendation pin_for_the_copy_engine(const DiagnosisInput& in, const GpuTraceSummary* g,
                                       const Costs& c, double measured) {
  const double batches = static_cast<double>(std::max<std::int64_t>(in.batches, 1));
  Recommendation r;
  r.setting = "pin_memory=on";
  r.action = fmt("Collate into pinned memory (pin_memory=on): each batch's copy from pageable "
                 "memory holds the training thread %.2f ms, %.0f%% of the run; a pinned batch is "
                 "copied on the copy stream while the step runs.",
                 c.submit * 1e3, 100 * in.h2d_submit_s / std::max(in.wall_s, 1e-9));
  const std::optional<double> pinned_gbps = g ? measured_pinned_gbps(in, *g) : std::nullopt;
  if (!g || g->h2d_pageable_bytes == 0 || !pinned_gbps) {
    r.basis = "no prediction: the bytes per batch or a copy from pinned memory on this machine "
              "were not measured";
    return r;
  }
  const double bytes = static_cast<double>(g->h2d_pageable_bytes) / batches;
  const double copy_s = bytes / (*pinned_gbps * 1e9);
  const double loader_s = in.num_workers > 0 ? c.worker / in.num_workers : c.worker;
  // The loop's own cost outside its step and the submission stays (the wait, its bookkeeping).
  const double per_batch = std::max({mean_s(in, Stage::step) + c.other, loader_s, copy_s, 1e-9});
  r.basis = fmt("what-if: a batch costs max(step %.2f ms + %.2f ms outside it, loading %.2f ms "
                "over %d worker(s), %.1f MB at the measured pinned %.1f GB/s = %.2f ms) = %.2f ms",
                mean_s(in, Stage::step) * 1e3, c.other * 1e3, loader_s * 1e3,
                std::max(1, in.num_workers), bytes / 1e6, *pinned_gbps, copy_s * 1e3,
                per_batch * 1e3);
  return with_prediction(std::move(r), static_cast<double>(in.batch_size) / per_batch, measured);
}

Recommendation smaller_copies(const DiagnosisInput& in, const GpuTraceSummary& g, const Costs& c,
                              double loader_rate, double measured) {
  const double h2d_per_step = g.h2d_share * c.step;
  const double step_after = std::max(c.step - 0.75 * h2d_per_step, 1e-9);
  const double model_rate = static_cast<double>(in.batch_size) / step_after;
  const double rate = loader_rate > 0 ? std::min(model_rate, loader_rate) : model_rate;
  Recommendation r;
  r.setting = "uint8 batches, normalize on the GPU";
  r.action = fmt("Copy less: H2D copies already come from pinned memory at %.1f GB/s and take "
                 "%.0f%% of the step; send uint8 pixels and convert on the device.",
                 g.h2d_pinned_gbps.value_or(0.0), 100 * g.h2d_share);
  r.basis = "what-if: float32 to uint8 cuts the copied bytes and the copy time by 4x";
  return with_prediction(std::move(r), rate, measured);
}

// Without the blocking wait the host queues the next launches while the GPU works, so the step
// shrinks by the blocked time down to the GPU's own busy time.
Recommendation remove_syncs(const DiagnosisInput& in, const GpuTraceSummary& g, const Costs& c,
                            double loader_rate, double measured) {
  const double steps = static_cast<double>(std::max<std::int64_t>(g.steps, 1));
  const double blocked = g.sync_wait_s / steps;
  const double busy_per_step = g.gpu_busy_s / steps;
  const double step_after = std::max({c.step - blocked, busy_per_step, 1e-9});
  const double model_rate = static_cast<double>(in.batch_size) / step_after;
  const double rate = loader_rate > 0 ? std::min(model_rate, loader_rate) : model_rate;
  Recommendation r;
  r.setting = "no per-step sync";
  r.action = fmt("Remove the per-step host sync (%.1f per step: .item(), .cpu(), "
                 "torch::cuda::synchronize()); read the loss every N steps instead.",
                 g.syncs_per_step);
  r.basis = fmt("what-if: step = max(%.2f ms step - %.2f ms blocked, %.2f ms GPU busy); capped "
                "by the loader's %.0f samples/s",
                c.step * 1e3, blocked * 1e3, busy_per_step * 1e3, loader_rate);
  return with_prediction(std::move(r), rate, measured);
}

// Reads that hit the page cache are memory copies, not storage: a long `read` stage is a storage
// bottleneck only where the block devices or the kernel's I/O pressure show storage at work.
// Without those readings (sampling off) the stage times are all there is to go on.
bool storage_evidence(const DiagnosisInput& in, Diagnosis& d) {
  const auto& disk = in.utilization.disk_read_bytes_per_s;
  const auto& pressure = in.utilization.io_pressure_ratio;
  // What the process itself fetched from storage over the window is exact however short the run
  // (the sampler may not have read the disks once) and tells a page-cache hit from a disk read:
  // a loader whose time goes to reading the page cache is not storage-bound.
  // PSI's avg10 is no witness here: it lags ten seconds behind, so a run right after a cold one
  // would read its pressure.
  if (const auto& own = in.utilization.storage_read_bytes_per_s) {
    if (*own >= kStorageReadBytesPerS) {
      d.evidence.push_back(fmt("storage at work: the process read %.0f MB/s from storage, I/O "
                               "pressure %s",
                               *own / 1e6,
                               pressure ? fmt("%.0f%%", 100 * *pressure).c_str() : "not sampled"));
      return true;
    }
    d.evidence.push_back(fmt("the process read %.1f MB/s from storage: its reads were served from "
                             "the page cache",
                             *own / 1e6));
    return false;
  }
  if (!disk && !pressure) {
    d.evidence.push_back("no disk or I/O pressure readings: storage inferred from read time alone");
    return true;
  }
  const bool reading = disk && *disk >= kStorageReadBytesPerS;
  const bool pressed = pressure && *pressure >= kStorageIoPressure;
  if (reading || pressed)
    d.evidence.push_back(fmt("storage at work: %.0f MB/s read from block devices, I/O pressure %.0f%%",
                             disk ? *disk / 1e6 : 0.0, pressure ? 100 * *pressure : 0.0));
  return reading || pressed;
}

// Lanes crowded out of their cores: the CPUs are full, threads that are no span lane (torch's
// intra-op pool, OpenBLAS's, the user's own) take a share of them, and a lane's thread runs for
// clearly less of the time than its spans are open. Either the loader's workers wait for a core
// (an input-bound run), or a CPU step spread over the intra-op pool fights the workers for the
// cores and takes several times its own CPU time in wall time (OpenBLAS spinning between a small
// step's matrix products): what `feedscope run` measured before it capped the step's threads.
constexpr double kOtherThreadsCores = 0.15;  // of a core, on average
constexpr double kCpusFull = 0.85;           // of every core, busy
constexpr double kLaneRunShare = 0.85;       // a lane's CPU time / its span time, below it

std::optional<double> series_mean(const DiagnosisInput& in, const char* name) {
  const auto it = in.utilization.series.find(name);
  if (it == in.utilization.series.end()) return std::nullopt;
  return it->second.mean;
}

std::optional<double> thread_share(const DiagnosisInput& in, const std::string& name) {
  const auto it = in.utilization.threads.find(name);
  if (it == in.utilization.threads.end()) return std::nullopt;
  return it->second;
}

// The mean CPU share of the workers' threads, where the sampler saw them.
std::optional<double> worker_cpu_share(const DiagnosisInput& in) {
  double sum = 0;
  int seen = 0;
  for (int i = 0; i < in.num_workers; ++i) {
    if (const auto share = thread_share(in, "worker " + std::to_string(i))) {
      sum += *share;
      ++seen;
    }
  }
  if (seen == 0) return std::nullopt;
  return sum / seen;
}

// The cores other threads take while every core is busy and workers load beside them; nullopt
// where they are too few, the cores have room, or the sampler did not read threads.
std::optional<double> others_on_full_cores(const DiagnosisInput& in) {
  const std::optional<double> other = series_mean(in, "cpu_other_threads_cores");
  if (in.num_workers <= 0 || !other || *other < kOtherThreadsCores ||
      in.utilization.cpu_system_ratio < kCpusFull)
    return std::nullopt;
  return other;
}

// The workers' per-batch load time shrunk to the CPU time they spent on it (their threads' CPU
// share, `run_share`, over their spans' share of the run); as measured where the sampler did not
// see them.
double uncrowded_worker_s(const Costs& c, std::optional<double> run_share, double span_share) {
  if (!run_share || span_share <= 0) return c.worker;
  return c.worker * std::min(1.0, *run_share / span_share);
}

Recommendation cap_other_threads(const DiagnosisInput& in, double other, const Costs& after,
                                 double measured, const char* basis) {
  const int keep = std::max(1, in.cpus - in.num_workers);
  Recommendation r;
  r.setting = "torch::set_num_threads(" + std::to_string(keep) + ")";
  r.action = fmt("Keep the process within its cores: other threads of it take %.1f of the %d "
                 "cores. If they are torch's intra-op pool or OpenBLAS's (which spins between a "
                 "CPU step's matrix products), call torch::set_num_threads(%d) "
                 "(torch.set_num_threads(%d) in Python) and set OMP_NUM_THREADS=%d "
                 "OPENBLAS_NUM_THREADS=%d before the process starts.",
                 other, in.cpus, keep, keep, keep, keep);
  r.basis = basis;
  return with_prediction(std::move(r),
                         predicted_batches_per_s(after, in.num_workers, in.cpus, in.on_gpu) *
                             static_cast<double>(in.batch_size),
                         measured);
}

// An input-bound run whose workers wait for cores that other threads take.
std::optional<Recommendation> workers_crowded_out(const DiagnosisInput& in, const Costs& c,
                                                  double span_share, double measured,
                                                  Diagnosis& d) {
  const std::optional<double> other = others_on_full_cores(in);
  if (!other) return std::nullopt;
  const std::optional<double> run_share = worker_cpu_share(in);
  if (!run_share || *run_share >= kLaneRunShare * span_share) return std::nullopt;
  Costs after = c;
  after.worker = uncrowded_worker_s(c, run_share, span_share);
  d.evidence.push_back(fmt("threads outside the pipeline use %.2f cores on average while every "
                           "core is %.0f%% busy; the workers run %.0f%% of the time, loading "
                           "%.0f%% of it",
                           *other, 100 * in.utilization.cpu_system_ratio, 100 * *run_share,
                           100 * span_share));
  return cap_other_threads(in, *other, after, measured,
                           "what-if: each batch's load time shrunk to the workers' CPU time for "
                           "it (their threads' CPU share over their spans' share of the run), at "
                           "the current num_workers");
}

// A CPU step whose thread runs a fraction of the step's time while other threads (its intra-op
// pool) and the workers overfill the cores.
std::optional<Recommendation> step_crowded_out(const DiagnosisInput& in, const Costs& c,
                                               double wall, double worker_span_share,
                                               double measured, Diagnosis& d) {
  const std::optional<double> other = others_on_full_cores(in);
  const std::optional<double> training = thread_share(in, "training");
  const double step_share = busy(in, Stage::step) / wall;
  if (in.on_gpu || in.loader_only || !other || !training || in.batches <= 0 ||
      *training >= kLaneRunShare * step_share)
    return std::nullopt;
  d.evidence.push_back(fmt("the step's spans are open %.0f%% of the run, its thread runs %.0f%%, "
                           "and threads outside the pipeline use %.2f cores while every core is "
                           "%.0f%% busy: the step's threads and %d worker(s) overfill %d cores",
                           100 * step_share, 100 * *training, *other,
                           100 * in.utilization.cpu_system_ratio, in.num_workers, in.cpus));
  // Spinning and working look alike in CPU time, so the other threads' share is taken as spin:
  // the step at its own thread's CPU time per batch, the most the cap can give the step.
  Costs after = c;
  after.step = std::min(c.step, *training * wall / static_cast<double>(in.batches));
  after.worker = uncrowded_worker_s(c, worker_cpu_share(in), worker_span_share);
  return cap_other_threads(in, *other, after, measured,
                           "what-if: the step at its own thread's CPU time per batch (what "
                           "the other threads did taken as spinning), the workers at their CPU "
                           "time per batch, at the current num_workers");
}

}  // namespace

const char* input_bound_class(double ratio) {
  if (ratio >= kHighlyInputBound) return "highly";
  if (ratio >= kModeratelyInputBound) return "moderately";
  return "no";
}

Diagnosis diagnose(const DiagnosisInput& in) {
  Diagnosis d;
  const double wall = std::max(in.wall_s, 1e-9);
  const double wait = busy(in, Stage::wait);
  d.data_stall_ratio = std::clamp(wait / wall, 0.0, 1.0);
  d.data_stall_source = "wait spans";
  d.input_bound = input_bound_class(d.data_stall_ratio);
  const LoaderWork loader = loader_work(in);
  const Costs c = measure_costs(in, loader);
  const double measured = in.samples_per_s;
  const double load_s = loader.busy_s;
  const double h2d_s = busy(in, Stage::h2d);
  const double worker_capacity_s = wall * std::max(1, in.num_workers);
  const double cpu_saturation = in.utilization.cpu_process_ratio;
  // A trace with no measured step says nothing about the step.
  const GpuTraceSummary* gpu =
      in.on_gpu && in.gpu_trace && in.gpu_trace->steps > 0 ? &*in.gpu_trace : nullptr;

  d.evidence.push_back(fmt("data stall %.1f%% of wall time (wait %.2f s of %.2f s)",
                           100 * d.data_stall_ratio, wait, wall));
  if (!in.loader_only)
    d.evidence.push_back(fmt("step %.2f ms mean per batch, %.1f%% of wall time",
                             mean_s(in, Stage::step) * 1e3, 100 * busy(in, Stage::step) / wall));
  if (c.step > mean_s(in, Stage::step) * 1.1)
    d.evidence.push_back(fmt("the GPU works %.2f ms per step, also while the loop waits: a step "
                             "costs the device that much",
                             c.step * 1e3));
  if (!loader.measured) {
    d.evidence.push_back("loading: not measured (no loader stage spans, no worker processes seen)");
  } else if (loader.from_processes) {
    d.evidence.push_back(fmt("loading %.2f ms of one core per batch, the CPU of the loader's worker "
                             "processes; %d worker(s) busy %.0f%% of the run",
                             c.worker * 1e3, in.num_workers, 100 * load_s / worker_capacity_s));
  } else {
    d.evidence.push_back(fmt("loading %.2f ms of one thread per batch; %s busy %.0f%% of the run",
                             c.worker * 1e3,
                             in.num_workers > 0
                                 ? (std::to_string(in.num_workers) + " worker(s)").c_str()
                                 : "the training thread (num_workers=0)",
                             100 * load_s / worker_capacity_s));
  }
  d.evidence.push_back(fmt("process CPU %.0f%% of %d cores", 100 * cpu_saturation, in.cpus));

  // The training thread handing its batches to the copy engine, a copy from pageable memory being
  // the copy itself: time outside both the wait and the step.
  const double submit_share = in.h2d_submit_s / wall;
  const bool copies_on_the_thread = submit_share >= kH2dStepShare;
  if (in.h2d_submit_s > 0)
    d.evidence.push_back(fmt("copy submission %.2f ms per batch on the training thread, %.1f%% of "
                             "wall time (outside the wait)",
                             1e3 * c.submit, 100 * submit_share));
  const bool input_side =
      !copies_on_the_thread && (in.loader_only || d.data_stall_ratio >= kModeratelyInputBound);
  if (copies_on_the_thread) {
    d.bottleneck = "host_to_device";
  } else if (input_side) {
    const double read_s = busy(in, Stage::read);
    // The copy stream copies one batch at a time; the workers load theirs side by side.
    if (h2d_s > load_s / std::max(1, in.num_workers)) {
      d.bottleneck = "host_to_device";
      d.evidence.push_back(fmt("h2d %.2f s against %.2f s of loading", h2d_s, load_s));
    } else if (read_s > 0.5 * load_s && cpu_saturation < 0.8 && storage_evidence(in, d)) {
      d.bottleneck = "storage_io";
      d.evidence.push_back(fmt("read is %.0f%% of loading time while the CPU is %.0f%% busy",
                               100 * read_s / std::max(load_s, 1e-9), 100 * cpu_saturation));
    } else {
      d.bottleneck = "cpu_preprocess";
    }
  } else if (gpu) {
    d.bottleneck = gpu_bottleneck(*gpu);
  } else {
    d.bottleneck = in.on_gpu ? "gpu_compute" : "cpu_compute";
  }
  if (gpu) add_gpu_evidence(*gpu, d);

  const double loader_rate =
      predicted_batches_per_s(Costs{c.worker, 0}, std::max(1, in.num_workers), in.cpus,
                              in.on_gpu) * static_cast<double>(in.batch_size);
  // More workers cannot help while other threads hold the cores: that advice comes first. Either
  // side may be the one squeezed: the workers, or a CPU step spread over its pool. Asked before
  // the hand-off: workers crowded out of their cores look idle too.
  std::optional<Recommendation> cap;
  if (d.bottleneck == "cpu_preprocess") {
    cap = workers_crowded_out(in, c, load_s / worker_capacity_s, measured, d);
    if (!cap) cap = step_crowded_out(in, c, wall, load_s / worker_capacity_s, measured, d);
  }
  // Input-bound, yet the workers are mostly idle with cores to spare: what the loop waits for is
  // each batch's hand-off (a worker waking, a queue), not loading work. More workers would not
  // shorten it.
  const bool handoff = d.bottleneck == "cpu_preprocess" && !cap && !in.loader_only &&
                       in.num_workers > 0 && loader.measured && load_s < 0.5 * worker_capacity_s &&
                       in.batches > 0;
  if (handoff) {
    const double wait_per_batch = wait / static_cast<double>(in.batches);
    d.evidence.push_back(fmt("the loop waits %.3f ms per batch while loading one takes %.3f ms of "
                             "a worker: the wait is the hand-off, not the loading",
                             wait_per_batch * 1e3, c.worker * 1e3));
    d.verdict = fmt("Input-bound (%s): the loop waits for data %.0f%% of the time, but the %d "
                    "worker(s) are idle most of the run: each batch's hand-off (a worker waking, "
                    "a queue) costs more than loading it.",
                    d.input_bound.c_str(), 100 * d.data_stall_ratio, in.num_workers);
    Recommendation r;
    if (c.worker < wait_per_batch) {
      r.setting = "num_workers=0";
      r.action = fmt("Load in the training thread (num_workers=0): a batch takes %.3f ms to load, "
                     "less than the %.3f ms the loop now waits for it.",
                     c.worker * 1e3, wait_per_batch * 1e3);
      r.basis = "what-if: rate = batch_size / (step time + load time), loading in the loop";
      r = with_prediction(std::move(r),
                          predicted_batches_per_s(c, 0, in.cpus, in.on_gpu) *
                              static_cast<double>(in.batch_size),
                          measured);
    } else {
      r.setting = "batch_size";
      r.action = "Raise batch_size: the hand-off costs about the same per batch whatever its size.";
      r.basis = "no prediction: how the step's time grows with the batch is not measured";
    }
    d.recommendations.push_back(r);
  } else if (d.bottleneck == "cpu_preprocess") {
    const bool crowded = cap.has_value();
    if (crowded) d.recommendations.push_back(std::move(*cap));
    if (in.num_workers < in.cpus) {
      d.recommendations.push_back(more_workers(in, c, measured, loader.from_processes));
    } else {
      Recommendation r;
      r.setting = "cheaper preprocessing";
      r.action = "Every core is loading already: make decode/transform cheaper (smaller stored "
                 "images, reduced-scale decode) or move them off the training machine.";
      const double step_bound = c.step > 0 ? in.batch_size / c.step : 0;
      r.basis = "upper bound: the step's own rate if loading cost nothing";
      r = with_prediction(std::move(r), step_bound, measured);
      d.recommendations.push_back(r);
    }
    d.verdict = fmt("Input-bound (%s): the training loop waits for data %.0f%% of the time, and "
                    "loader workers spend it on CPU preprocessing%s.",
                    d.input_bound.c_str(), 100 * d.data_stall_ratio,
                    crowded ? ", short of cores that other threads of the process take" : "");
    if (in.loader_only)
      d.verdict = fmt("Loader-only run: %.0f samples/s, limited by CPU preprocessing on %d "
                      "worker(s).", measured, std::max(1, in.num_workers));
  } else if (d.bottleneck == "storage_io") {
    d.verdict = fmt("Input-bound (%s): workers wait on storage reads.", d.input_bound.c_str());
  } else if (copies_on_the_thread) {
    d.verdict = fmt("Copy-bound: the training thread spends %.0f%% of the run handing batches to "
                    "the GPU, %.2f ms a batch%s.",
                    100 * submit_share,
                    1e3 * c.submit,
                    gpu && gpu->h2d_pageable_bytes > gpu->h2d_pinned_bytes
                        ? ": from pageable memory the copy returns only once CUDA has staged every "
                          "byte through a bounce buffer"
                        : "");
    // A loader known to pin already has nothing to gain from pinning.
    if ((!gpu || gpu->h2d_pageable_bytes >= gpu->h2d_pinned_bytes) && !in.pin_memory.value_or(false))
      d.recommendations.push_back(pin_for_the_copy_engine(in, gpu, c, measured));
  } else if (d.bottleneck == "host_to_device" && input_side) {
    d.verdict = fmt("Input-bound (%s): the host-to-device copy limits the pipeline.",
                    d.input_bound.c_str());
  } else if (d.bottleneck == "host_to_device") {
    d.verdict = fmt("Not input-bound: host-to-device copies take %.0f%% of the GPU step, mostly "
                    "from %s memory.",
                    100 * gpu->h2d_share,
                    gpu->h2d_pageable_bytes > gpu->h2d_pinned_bytes ? "pageable" : "pinned");
    if (gpu->h2d_pageable_bytes > 0)
      d.recommendations.push_back(pin_memory(in, *gpu, c, loader_rate, measured));
    else
      d.recommendations.push_back(smaller_copies(in, *gpu, c, loader_rate, measured));
  } else if (d.bottleneck == "launch_overhead") {
    d.verdict = fmt("Not input-bound: the GPU step is bound by kernel launches%s, not GPU work: "
                    "the GPU is busy %.0f%% of the step (%.0f kernels of %.1f us mean per step).",
                    gpu->syncs_per_step >= 1 ? " and syncs" : "", 100 * gpu->gpu_busy_ratio,
                    gpu->kernels_per_step, gpu->mean_kernel_us);
    d.recommendations.push_back(bigger_batch(in, *gpu, c, loader_rate, measured));
    if (in.model_parameters > 0 && in.model_parameters < kTinyModelParameters)
      d.recommendations.push_back(tiny_model_on_cpu(in, c, measured));
  } else {
    const char* where = in.on_gpu ? "GPU" : "CPU";
    d.verdict = fmt("Not input-bound: the %s training step is the limit (%.0f%% of wall time); "
                    "the loader waits on it.",
                    where, 100 * busy(in, Stage::step) / wall);
    // Cheaper to try than a faster step, where the step's own threads crowd the workers.
    if (std::optional<Recommendation> cap =
            step_crowded_out(in, c, wall, load_s / worker_capacity_s, measured, d)) {
      d.verdict += " The step's threads and the loader's workers overfill the cores.";
      d.recommendations.push_back(std::move(*cap));
    }
    Recommendation r;
    // Not a loader setting, and no prediction of how fast a faster step would be: what is known
    // is how far the loader would keep up, so that is the number given, as an upper bound.
    r.setting = "step";
    const char* how = in.on_gpu ? "mixed precision, a bigger batch, a leaner model"
                                : "a GPU if there is one, a leaner model";
    if (loader_rate > 0 && std::isfinite(loader_rate) && measured > 0) {
      r.action = fmt("Speed up the step itself (%s); the loader has headroom up to %.0f "
                     "samples/s (%.1fx the current rate) before it becomes the limit.",
                     how, loader_rate, loader_rate / measured);
      // A bound is no prediction: predicted_* stay null, so no one reads the loader's headroom as
      // what a faster step would give.
      r.basis = fmt("no prediction: how much faster the step can be made is not measured; upper "
                    "bound %.1fx, the loader's capacity at the current num_workers, from per-batch "
                    "load time",
                    loader_rate / measured);
    } else {
      // A wrapped loop whose loader records no load stages (or no batch size): its capacity is
      // unknown, so no bound is given rather than a 0.
      r.action = fmt("Speed up the step itself (%s).", how);
      r.basis = "no prediction: the loader's own stages were not measured, so how far it would "
                "keep up is unknown";
    }
    d.recommendations.push_back(r);
  }
  if (gpu && !input_side && gpu->syncs_per_step >= 1)
    d.recommendations.push_back(remove_syncs(in, *gpu, c, loader_rate, measured));
  if (in.autotune) advise_from_autotune(*in.autotune, d);
  drop_unhelpful_advice(d);
  return d;
}

void drop_unhelpful_advice(Diagnosis& d) {
  std::erase_if(d.recommendations, [&d](const Recommendation& r) {
    if (!r.predicted_speedup || *r.predicted_speedup >= kMinUsefulSpeedup) return false;
    d.evidence.push_back(fmt("considered %s: predicted %.2fx, not advised (%s)", r.setting.c_str(),
                             *r.predicted_speedup, r.basis.c_str()));
    return true;
  });
}

}  // namespace feedscope
