// The rules that stand beside any bottleneck: a program that ended before anything was measured,
// the evidence of the process tree and of the CUDA trace, and the advice that holds whatever the
// bottleneck (per-step syncs, what the loader's tuner tried, a change predicted too small).
#include <algorithm>
#include <string>
#include <vector>

#include "profiler/autotune_diagnosis.h"
#include "profiler/detail/format.h"
#include "profiler/diagnosis.h"
#include "profiler/gpu_trace.h"
#include "profiler/rules/loop_advice.h"
#include "profiler/rules/rules.h"
#include "profiler/slow_samples.h"
#include "profiler/watch_diagnosis.h"

namespace feedscope {

using detail::fmt;

void drop_unhelpful_advice(Diagnosis& d) {
  std::erase_if(d.recommendations, [&d](const Recommendation& r) {
    if (!r.predicted_speedup || *r.predicted_speedup >= kMinUsefulSpeedup) return false;
    d.evidence.push_back(fmt("considered %s: predicted %.2fx, not advised (%s)", r.setting.c_str(),
                             *r.predicted_speedup, r.basis.c_str()));
    return true;
  });
}

namespace rules {

namespace {

// What the tree shows, as evidence lines every watched diagnosis carries.
void add_tree_evidence(const Evidence& in, Diagnosis& d) {
  const ProcessTreeSummary& t = *in.tree;
  d.evidence.push_back(fmt("training process %d (%s): main thread busy %.0f%% of a core "
                           "(%.0f%% of readings in I/O wait); its other threads %.2f cores%s",
                           t.trainer_pid, t.trainer_name.c_str(), 100 * t.main_thread_busy,
                           100 * t.main_thread_io_wait, t.other_threads_cores,
                           t.busiest_thread.empty()
                               ? ""
                               : fmt(" (busiest: %s, %.0f%%)", t.busiest_thread.c_str(),
                                     100 * t.busiest_thread_busy)
                                     .c_str()));
  if (t.yielding_threads_cores >= kYieldingCoresNamed)
    d.evidence.push_back(fmt("of its other threads' %.2f cores, %.2f gave the core away: in the "
                             "kernel in sched_yield with no read, write or page fault (a BLAS or "
                             "OpenMP pool spinning while it waits for work); counted as idle, since "
                             "any other thread takes that core",
                             t.other_threads_cores, t.yielding_threads_cores));
  if (t.trainers > 1)
    d.evidence.push_back(fmt("%d training processes (role trainer: a script started them and waits "
                             "for them, as torch.multiprocessing's Hogwild does); each runs the "
                             "step, so they are judged as trainers, not loader workers: the others "
                             "took %.2f cores",
                             t.trainers, t.other_processes_cores));
  if (t.workers > 0)
    d.evidence.push_back(fmt("%d loader worker processes: %.2f cores together; a worker busy "
                             "%.0f%% of a core on average (busiest %.0f%%), %.0f%% of readings in "
                             "I/O wait",
                             t.workers, t.workers_cores, 100 * t.worker_busy,
                             100 * t.worker_busy_max, 100 * t.workers_io_wait));
  else if (in.loop && in.loop->num_workers > 0)  // feedscope's loader: worker threads
    d.evidence.push_back(fmt("no loader worker processes: the data is loaded in the training "
                             "process, by %d loader thread(s) (its spans)",
                             in.loop->num_workers));
  else
    d.evidence.push_back("no loader worker processes: the data is loaded in the training process "
                         "(num_workers=0)");
  if (const auto system = series_mean(in.utilization, "cpu_system_ratio"))
    d.evidence.push_back(fmt("the machine's %d cores were %.0f%% busy (%.1f cores idle)", in.cpus,
                             100 * *system, in.cpus * (1 - *system)));
  if (t.storage_read_bytes_per_s)
    d.evidence.push_back(fmt("the program's processes read %.1f MB/s from storage (page-cache "
                             "hits are not reads)",
                             *t.storage_read_bytes_per_s / 1e6));
  if (!t.on_gpu && !t.gpu_share_unmeasured.empty())
    d.evidence.push_back("NVML: " + t.gpu_share_unmeasured);
  if (t.on_gpu)
    d.evidence.push_back(fmt("NVML: the program held %.2f GiB of GPU memory at most%s",
                             static_cast<double>(t.gpu_memory_peak_bytes) / (1u << 30),
                             t.trainer_gpu_sm_util
                                 ? fmt("; the training process used the SMs %.0f%% of the time",
                                       100 * *t.trainer_gpu_sm_util)
                                       .c_str()
                                 : "; the training process's SM share: not measured"));
}


// What the trace shows beyond busy time and syncs, per step or over a window alike: how the
// kernels were launched, the collectives, each device of several, the copies that block, and
// what the trace lost.
void shared_gpu_evidence(const GpuTraceSummary& g, Diagnosis& d) {
  if (const std::string how = launched_how(g); !how.empty())
    d.evidence.push_back(how + ": launch calls take " +
                         fmt("%.0f%% of the time", 100 * launch_host_share(g)));
  if (g.collective_s > 0)
    d.evidence.push_back(fmt("NCCL collectives %.0f%% of the time, alone on the GPU %.0f%% (the "
                             "wait for other ranks with the transfer): the GPU's own work %.0f%%",
                             100 * g.collective_share, 100 * g.collective_alone_share,
                             100 * gpu_work_share(g)));
  if (g.devices.size() >= 2) {
    std::string each;
    const GpuTraceSummary::DeviceBusy* idlest = &g.devices.front();
    for (const GpuTraceSummary::DeviceBusy& x : g.devices) {
      each += fmt("%scuda:%u %.0f%%", each.empty() ? "" : ", ", x.device, 100 * x.busy_ratio);
      if (x.busy_ratio < idlest->busy_ratio) idlest = &x;
    }
    d.evidence.push_back(fmt("%zu GPUs, busy per device: %s; the idlest, cuda:%u, idle %.0f%% of "
                             "the time (busy above counts a moment where any device is)",
                             g.devices.size(), each.c_str(), idlest->device,
                             100 * (1 - idlest->busy_ratio)));
  }
  if (g.syncs_after_h2d > 0)
    d.evidence.push_back(fmt("%lld of the host syncs follow a host-to-device copy on the same "
                             "thread (.to(device) without non_blocking), blocking it %.3f s",
                             static_cast<long long>(g.syncs_after_h2d), g.sync_after_h2d_wait_s));
  for (std::string& loss : gpu_trace_losses(g)) d.evidence.push_back(std::move(loss));
}

void per_step_gpu_evidence(const GpuTraceSummary& g, Diagnosis& d) {
  d.evidence.push_back(fmt("GPU busy %.0f%% of step time (union of kernels and copies over all "
                           "streams); %.1f kernels per step, mean %.1f us, p95 %.1f us",
                           100 * g.gpu_busy_ratio, g.kernels_per_step, g.mean_kernel_us,
                           g.p95_kernel_us));
  if (g.launch_gaps > 0)
    d.evidence.push_back(fmt("GPU idle between launches %.0f%% of step time: %lld gaps, mean "
                             "%.1f us, p95 %.1f us",
                             100 * g.gap_share, static_cast<long long>(g.launch_gaps),
                             g.mean_gap_us, g.p95_gap_us));
  if (g.launch_calls > g.launches_without_call)  // a call traced, so timed
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
  shared_gpu_evidence(g, d);
}


// A watched program sampled, whose figures are mostly its lead: the first seconds of kernels,
// traced whole, where its warm-up is (imagenet's resnet50 on an H200: its first step took 4.1 s
// of the 5.2 s read, and the trace read sync-bound where its last seconds are GPU-bound).
void lead_only_evidence(const GpuTraceSummary& g, Diagnosis& d) {
  if (!g.sampled || g.sampled->sampling.lead_ns <= 0 || !g.sampled->lead_in_figures) return;
  const double lead_s = static_cast<double>(g.sampled->sampling.lead_ns) / 1e9;
  const double window_s = static_cast<double>(g.sampled->sampling.window_ns) / 1e9;
  if (g.sampled->later.read_s >= window_s) return;
  d.evidence.push_back(fmt("the GPU figures are mostly the lead, the first %.0f s of kernels traced "
                           "whole, and not a full window after it: the program's warm-up (cuDNN's "
                           "autotuning, the first batches) weighs in them as it would not in its "
                           "steady state; a run that lasts some windows past its lead is read there",
                           lead_s));
}

void window_gpu_evidence(const GpuTraceSummary& g, double window_s, Diagnosis& d) {
  d.evidence.push_back(fmt("CUDA trace over %.2f s: GPU busy %.0f%% (kernels and copies, all "
                           "streams); %lld kernels, mean %.1f us, p95 %.1f us",
                           window_s, 100 * g.gpu_busy_ratio, static_cast<long long>(g.kernels),
                           g.mean_kernel_us, g.p95_kernel_us));
  if (g.syncs > 0)
    d.evidence.push_back(fmt("%lld host syncs (%.0f per second: %s), blocking the host %.0f%% of "
                             "the time",
                             static_cast<long long>(g.syncs), g.syncs / std::max(window_s, 1e-9),
                             syncs_by_call(g).c_str(), 100 * g.sync_wait_s / std::max(window_s, 1e-9)));
  if (g.h2d_pinned_bytes + g.h2d_pageable_bytes > 0)
    d.evidence.push_back(fmt("host-to-device copies %.0f%% of the time: %.1f MB from pinned, "
                             "%.1f MB from pageable memory",
                             100 * g.h2d_share, static_cast<double>(g.h2d_pinned_bytes) / 1e6,
                             static_cast<double>(g.h2d_pageable_bytes) / 1e6));
  shared_gpu_evidence(g, d);
  lead_only_evidence(g, d);
}


}  // namespace

// A program that failed or crashed that soon, with no spans and no CUDA kernels, ran too briefly
// for its tree to say anything (a missing script, a bad argument): how it ended is the report; a
// bottleneck of milliseconds would be invented.
bool ended_before_measuring(const Facts& f, Diagnosis& d) {
  const Evidence& e = f.e;
  const ProgramEnd& end = *e.end;
  const bool failed = end.ended == "failed" || end.ended == "crashed";
  const bool traced = e.gpu_trace && e.gpu_trace->kernels > 0;
  if (!failed || e.loop || traced || end.wall_s >= kTooShortToDiagnoseS) return false;
  d.input_bound = "unknown";
  d.verdict = fmt("The program %s after %.1f s, before anything could be measured: no diagnosis. "
                  "Its output above says why.",
                  end.exit.c_str(), end.wall_s);
  d.evidence.push_back(fmt("the program %s (%s) after %.1f s; a diagnosis needs %.1f s or more of "
                           "a running program",
                           end.ended.c_str(), end.exit.c_str(), end.wall_s, kTooShortToDiagnoseS));
  return true;
}

// The program's own `Time ... Data ...` lines (or MetricLogger's `time: ... data:` columns)
// measure its data stall where no spans did.
bool printed_data_stall(const Facts& f, Diagnosis& d) {
  const PrintedDataWait& w = *f.e.printed;
  if (!w.share) return false;
  d.data_stall_ratio = *w.share;
  d.data_stall_source = "the program's own " + w.columns + " lines";
  d.input_bound = input_bound_class(*w.share);
  d.evidence.push_back(fmt("the program's own lines: waiting for data %.3f s of %.3f s per-batch "
                           "time (%zu %s lines%s): a data-wait share of %.1f%%",
                           w.data_s, w.time_s, w.counted, w.columns.c_str(),
                           w.lines > w.counted ? " past the start-up" : "", 100 * *w.share));
  return true;
}

bool tree_processes(const Facts& f, Diagnosis& d) {
  add_tree_evidence(f.e, d);
  return true;
}

// Who waited for a core, and how much of the main thread's busy time was spinning in syncs: what
// the outside rules weighed before their thresholds.
bool tree_core_waits(const Facts& f, Diagnosis& d) {
  const ProcessTreeSummary& t = *f.e.tree;
  const TreeFacts& T = *f.tree;
  const CpuBudget& cpu = T.cpu;
  const std::size_t before = d.evidence.size();
  if (cpu.queued_cores >= 0.05)
    d.evidence.push_back(fmt("the program's threads waited for a core %.2f cores' worth of the time "
                             "(run queue: the training thread %.0f%%%s)%s",
                             cpu.queued_cores, 100 * t.main_thread_run_wait.value_or(0),
                             t.workers > 0 ? fmt(", a worker %.0f%%", 100 * t.worker_run_wait.value_or(0)).c_str()
                                           : "",
                             cpu.idle_cores >= 0.05 ? fmt(": the %.2f idle cores came at other moments",
                                                          cpu.idle_cores).c_str()
                                                    : ""));
  if (T.spinning >= 0.05)
    d.evidence.push_back(fmt("of the main thread's %.0f%%, %.0f%% is waiting in CUDA syncs (a "
                             "synchronize spins on its core): %.0f%% is its own work",
                             100 * t.main_thread_busy, 100 * T.spinning, 100 * T.working));
  return d.evidence.size() > before;
}

// Per step where the loop's spans counted the steps (on a GPU), else over the traced window.
bool gpu_trace_evidence(const Facts& f, Diagnosis& d) {
  if (f.loop) {
    if (f.loop->gpu == nullptr) return false;
    per_step_gpu_evidence(*f.loop->gpu, d);
    return true;
  }
  window_gpu_evidence(*f.e.gpu_trace, f.e.gpu_trace->step_wall_s, d);
  return true;
}

// A training thread handing its batches over from pageable memory, beside a GPU that sets the
// pace anyway: the copy is context, not the limit.
bool copy_beside_gpu_limit(const Facts& f, Diagnosis& d) {
  const LoopFacts& L = *f.loop;
  if (!L.gpu_paces_loop || L.submit_share < kH2dStepShare) return false;
  d.evidence.push_back(fmt("the training thread hands batches to the GPU %.0f%% of the run (%.2f "
                           "ms a batch), while the GPU works %.2f ms a step, %.0f%% of the loop's "
                           "time per batch: the copy overlaps the GPU's work, which sets the pace",
                           100 * L.submit_share, 1e3 * L.c.submit, 1e3 * L.gpu->device_s_per_step,
                           100 * L.gpu->device_s_per_step * static_cast<double>(f.e.loop->batches) /
                               L.wall));
  return true;
}

// torch's `.to(device)` without non_blocking blocks the thread after each copy: its own advice,
// not ".item()"'s.
bool blocking_input_copy(const Facts& f, Diagnosis& d) {
  const GpuTraceSummary& g = *f.e.gpu_trace;
  if (f.loop) {
    const LoopFacts& L = *f.loop;
    if (L.gpu == nullptr || L.input_side ||
        static_cast<double>(L.gpu->syncs_after_h2d) / static_cast<double>(std::max<std::int64_t>(L.gpu->steps, 1)) < 1)
      return false;
    d.recommendations.push_back(pin_and_copy_async(f.e, *L.gpu, L.c, L.loader_rate, L.measured));
    return true;
  }
  if (g.syncs_after_h2d == 0 || g.sync_after_h2d_wait_s <= 0.05 * g.step_wall_s) return false;
  d.recommendations.push_back(pin_and_copy_async_window(g));
  return true;
}

bool remove_host_syncs(const Facts& f, Diagnosis& d) {
  const LoopFacts& L = *f.loop;
  if (L.gpu == nullptr || L.input_side || other_syncs_per_step(*L.gpu) < 1) return false;
  d.recommendations.push_back(remove_syncs(f.e, *L.gpu, L.c, L.loader_rate, L.measured));
  return true;
}

namespace {

// "class_0003/img_00000049.jpg": enough of a path to find the file, short enough for a line.
std::string short_name(const std::string& path) {
  const std::size_t last = path.rfind('/');
  if (last == std::string::npos || last == 0) return path;
  const std::size_t before = path.rfind('/', last - 1);
  return before == std::string::npos ? path : path.substr(before + 1);
}

// "152 ms (4000x3000, 2.3 MB jpeg)"
std::string what_it_is(const SlowSample& s) {
  std::string out = fmt("%.0f ms", s.ms);
  std::string parts;
  if (s.width && s.height) parts = fmt("%dx%d", *s.width, *s.height);
  if (s.bytes) parts += (parts.empty() ? "" : ", ") + fmt("%.1f MB", static_cast<double>(*s.bytes) / 1e6);
  if (!s.format.empty()) parts += (parts.empty() ? "" : " ") + s.format;
  return parts.empty() ? out : out + " (" + parts + ")";
}

// A CPU run's loading and step per batch in CPU seconds, from the sampler's per-thread busy shares
// ("training", "worker N"), and the cores the process got (its CPU share of the machine).
struct CpuCosts {
  double worker = 0;
  double step = 0;
  double cores = 0;
  bool measured = false;
};

CpuCosts cpu_costs(const Evidence& e) {
  CpuCosts c;
  if (!e.loop || e.loop->on_gpu || e.loop->batches <= 0 || e.loop->loader_only) return c;
  const auto& threads = e.utilization.threads;
  const auto training = threads.find("training");
  double workers = 0;
  for (const auto& [name, busy_share] : threads)
    if (name.starts_with("worker ")) workers += busy_share;
  c.cores = e.utilization.cpu_process_ratio * e.cpus;
  if (training == threads.end() || training->second <= 0 || workers <= 0 || c.cores <= 0) return c;
  const double per_batch = e.loop->wall_s / static_cast<double>(e.loop->batches);
  c.step = training->second * per_batch;
  c.worker = workers * per_batch;
  c.measured = true;
  return c;
}

// The shorter side the advice names: the pipeline's crop scaled as its eval Resize scales it
// (224 -> 256), so a re-encoded file still covers every crop the pipeline takes at full detail.
int advised_side(int image_size) { return (image_size * 256 + 223) / 224; }

}  // namespace

bool slow_samples(const Facts& f, Diagnosis& d) {
  const SampleCosts& s = *f.e.samples;
  if (s.count < kSlowSamplesMinCount || s.total_s <= 0 || s.slow_count == 0) return false;
  const double slow_share = static_cast<double>(s.slow_count) / static_cast<double>(s.count);
  const double cost = s.slow_excess_s / s.total_s;
  if (slow_share > kSlowSamplesMaxShare || cost < kSlowSamplesCost) return false;
  // The advice is about files and their pixels: a records or shard dataset's slow samples (a cold
  // read) are storage's, which input_storage weighs.
  const bool images = std::any_of(s.slowest.begin(), s.slowest.end(),
                                  [](const SlowSample& x) { return x.width && x.height; });
  if (!images) return false;

  std::string files;
  std::size_t named = 0;
  bool big = false;  // a named file larger than the size advised
  const int side = s.image_size > 0 ? advised_side(s.image_size) : 0;
  for (const SlowSample& slow : s.slowest) {
    if (slow.ms < s.slow_threshold_ms) break;
    if (side > 0 && slow.width && slow.height && std::min(*slow.width, *slow.height) > side) big = true;
    if (named++ < 3) files += (files.empty() ? "" : "; ") + short_name(slow.file) + " " + what_it_is(slow);
  }
  d.evidence.push_back(fmt("a few slow samples cost %.0f%% of loading (%s): %.1f%% of samples (%llu "
                           "of %llu) took %.0fx the p90 or more; p50 %.1f ms, p90 %.1f ms, p99 "
                           "%.1f ms, max %.0f ms; the slowest 1%% took %.0f%% of all load time, the "
                           "slowest 5%% %.0f%%%s",
                           100 * cost, s.measured_by.c_str(), 100 * slow_share,
                           static_cast<unsigned long long>(s.slow_count),
                           static_cast<unsigned long long>(s.count), kSlowSampleFactor, s.p50_ms,
                           s.p90_ms, s.p99_ms, s.max_ms, 100 * s.slowest_1pct_share,
                           100 * s.slowest_5pct_share,
                           files.empty() ? "" : ("; slowest: " + files).c_str()));
  if (s.wait_s && *s.wait_s > 0 && s.wait_on_slowest_s)
    d.evidence.push_back(fmt("the loop waited %.2f s in the loader, %.0f%% of it while the batch it "
                             "waited for loaded its slowest sample",
                             *s.wait_s, 100 * *s.wait_on_slowest_s / *s.wait_s));

  Recommendation r;
  const std::string count = fmt("%llu", static_cast<unsigned long long>(s.slow_count));
  if (big) {
    r.setting = fmt("slow files: shorter side %d px", side);
    // Under watch the crop is feedscope's decoder's, 224: the program's own is not seen.
    const std::string from = fmt(f.e.loop ? "the pipeline's %d crop x 256/224"
                                          : "a %d crop x 256/224: the program's own crop is not seen from outside",
                                 s.image_size);
    r.action = fmt("Pre-resize (re-encode) the %s slow files so their shorter side is %d px (%s), "
                   "or cache them decoded: report.json's samples.slowest lists them.",
                   count.c_str(), side, from.c_str());
  } else {
    r.setting = "slow files: re-encoded or cached decoded";
    r.action = fmt("Re-encode the %s slow files (a smaller size or a cheaper format) or cache them "
                   "decoded: report.json's samples.slowest lists them.",
                   count.c_str());
  }
  // Those samples at the median's cost, through the same model as the num_workers prediction.
  if (!f.loop || f.loop->c.worker <= 0) {
    r.basis = "no prediction: loading per batch was not measured beside the step (feedscope's "
              "decoder alone); at the median's cost loading would take " +
              fmt("%.0f%% less", 100 * cost);
    d.recommendations.push_back(std::move(r));
    return true;
  }
  const LoopSpans& in = *f.e.loop;
  const LoopFacts& l = *f.loop;
  // Of the loader's work per batch, the part the per-sample times cover (collate is apart).
  const double load_busy = busy(in, Stage::read) + busy(in, Stage::decode) + busy(in, Stage::transform);
  const double load_part = l.loader.busy_s > 0 && load_busy > 0 ? std::min(1.0, load_busy / l.loader.busy_s) : 1.0;
  const double kept = 1 - cost * load_part;  // of the loading per batch, what stays
  const int workers = std::max(0, in.num_workers);
  // A CPU step beside busy workers: the spans' wall times are swollen by the wait for a core (the
  // heavy files' decoding takes the step's core too), so the model runs on CPU time, where the
  // sampler read the threads': the loading and the step per batch in CPU seconds, the process's
  // cores as it got them. Cheaper loading gives the step its core back.
  const CpuCosts cpu = cpu_costs(f.e);
  Costs before = l.c, after = l.c;
  double cores = f.e.cpus;
  std::string basis = "the num_workers model (min(workers / load time, 1 / step time, cores / CPU "
                      "time per batch)) on the spans' times";
  if (cpu.measured && workers > 0) {
    before = Costs{cpu.worker, cpu.step};
    after = before;
    cores = cpu.cores;
    basis = fmt("the num_workers model (min(workers / load time, 1 / step time, cores / CPU time "
                "per batch)) on CPU time: the step %.1f ms of CPU a batch (its span %.1f ms, "
                "waiting for a core beside the workers), %.2f cores the process got",
                cpu.step * 1e3, l.c.step * 1e3, cpu.cores);
  }
  after.worker = before.worker * kept;
  const double before_rate = predicted_batches_per_s(before, workers, cores, in.on_gpu);
  const double after_rate = predicted_batches_per_s(after, workers, cores, in.on_gpu);
  if (before_rate > 0) r = with_prediction(std::move(r), l.measured * after_rate / before_rate, l.measured);
  r.basis = fmt("what-if: the %s slow samples at the median's %.1f ms, loading %.1f -> %.1f ms per "
                "batch of one core, at %d workers, through ",
                count.c_str(), s.p50_ms, before.worker * 1e3, after.worker * 1e3, workers) +
            basis;
  d.recommendations.push_back(std::move(r));
  return true;
}

bool autotune_tried(const Facts& f, Diagnosis& d) {
  advise_from_autotune(*f.e.autotune, d);
  return true;
}

bool drop_unhelpful(const Facts&, Diagnosis& d) {
  const std::size_t before = d.recommendations.size();
  drop_unhelpful_advice(d);
  return d.recommendations.size() < before;
}

}  // namespace rules

}  // namespace feedscope
