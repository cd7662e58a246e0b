#include "profiler/rules/loop_advice.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "profiler/detail/format.h"
#include "profiler/diagnosis.h"
#include "profiler/stage_stats.h"

namespace feedscope {

using detail::fmt;

namespace {

// The cores a wrapped loop's loader and step can have: those the process's other threads (torch's
// intra-op pool spinning between the step's parallel regions, OpenBLAS's) leave. A DataLoader
// with worker processes competes with them: a wrapped Python loop with 1 worker on 2 cores had
// 0.72 cores in other threads, and a second worker gave 1.12-1.32x, not the 1.9x the bare core
// count promised.
double cores_left_for_workers(const Evidence& e, bool workers_are_processes) {
  if (!workers_are_processes) return e.cpus;
  const auto other = e.utilization.series.find("cpu_other_threads_cores");
  if (other == e.utilization.series.end()) return e.cpus;
  return std::max(1.0, e.cpus - other->second.mean);
}

}  // namespace

namespace {

// A step's samples/s, no faster than the loader keeps up where its capacity was measured.
double capped_by_loader(double step_rate, double loader_rate) {
  return loader_rate > 0 ? std::min(step_rate, loader_rate) : step_rate;
}

}  // namespace

// A number only where both rates are: a what-if with nothing measured under it predicts nothing.
Recommendation with_prediction(Recommendation r, double rate, double measured) {
  if (rate > 0 && std::isfinite(rate) && measured > 0) {
    r.predicted_samples_per_s = rate;
    r.predicted_speedup = rate / measured;
  }
  return r;
}

Recommendation more_workers(const Evidence& e, const Costs& c, double measured,
                            bool workers_are_processes) {
  const LoopSpans& in = *e.loop;
  // Enough workers that the loader outruns the step, but no more than the cores.
  int target = in.num_workers + 1;
  // The epsilon keeps 0.030/0.010 from rounding up to 4 workers.
  if (c.step > 0) target = std::max(target, static_cast<int>(std::ceil(c.worker / c.step - 1e-9)));
  target = std::min(target, e.cpus);
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
  const double cores = cores_left_for_workers(e, workers_are_processes);
  const double rate =
      predicted_batches_per_s(c, target, cores, in.on_gpu) * static_cast<double>(in.batch_size);
  r = with_prediction(std::move(r), rate, measured);
  r.basis = "what-if: rate = min(workers / load time, 1 / step time, cores / CPU time per batch)"
            ", from this run's per-batch stage means";
  if (cores < e.cpus)
    r.basis += fmt("; %.2f of the %d cores, what the process's other threads leave", cores,
                   e.cpus);
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
  if (gpu_work_share(g) >= kGpuBusyCompute) return "gpu_compute";
  return "launch_overhead";
}

int bigger_batch_factor(const GpuTraceSummary& g) {
  int k = 2;
  while (k < 16 && g.gpu_busy_ratio * k * 2 <= 1.0) k *= 2;
  return k;
}

// Launch-bound step: the launches cost the same per step whatever the batch, while the GPU's
// work grows with it, so a bigger batch fills the idle GPU. How much is what `run` measured by
// trying it (WhatIfTrials); a wrapped loop's model is not feedscope's to try: no number.
Recommendation bigger_batch(const Evidence& e, const GpuTraceSummary& g, const Costs& c,
                            double loader_rate, double measured) {
  const LoopSpans& in = *e.loop;
  const int k = bigger_batch_factor(g);
  const std::int64_t batch = in.batch_size * k;
  Recommendation r;
  r.setting = "batch_size=" + std::to_string(batch);
  r.action = fmt("Raise batch_size from %lld to %lld: the step's %.0f launches cost the same at "
                 "any batch, while the GPU is busy only %.0f%% of the step.",
                 static_cast<long long>(in.batch_size), static_cast<long long>(batch),
                 g.kernels_per_step, 100 * g.gpu_busy_ratio);
  const WhatIfTrials* t = e.trials ? &*e.trials : nullptr;
  if (!t || t->bigger_batch != batch || !t->bigger_batch_step_s || !t->run_batch_step_s) {
    r.basis = fmt("no prediction: a batch of %lld was not tried%s", static_cast<long long>(batch),
                  t && t->bigger_batch == batch ? " (the trial failed: see trials.not_run)" : "");
    return r;
  }
  const double scale = *t->bigger_batch_step_s / *t->run_batch_step_s;
  const double step = mean_s(in, Stage::step) * scale;
  const double per_batch = step + c.outside;
  const double rate = capped_by_loader(static_cast<double>(batch) / per_batch, loader_rate);
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
Recommendation tiny_model_on_cpu(const Evidence& e, const Costs& c, double measured) {
  const LoopSpans& in = *e.loop;
  Recommendation r;
  r.setting = "device=cpu";
  r.action = fmt("Run the model on the CPU: with %lld parameters a step is a handful of "
                 "microsecond kernels, each costing its launch.",
                 static_cast<long long>(in.model_parameters));
  const WhatIfTrials* t = e.trials ? &*e.trials : nullptr;
  if (!t || !t->cpu_step_s) {
    r.basis = "no prediction: the model's step on the CPU was not measured";
    return r;
  }
  // The loop's cost outside the step stays, less the copy submission a CPU run has none of;
  // loading shares the cores with the step.
  const double per_batch = *t->cpu_step_s + c.other;
  const double rate = predicted_batches_per_s(Costs{c.worker, per_batch}, in.num_workers, e.cpus,
                                              false) *
                      static_cast<double>(in.batch_size);
  r.basis = fmt("measured: the same model stepped at batch %lld on the CPU (%d threads) in %.3f "
                "ms a step, plus the %.3f ms a batch the loop spends outside its step and the copy; loading and "
                "the step share the %d cores",
                static_cast<long long>(in.batch_size), t->cpu_threads, *t->cpu_step_s * 1e3,
                c.other * 1e3, e.cpus);
  // Like with like: the CPU trial runs untraced, while the run's GPU steps were traced (CUPTI
  // adds to every launch). The GPU trial at the run's batch, untraced in the same trials, is the
  // baseline where it is the faster of the two.
  double baseline = measured;
  if (t->run_batch_step_s && *t->run_batch_step_s > 0) {
    const double untraced = static_cast<double>(in.batch_size) / (*t->run_batch_step_s + c.outside);
    if (untraced > measured) {
      baseline = untraced;
      r.basis += fmt("; the speed-up is over the GPU untraced, as the CPU trial was: the run's "
                     "batch stepped on the GPU in %.3f ms in the same trials against %.3f ms "
                     "traced in the run, %.0f samples/s with the loop's %.3f ms outside its step "
                     "(the run measured %.0f under tracing)",
                     *t->run_batch_step_s * 1e3, mean_s(in, Stage::step) * 1e3, untraced,
                     c.outside * 1e3, measured);
    } else {
      r.basis += "; the GPU's untraced trial step was no faster than the run's traced one, so "
                 "the run's rate is the baseline";
    }
  } else {
    r.basis += "; against the run's traced rate (the GPU's untraced trial did not run): tracing "
               "slowed the GPU run, so the speed-up may be overstated";
  }
  return with_prediction(std::move(r), rate, baseline);
}

namespace {

// The pinned host-to-device rate of this machine: what `run` measured by trying one batch, else
// what the trace saw of pinned copies.
std::optional<double> measured_pinned_gbps(const Evidence& e, const GpuTraceSummary& g) {
  if (e.trials && e.trials->pinned_h2d_gbps) return e.trials->pinned_h2d_gbps;
  return g.h2d_pinned_gbps;
}

}  // namespace

// A loader that pins already (pin_memory known on) leaves the pageable copies to the loop's own
// tensors: those are what to pin, and the loader's setting is not.
Recommendation pin_memory(const Evidence& e, const GpuTraceSummary& g, const Costs& c,
                          double loader_rate, double measured) {
  const LoopSpans& in = *e.loop;
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
  const std::optional<double> pinned_gbps = measured_pinned_gbps(e, g);
  if (!pinned_gbps) {
    r.basis = "no prediction: no copy from pinned memory was measured on this machine";
    return r;
  }
  const double pinned_s = pageable_bytes / (*pinned_gbps * 1e9);
  const double step_after = std::max(c.step - g.h2d_pageable_s_per_step + pinned_s, 1e-9);
  const double rate = capped_by_loader(static_cast<double>(in.batch_size) / step_after, loader_rate);
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
Recommendation pin_for_the_copy_engine(const Evidence& e, const GpuTraceSummary* g,
                                       const Costs& c, double measured) {
  const LoopSpans& in = *e.loop;
  const double batches = static_cast<double>(std::max<std::int64_t>(in.batches, 1));
  Recommendation r;
  r.setting = "pin_memory=on";
  r.action = fmt("Collate into pinned memory (pin_memory=on): each batch's copy from pageable "
                 "memory holds the training thread %.2f ms, %.0f%% of the run; a pinned batch is "
                 "copied on the copy stream while the step runs.",
                 c.submit * 1e3, 100 * in.h2d_submit_s / std::max(in.wall_s, 1e-9));
  const std::optional<double> pinned_gbps = g ? measured_pinned_gbps(e, *g) : std::nullopt;
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

Recommendation smaller_copies(const Evidence& e, const GpuTraceSummary& g, const Costs& c,
                              double loader_rate, double measured) {
  const LoopSpans& in = *e.loop;
  const double h2d_per_step = g.h2d_share * c.step;
  const double step_after = std::max(c.step - 0.75 * h2d_per_step, 1e-9);
  const double rate = capped_by_loader(static_cast<double>(in.batch_size) / step_after, loader_rate);
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
Recommendation remove_syncs(const Evidence& e, const GpuTraceSummary& g, const Costs& c,
                            double loader_rate, double measured) {
  const LoopSpans& in = *e.loop;
  const double steps = static_cast<double>(std::max<std::int64_t>(g.steps, 1));
  const double blocked = other_sync_wait_s(g) / steps;
  const double busy_per_step = g.gpu_busy_s / steps;
  const double step_after = std::max({c.step - blocked, busy_per_step, 1e-9});
  const double rate = capped_by_loader(static_cast<double>(in.batch_size) / step_after, loader_rate);
  Recommendation r;
  r.setting = "no per-step sync";
  r.action = fmt("Remove the per-step host sync (%.1f per step: .item(), .cpu(), "
                 "torch::cuda::synchronize()); read the loss every N steps instead.",
                 other_syncs_per_step(g));
  r.basis = fmt("what-if: step = max(%.2f ms step - %.2f ms blocked, %.2f ms GPU busy); capped "
                "by the loader's %.0f samples/s",
                c.step * 1e3, blocked * 1e3, busy_per_step * 1e3, loader_rate);
  return with_prediction(std::move(r), rate, measured);
}

Recommendation pin_and_copy_async(const Evidence& e, const GpuTraceSummary& g, const Costs& c,
                                  double loader_rate, double measured) {
  const LoopSpans& in = *e.loop;
  const double steps = static_cast<double>(std::max<std::int64_t>(g.steps, 1));
  const double blocked = g.sync_after_h2d_wait_s / steps;
  const double busy_per_step = g.gpu_busy_s / steps;
  const double step_after = std::max({c.step - blocked, busy_per_step, 1e-9});
  const double rate = capped_by_loader(static_cast<double>(in.batch_size) / step_after, loader_rate);
  Recommendation r;
  r.setting = "pin_memory=True, non_blocking=True";
  r.action = fmt("Copy the batch without blocking: %.1f times a step the training thread copies "
                 "to the GPU and then waits for it (.to(device) without non_blocking: "
                 "cudaMemcpyAsync, then cudaStreamSynchronize), %.2f ms a step. Set "
                 "pin_memory=True in the DataLoader and copy with .to(device, non_blocking=True).",
                 static_cast<double>(g.syncs_after_h2d) / steps, blocked * 1e3);
  r.basis = fmt("what-if: step = max(%.2f ms step - %.2f ms blocked after the copies, %.2f ms GPU "
                "busy); capped by the loader's %.0f samples/s",
                c.step * 1e3, blocked * 1e3, busy_per_step * 1e3, loader_rate);
  return with_prediction(std::move(r), rate, measured);
}

Recommendation pin_and_copy_async_window(const GpuTraceSummary& g) {
  const double window = std::max(g.step_wall_s, 1e-9);
  const double blocked = std::clamp(g.sync_after_h2d_wait_s / window, 0.0, 1.0);
  Recommendation r;
  r.setting = "pin_memory=True, non_blocking=True";
  r.action = fmt("Copy the batch without blocking: %lld times the training thread copied to the "
                 "GPU and then waited for it (.to(device) without non_blocking: cudaMemcpyAsync, "
                 "then cudaStreamSynchronize), blocked %.0f%% of the time. Set pin_memory=True in "
                 "the DataLoader and copy with .to(device, non_blocking=True).",
                 static_cast<long long>(g.syncs_after_h2d), 100 * blocked);
  r.basis = fmt("what-if: without the %.0f%% of the time blocked after the copies, the time left "
                "is max(%.2f, the GPU's busy %.2f): 1 / that",
                100 * blocked, 1 - blocked, g.gpu_busy_ratio);
  const double after = std::max(1 - blocked, g.gpu_busy_ratio);
  if (after > 0.05) r.predicted_speedup = 1.0 / after;
  return r;
}

void collective_wait_finding(const GpuTraceSummary& g, Diagnosis& d) {
  const double alone = g.collective_alone_share;
  const double work = gpu_work_share(g);
  // The rank's own limit, in the time it does not wait: its GPU busy there, or its host.
  const double own = work / std::max(1 - alone, 1e-9);
  d.bottleneck = own >= kGpuBusyCompute ? "gpu_compute" : "launch_overhead";
  d.verdict = fmt("Waiting for other ranks: NCCL collectives run alone on the GPU %.0f%% of the "
                  "step (the wait for the other ranks and the transfer together); the GPU's own "
                  "work fills %.0f%% of it, %.0f%% of the time the rank does not wait.",
                  100 * alone, 100 * work, 100 * own);
  d.evidence.push_back(fmt("NCCL collectives %.0f%% of step time (%.3f s), alone on the GPU "
                           "%.0f%%: a single rank's trace cannot tell the wait for a slower rank "
                           "from the transfer",
                           100 * g.collective_share, g.collective_s, 100 * alone));
  Recommendation r;
  r.action = "Find the rank the others wait for: watch the whole job (feedscope watch -- torchrun "
             "...), which compares the ranks and names a straggler; where none stands out, the "
             "transfer itself is the cost (fewer, larger all-reduces: DDP's bucket_cap_mb, "
             "gradient accumulation with no_sync()).";
  r.basis = "no prediction: what the other ranks do is not in this rank's trace";
  d.recommendations.push_back(std::move(r));
}

std::string launched_how(const GpuTraceSummary& g) {
  std::string out;
  if (g.graph_kernels > 0)
    out = fmt("%lld of the %lld kernels from %lld CUDA graph(s) (%lld replays)",
              static_cast<long long>(g.graph_kernels), static_cast<long long>(g.kernels),
              static_cast<long long>(g.graphs), static_cast<long long>(g.graph_replays));
  if (g.triton_kernels > 0)
    out += fmt("%s%lld of the %lld kernels Triton's (compiled code: torch.compile)",
               out.empty() ? "" : "; ", static_cast<long long>(g.triton_kernels),
               static_cast<long long>(g.kernels));
  if (g.driver_launch_calls > 0)
    out += fmt("%s%lld kernel launches through the driver API (Triton's, cuBLAS's)",
               out.empty() ? "" : "; ", static_cast<long long>(g.driver_launch_calls));
  return out;
}

// Reads that hit the page cache are memory copies, not storage: a long `read` stage is a storage
// bottleneck only where the block devices or the kernel's I/O pressure show storage at work.
// Without those readings (sampling off) the stage times are all there is to go on.
bool storage_evidence(const Evidence& e, Diagnosis& d) {
  const auto& disk = e.utilization.disk_read_bytes_per_s;
  const auto& pressure = e.utilization.io_pressure_ratio;
  // What the process itself fetched from storage over the window is exact however short the run
  // (the sampler may not have read the disks once) and tells a page-cache hit from a disk read:
  // a loader whose time goes to reading the page cache is not storage-bound.
  // PSI's avg10 is no witness here: it lags ten seconds behind, so a run right after a cold one
  // would read its pressure.
  if (const auto& own = e.utilization.storage_read_bytes_per_s) {
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

namespace {

// Lanes crowded out of their cores: the CPUs are full, threads that are no span lane (torch's
// intra-op pool, OpenBLAS's, the user's own) take a share of them, and a lane's thread runs for
// clearly less of the time than its spans are open. Either the loader's workers wait for a core
// (an input-bound run), or a CPU step spread over the intra-op pool fights the workers for the
// cores and takes several times its own CPU time in wall time (OpenBLAS spinning between a small
// step's matrix products): what `feedscope run` measured before it capped the step's threads.
constexpr double kOtherThreadsCores = 0.15;  // of a core, on average
constexpr double kCpusFull = 0.85;           // of every core, busy
constexpr double kLaneRunShare = 0.85;       // a lane's CPU time / its span time, below it

std::optional<double> thread_share(const Evidence& e, const std::string& name) {
  const auto it = e.utilization.threads.find(name);
  if (it == e.utilization.threads.end()) return std::nullopt;
  return it->second;
}

// The mean CPU share of the workers' threads, where the sampler saw them.
std::optional<double> worker_cpu_share(const Evidence& e) {
  const LoopSpans& in = *e.loop;
  double sum = 0;
  int seen = 0;
  for (int i = 0; i < in.num_workers; ++i) {
    if (const auto share = thread_share(e, "worker " + std::to_string(i))) {
      sum += *share;
      ++seen;
    }
  }
  if (seen == 0) return std::nullopt;
  return sum / seen;
}

// The cores other threads take while every core is busy and workers load beside them; nullopt
// where they are too few, the cores have room, or the sampler did not read threads.
std::optional<double> others_on_full_cores(const Evidence& e) {
  const LoopSpans& in = *e.loop;
  const std::optional<double> other = series_mean(e.utilization, "cpu_other_threads_cores");
  if (in.num_workers <= 0 || !other || *other < kOtherThreadsCores ||
      e.utilization.cpu_system_ratio < kCpusFull)
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

Recommendation cap_other_threads(const Evidence& e, double other, const Costs& after,
                                 double measured, const char* basis) {
  const LoopSpans& in = *e.loop;
  const int keep = std::max(1, e.cpus - in.num_workers);
  Recommendation r;
  r.setting = "torch::set_num_threads(" + std::to_string(keep) + ")";
  r.action = fmt("Keep the process within its cores: other threads of it take %.1f of the %d "
                 "cores. If they are torch's intra-op pool or OpenBLAS's (which spins between a "
                 "CPU step's matrix products), call torch::set_num_threads(%d) "
                 "(torch.set_num_threads(%d) in Python) and set OMP_NUM_THREADS=%d "
                 "OPENBLAS_NUM_THREADS=%d before the process starts.",
                 other, e.cpus, keep, keep, keep, keep);
  r.basis = basis;
  return with_prediction(std::move(r),
                         predicted_batches_per_s(after, in.num_workers, e.cpus, in.on_gpu) *
                             static_cast<double>(in.batch_size),
                         measured);
}

}  // namespace

// An input-bound run whose workers wait for cores that other threads take.
std::optional<Recommendation> workers_crowded_out(const Evidence& e, const Costs& c,
                                                  double span_share, double measured,
                                                  Diagnosis& d) {
  const std::optional<double> other = others_on_full_cores(e);
  if (!other) return std::nullopt;
  const std::optional<double> run_share = worker_cpu_share(e);
  if (!run_share || *run_share >= kLaneRunShare * span_share) return std::nullopt;
  Costs after = c;
  after.worker = uncrowded_worker_s(c, run_share, span_share);
  d.evidence.push_back(fmt("threads outside the pipeline use %.2f cores on average while every "
                           "core is %.0f%% busy; the workers run %.0f%% of the time, loading "
                           "%.0f%% of it",
                           *other, 100 * e.utilization.cpu_system_ratio, 100 * *run_share,
                           100 * span_share));
  return cap_other_threads(e, *other, after, measured,
                           "what-if: each batch's load time shrunk to the workers' CPU time for "
                           "it (their threads' CPU share over their spans' share of the run), at "
                           "the current num_workers");
}

// A CPU step whose thread runs a fraction of the step's time while other threads (its intra-op
// pool) and the workers overfill the cores.
std::optional<Recommendation> step_crowded_out(const Evidence& e, const Costs& c,
                                               double wall, double worker_span_share,
                                               double measured, Diagnosis& d) {
  const LoopSpans& in = *e.loop;
  const std::optional<double> other = others_on_full_cores(e);
  const std::optional<double> training = thread_share(e, "training");
  const double step_share = busy(in, Stage::step) / wall;
  if (in.on_gpu || in.loader_only || !other || !training || in.batches <= 0 ||
      *training >= kLaneRunShare * step_share)
    return std::nullopt;
  d.evidence.push_back(fmt("the step's spans are open %.0f%% of the run, its thread runs %.0f%%, "
                           "and threads outside the pipeline use %.2f cores while every core is "
                           "%.0f%% busy: the step's threads and %d worker(s) overfill %d cores",
                           100 * step_share, 100 * *training, *other,
                           100 * e.utilization.cpu_system_ratio, in.num_workers, e.cpus));
  // Spinning and working look alike in CPU time, so the other threads' share is taken as spin:
  // the step at its own thread's CPU time per batch, the most the cap can give the step.
  Costs after = c;
  after.step = std::min(c.step, *training * wall / static_cast<double>(in.batches));
  after.worker = uncrowded_worker_s(c, worker_cpu_share(e), worker_span_share);
  return cap_other_threads(e, *other, after, measured,
                           "what-if: the step at its own thread's CPU time per batch (what "
                           "the other threads did taken as spinning), the workers at their CPU "
                           "time per batch, at the current num_workers");
}

}  // namespace feedscope
