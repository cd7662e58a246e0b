// The rules that read a loop's stage spans (`run`, `wrap`, a Session under `watch`): the data
// stall they measure, then which stage holds the loop back, in docs/diagnosis.md's order.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

#include "profiler/detail/format.h"
#include "profiler/diagnosis.h"
#include "profiler/rules/loop_advice.h"
#include "profiler/rules/rules.h"
#include "profiler/stage_stats.h"

namespace feedscope::rules {

using detail::fmt;

namespace {

// The GPU trace of a loop that is neither copy-bound on the training thread nor input-bound, where
// it shows `limit` (gpu_bottleneck's name); none otherwise.
const GpuTraceSummary* step_limited_by(const LoopFacts& L, std::string_view limit) {
  if (L.gpu == nullptr || L.input_side || L.copies_on_the_thread) return nullptr;
  return gpu_bottleneck(*L.gpu) == limit ? L.gpu : nullptr;
}

void loading_evidence(const Facts& f, Diagnosis& d) {
  const LoopSpans& in = *f.e.loop;
  const LoopFacts& L = *f.loop;
  if (!L.loader.measured) {
    d.evidence.push_back("loading: not measured (no loader stage spans, no worker processes seen)");
  } else if (L.loader.from_processes) {
    d.evidence.push_back(fmt("loading %.2f ms of one core per batch, the CPU of the loader's worker "
                             "processes; %d worker(s) busy %.0f%% of the run",
                             L.c.worker * 1e3, in.num_workers,
                             100 * L.load_s / L.worker_capacity_s));
  } else {
    d.evidence.push_back(fmt("loading %.2f ms of one thread per batch; %s busy %.0f%% of the run",
                             L.c.worker * 1e3,
                             in.num_workers > 0
                                 ? (std::to_string(in.num_workers) + " worker(s)").c_str()
                                 : "the training thread (num_workers=0)",
                             100 * L.load_s / L.worker_capacity_s));
  }
}

// cpu_preprocess: more workers while there are cores for them, else cheaper preprocessing; `cap`
// first where other threads crowd the cores.
void preprocess_finding(const Facts& f, std::optional<Recommendation> cap, Diagnosis& d) {
  const Evidence& e = f.e;
  const LoopSpans& in = *e.loop;
  const LoopFacts& L = *f.loop;
  d.bottleneck = "cpu_preprocess";
  const bool crowded = cap.has_value();
  if (crowded) d.recommendations.push_back(std::move(*cap));
  if (in.num_workers < e.cpus) {
    d.recommendations.push_back(more_workers(e, L.c, L.measured, L.loader.from_processes));
  } else {
    Recommendation r;
    r.setting = "cheaper preprocessing";
    r.action = "Every core is loading already: make decode/transform cheaper (smaller stored "
               "images, reduced-scale decode) or move them off the training machine.";
    const double step_bound = L.c.step > 0 ? in.batch_size / L.c.step : 0;
    r.basis = "upper bound: the step's own rate if loading cost nothing";
    d.recommendations.push_back(with_prediction(std::move(r), step_bound, L.measured));
  }
  d.verdict = fmt("Input-bound (%s): the training loop waits for data %.0f%% of the time, and "
                  "loader workers spend it on CPU preprocessing%s.",
                  d.input_bound.c_str(), 100 * d.data_stall_ratio,
                  crowded ? ", short of cores that other threads of the process take" : "");
  if (in.loader_only)
    d.verdict = fmt("Loader-only run: %.0f samples/s, limited by CPU preprocessing on %d "
                    "worker(s).", L.measured, std::max(1, in.num_workers));
}

}  // namespace

bool loop_data_stall(const Facts& f, Diagnosis& d) {
  const LoopSpans& in = *f.e.loop;
  const LoopFacts& L = *f.loop;
  d.data_stall_ratio = L.stall;
  d.data_stall_source = "wait spans";
  d.input_bound = input_bound_class(d.data_stall_ratio);
  d.evidence.push_back(fmt("data stall %.1f%% of wall time (wait %.2f s of %.2f s)",
                           100 * d.data_stall_ratio, L.wait, L.wall));
  if (!in.loader_only)
    d.evidence.push_back(fmt("step %.2f ms mean per batch, %.1f%% of wall time",
                             mean_s(in, Stage::step) * 1e3, 100 * busy(in, Stage::step) / L.wall));
  if (L.c.step > mean_s(in, Stage::step) * 1.1)
    d.evidence.push_back(fmt("the GPU works %.2f ms per step, also while the loop waits: a step "
                             "costs the device that much",
                             L.c.step * 1e3));
  loading_evidence(f, d);
  d.evidence.push_back(fmt("process CPU %.0f%% of %d cores", 100 * L.cpu_saturation, f.e.cpus));
  if (in.h2d_submit_s > 0)
    d.evidence.push_back(fmt("copy submission %.2f ms per batch on the training thread, %.1f%% of "
                             "wall time (outside the wait)",
                             1e3 * L.c.submit, 100 * L.submit_share));
  return true;
}

bool copy_on_training_thread(const Facts& f, Diagnosis& d) {
  const Evidence& e = f.e;
  const LoopFacts& L = *f.loop;
  if (!L.copies_on_the_thread) return false;
  const GpuTraceSummary* gpu = L.gpu;
  d.bottleneck = "host_to_device";
  d.verdict = fmt("Copy-bound: the training thread spends %.0f%% of the run handing batches to "
                  "the GPU, %.2f ms a batch%s.",
                  100 * L.submit_share, 1e3 * L.c.submit,
                  gpu && gpu->h2d_pageable_bytes > gpu->h2d_pinned_bytes
                      ? ": from pageable memory the copy returns only once CUDA has staged every "
                        "byte through a bounce buffer"
                      : "");
  // A loader known to pin already has nothing to gain from pinning.
  if ((!gpu || gpu->h2d_pageable_bytes >= gpu->h2d_pinned_bytes) &&
      !e.loop->pin_memory.value_or(false))
    d.recommendations.push_back(pin_for_the_copy_engine(e, gpu, L.c, L.measured));
  return true;
}

// The copy stream copies one batch at a time; the workers load theirs side by side.
bool input_copy(const Facts& f, Diagnosis& d) {
  const LoopFacts& L = *f.loop;
  if (!L.input_side || L.h2d_s <= L.load_s / std::max(1, f.e.loop->num_workers)) return false;
  d.bottleneck = "host_to_device";
  d.evidence.push_back(fmt("h2d %.2f s against %.2f s of loading", L.h2d_s, L.load_s));
  d.verdict = fmt("Input-bound (%s): the host-to-device copy limits the pipeline.",
                  d.input_bound.c_str());
  return true;
}

bool input_storage(const Facts& f, Diagnosis& d) {
  const LoopFacts& L = *f.loop;
  if (!L.input_side) return false;
  const double read_s = busy(*f.e.loop, Stage::read);
  if (!(read_s > 0.5 * L.load_s && L.cpu_saturation < 0.8 && storage_evidence(f.e, d)))
    return false;
  d.bottleneck = "storage_io";
  d.evidence.push_back(fmt("read is %.0f%% of loading time while the CPU is %.0f%% busy",
                           100 * read_s / std::max(L.load_s, 1e-9), 100 * L.cpu_saturation));
  d.verdict = fmt("Input-bound (%s): workers wait on storage reads.", d.input_bound.c_str());
  return true;
}

// More workers cannot help while other threads hold the cores: that advice comes first. Either
// side may be the one squeezed: the workers, or a CPU step spread over its pool. Asked before
// the hand-off: workers crowded out of their cores look idle too.
bool input_crowded_out(const Facts& f, Diagnosis& d) {
  const LoopFacts& L = *f.loop;
  if (!L.input_side) return false;
  const double span_share = L.load_s / L.worker_capacity_s;
  std::optional<Recommendation> cap = workers_crowded_out(f.e, L.c, span_share, L.measured, d);
  if (!cap) cap = step_crowded_out(f.e, L.c, L.wall, span_share, L.measured, d);
  if (!cap) return false;
  preprocess_finding(f, std::move(cap), d);
  return true;
}

// Input-bound, yet the workers are mostly idle with cores to spare: what the loop waits for is
// each batch's hand-off (a worker waking, a queue), not loading work. More workers would not
// shorten it.
bool input_handoff(const Facts& f, Diagnosis& d) {
  const Evidence& e = f.e;
  const LoopSpans& in = *e.loop;
  const LoopFacts& L = *f.loop;
  if (!L.input_side || in.loader_only || in.num_workers <= 0 || !L.loader.measured ||
      L.load_s >= 0.5 * L.worker_capacity_s || in.batches <= 0)
    return false;
  d.bottleneck = "cpu_preprocess";
  const double wait_per_batch = L.wait / static_cast<double>(in.batches);
  d.evidence.push_back(fmt("the loop waits %.3f ms per batch while loading one takes %.3f ms of "
                           "a worker: the wait is the hand-off, not the loading",
                           wait_per_batch * 1e3, L.c.worker * 1e3));
  d.verdict = fmt("Input-bound (%s): the loop waits for data %.0f%% of the time, but the %d "
                  "worker(s) are idle most of the run: each batch's hand-off (a worker waking, "
                  "a queue) costs more than loading it.",
                  d.input_bound.c_str(), 100 * d.data_stall_ratio, in.num_workers);
  Recommendation r;
  if (L.c.worker < wait_per_batch) {
    r.setting = "num_workers=0";
    r.action = fmt("Load in the training thread (num_workers=0): a batch takes %.3f ms to load, "
                   "less than the %.3f ms the loop now waits for it.",
                   L.c.worker * 1e3, wait_per_batch * 1e3);
    r.basis = "what-if: rate = batch_size / (step time + load time), loading in the loop";
    r = with_prediction(std::move(r),
                        predicted_batches_per_s(L.c, 0, e.cpus, in.on_gpu) *
                            static_cast<double>(in.batch_size),
                        L.measured);
  } else {
    r.setting = "batch_size";
    r.action = "Raise batch_size: the hand-off costs about the same per batch whatever its size.";
    r.basis = "no prediction: how the step's time grows with the batch is not measured";
  }
  d.recommendations.push_back(r);
  return true;
}

bool input_preprocess(const Facts& f, Diagnosis& d) {
  if (!f.loop->input_side) return false;
  preprocess_finding(f, std::nullopt, d);
  return true;
}

bool gpu_copy(const Facts& f, Diagnosis& d) {
  const LoopFacts& L = *f.loop;
  const GpuTraceSummary* gpu = step_limited_by(L, "host_to_device");
  if (gpu == nullptr) return false;
  d.bottleneck = "host_to_device";
  d.verdict = fmt("Not input-bound: host-to-device copies take %.0f%% of the GPU step, mostly "
                  "from %s memory.",
                  100 * gpu->h2d_share,
                  gpu->h2d_pageable_bytes > gpu->h2d_pinned_bytes ? "pageable" : "pinned");
  if (gpu->h2d_pageable_bytes > 0)
    d.recommendations.push_back(pin_memory(f.e, *gpu, L.c, L.loader_rate, L.measured));
  else
    d.recommendations.push_back(smaller_copies(f.e, *gpu, L.c, L.loader_rate, L.measured));
  return true;
}

// A rank of a job whose GPU runs NCCL's collectives alone much of the step: it waits for the
// other ranks (or the transfer), and neither its compute nor its launches are the limit.
bool gpu_collective_wait(const Facts& f, Diagnosis& d) {
  const LoopFacts& L = *f.loop;
  if (L.gpu == nullptr || L.input_side || L.copies_on_the_thread ||
      L.gpu->collective_alone_share < kCollectiveWaitDominant)
    return false;
  collective_wait_finding(*L.gpu, d);
  return true;
}

// Several GPUs together busy most of the step, none of them alone: the step's work moves from
// one device to the next (a model split across them), each waiting on the others.
bool gpu_devices_take_turns(const Facts& f, Diagnosis& d) {
  const LoopFacts& L = *f.loop;
  if (L.gpu == nullptr || L.input_side || L.copies_on_the_thread || L.gpu->devices.size() < 2)
    return false;
  const GpuTraceSummary& g = *L.gpu;
  const double together = g.gpu_busy_ratio - g.collective_alone_share;
  if (together < kGpuBusyCompute || gpu_work_share(g) >= kGpuBusyCompute) return false;
  const GpuTraceSummary::DeviceBusy& top = *busiest_device(g);
  const GpuTraceSummary::DeviceBusy& low = *idlest_device(g);
  d.bottleneck = "launch_overhead";
  d.verdict = fmt("Not input-bound, and no GPU is the limit: the step's %zu GPUs are together busy "
                  "%.0f%% of it, but the busiest, cuda:%u, only %.0f%% and cuda:%u %.0f%%: the "
                  "work moves from one device to the next, each waiting on the others.",
                  g.devices.size(), 100 * together, top.device, 100 * top.busy_ratio, low.device,
                  100 * low.busy_ratio);
  Recommendation r;
  r.action = "Keep every device busy at once: split each batch into micro-batches that follow one "
             "another through the devices (pipeline parallelism), or give each device a whole "
             "model and its share of the batch (DistributedDataParallel).";
  r.basis = "no prediction: how the step's work divides over the devices is not measured";
  d.recommendations.push_back(std::move(r));
  return true;
}

// An idle GPU whose kernels come from CUDA graph replays or compiled code, with little host time
// in launch calls: the launches a graph would save are gone already, so it is the host's other
// work (Python between the replays, the optimizer on the CPU) that sets the pace.
bool gpu_host_between_launches(const Facts& f, Diagnosis& d) {
  const Evidence& e = f.e;
  const LoopFacts& L = *f.loop;
  const GpuTraceSummary* gpu = step_limited_by(L, "launch_overhead");
  if (gpu == nullptr || !(graphed(*gpu) || compiled(*gpu)) ||
      launch_host_share(*gpu) >= kLaunchHostShare)
    return false;
  d.bottleneck = "cpu_compute";
  d.verdict = fmt("Not input-bound, and not launch-bound: the GPU is busy %.0f%% of the step, "
                  "but its kernels come from %s and the launch calls take %.0f%% of it: the "
                  "host's own work between them (Python, the optimizer on the CPU) sets the pace.",
                  100 * gpu_work_share(*gpu),
                  graphed(*gpu) ? "CUDA graph replays" : "compiled code",
                  100 * launch_host_share(*gpu));
  Recommendation r = bigger_batch(e, *gpu, L.c, L.loader_rate, L.measured);
  r.action = fmt("Raise batch_size from %lld to %s: the host's work per step costs about the same "
                 "at any batch, while the GPU is busy only %.0f%% of the step.",
                 static_cast<long long>(e.loop->batch_size), r.setting.substr(11).c_str(),
                 100 * gpu_work_share(*gpu));
  d.recommendations.push_back(std::move(r));
  return true;
}

bool gpu_launch_bound(const Facts& f, Diagnosis& d) {
  const Evidence& e = f.e;
  const LoopFacts& L = *f.loop;
  const GpuTraceSummary* gpu = step_limited_by(L, "launch_overhead");
  if (gpu == nullptr) return false;
  d.bottleneck = "launch_overhead";
  d.verdict = fmt("Not input-bound: the GPU step is bound by kernel launches%s, not GPU work: "
                  "the GPU is busy %.0f%% of the step (%.0f kernels of %.1f us mean per step).",
                  gpu->syncs_per_step >= 1 ? " and syncs" : "", 100 * gpu->gpu_busy_ratio,
                  gpu->kernels_per_step, gpu->mean_kernel_us);
  d.recommendations.push_back(bigger_batch(e, *gpu, L.c, L.loader_rate, L.measured));
  const std::int64_t parameters = e.loop->model_parameters;
  if (parameters > 0 && parameters < kTinyModelParameters)
    d.recommendations.push_back(tiny_model_on_cpu(e, L.c, L.measured));
  return true;
}

// The loop's last word: the step is the limit (on the GPU with a trace, its work is: the copy and
// the launches were asked first).
bool step_limit(const Facts& f, Diagnosis& d) {
  const Evidence& e = f.e;
  const LoopSpans& in = *e.loop;
  const LoopFacts& L = *f.loop;
  d.bottleneck = in.on_gpu ? "gpu_compute" : "cpu_compute";
  d.verdict = fmt("Not input-bound: the %s training step is the limit (%.0f%% of wall time); "
                  "the loader waits on it.",
                  in.on_gpu ? "GPU" : "CPU", 100 * busy(in, Stage::step) / L.wall);
  // Cheaper to try than a faster step, where the step's own threads crowd the workers.
  if (std::optional<Recommendation> cap =
          step_crowded_out(e, L.c, L.wall, L.load_s / L.worker_capacity_s, L.measured, d)) {
    d.verdict += " The step's threads and the loader's workers overfill the cores.";
    d.recommendations.push_back(std::move(*cap));
  }
  Recommendation r;
  // Not a loader setting, and no prediction of how fast a faster step would be: what is known
  // is how far the loader would keep up, so that is the number given, as an upper bound.
  r.setting = "step";
  const char* how = in.on_gpu ? "mixed precision, a bigger batch, a leaner model"
                              : "a GPU if there is one, a leaner model";
  const double loader_rate = L.loader_rate;
  if (loader_rate > 0 && std::isfinite(loader_rate) && L.measured > 0) {
    r.action = fmt("Speed up the step itself (%s); the loader has headroom up to %.0f "
                   "samples/s (%.1fx the current rate) before it becomes the limit.",
                   how, loader_rate, loader_rate / L.measured);
    // A bound is no prediction: predicted_* stay null, so no one reads the loader's headroom as
    // what a faster step would give.
    r.basis = fmt("no prediction: how much faster the step can be made is not measured; upper "
                  "bound %.1fx, the loader's capacity at the current num_workers, from per-batch "
                  "load time",
                  loader_rate / L.measured);
  } else {
    // A wrapped loop whose loader records no load stages (or no batch size): its capacity is
    // unknown, so no bound is given rather than a 0.
    r.action = fmt("Speed up the step itself (%s).", how);
    r.basis = "no prediction: the loader's own stages were not measured, so how far it would "
              "keep up is unknown";
  }
  d.recommendations.push_back(r);
  return true;
}

}  // namespace feedscope::rules
