#include "profiler/diagnosis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "profiler/stage_stats.h"

namespace feedscope {

namespace {

std::string fmt(const char* format, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

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
};

Costs measure_costs(const DiagnosisInput& in) {
  Costs c;
  const double batches = static_cast<double>(std::max<std::int64_t>(in.batches, 1));
  c.worker = (busy(in, Stage::read) + busy(in, Stage::decode) + busy(in, Stage::transform) +
              busy(in, Stage::collate)) / batches;
  c.step = in.loader_only ? 0.0 : mean_s(in, Stage::step);
  return c;
}

// Batches per second the pipeline sustains with `workers` loader threads. Workers overlap with
// the step; with none, loading and stepping alternate in one thread. On the CPU the step and the
// workers share the cores, so their summed CPU time per batch bounds the rate too.
double predicted_batches_per_s(const Costs& c, int workers, int cpus, bool on_gpu) {
  if (c.worker <= 0 && c.step <= 0) return 0;
  if (workers == 0) return 1.0 / (c.worker + c.step);
  double rate = c.worker > 0 ? workers / c.worker : INFINITY;
  if (c.step > 0) rate = std::min(rate, 1.0 / c.step);
  const double cpu_per_batch = c.worker + (on_gpu ? 0.0 : c.step);
  if (cpu_per_batch > 0) rate = std::min(rate, cpus / cpu_per_batch);
  return rate;
}

Recommendation more_workers(const DiagnosisInput& in, const Costs& c, double measured) {
  // Enough workers that the loader outruns the step, but no more than the cores.
  int target = in.num_workers + 1;
  // The epsilon keeps 0.030/0.010 from rounding up to 4 workers.
  if (c.step > 0) target = std::max(target, static_cast<int>(std::ceil(c.worker / c.step - 1e-9)));
  target = std::min(target, in.cpus);
  Recommendation r;
  r.setting = "num_workers=" + std::to_string(target);
  r.action = fmt("Raise num_workers from %d to %d: loading a batch takes %.1f ms of one core, "
                 "the step %.1f ms.",
                 in.num_workers, target, c.worker * 1e3, c.step * 1e3);
  const double rate = predicted_batches_per_s(c, target, in.cpus, in.on_gpu) *
                      static_cast<double>(in.batch_size);
  r.predicted_samples_per_s = rate;
  r.predicted_speedup = measured > 0 ? rate / measured : 0;
  r.basis = "what-if: rate = min(workers / load time, 1 / step time, cores / CPU time per batch)"
            ", from this run's per-batch stage means";
  return r;
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
  d.input_bound = input_bound_class(d.data_stall_ratio);
  const Costs c = measure_costs(in);
  const double measured = in.samples_per_s;
  const double load_s = busy(in, Stage::read) + busy(in, Stage::decode) +
                        busy(in, Stage::transform) + busy(in, Stage::collate);
  const double h2d_s = busy(in, Stage::h2d);
  const double worker_capacity_s = wall * std::max(1, in.num_workers);
  const double cpu_saturation = in.utilization.cpu_process_ratio;

  d.evidence.push_back(fmt("data stall %.1f%% of wall time (wait %.2f s of %.2f s)",
                           100 * d.data_stall_ratio, wait, wall));
  if (!in.loader_only)
    d.evidence.push_back(fmt("step %.2f ms mean per batch, %.1f%% of wall time",
                             c.step * 1e3, 100 * busy(in, Stage::step) / wall));
  d.evidence.push_back(fmt("loading %.2f ms of one thread per batch; %s busy %.0f%% of the run",
                           c.worker * 1e3,
                           in.num_workers > 0
                               ? (std::to_string(in.num_workers) + " worker(s)").c_str()
                               : "the training thread (num_workers=0)",
                           100 * load_s / worker_capacity_s));
  d.evidence.push_back(fmt("process CPU %.0f%% of %d cores", 100 * cpu_saturation, in.cpus));

  const bool input_side = in.loader_only || d.data_stall_ratio >= kModeratelyInputBound;
  if (input_side) {
    const double read_s = busy(in, Stage::read);
    if (h2d_s > load_s) {
      d.bottleneck = "host_to_device";
      d.evidence.push_back(fmt("h2d %.2f s against %.2f s of loading", h2d_s, load_s));
    } else if (read_s > 0.5 * load_s && cpu_saturation < 0.8) {
      d.bottleneck = "storage_io";
      d.evidence.push_back(fmt("read is %.0f%% of loading time while the CPU is %.0f%% busy",
                               100 * read_s / std::max(load_s, 1e-9), 100 * cpu_saturation));
    } else {
      d.bottleneck = "cpu_preprocess";
    }
  } else {
    d.bottleneck = in.on_gpu ? "gpu_compute" : "cpu_compute";
  }

  const double loader_rate =
      predicted_batches_per_s(Costs{c.worker, 0}, std::max(1, in.num_workers), in.cpus,
                              in.on_gpu) * static_cast<double>(in.batch_size);
  if (d.bottleneck == "cpu_preprocess") {
    if (in.num_workers < in.cpus) {
      d.recommendations.push_back(more_workers(in, c, measured));
    } else {
      Recommendation r;
      r.setting = "cheaper preprocessing";
      r.action = "Every core is loading already: make decode/transform cheaper (smaller stored "
                 "images, reduced-scale decode) or move them off the training machine.";
      const double step_bound = c.step > 0 ? in.batch_size / c.step : 0;
      r.predicted_samples_per_s = step_bound;
      r.predicted_speedup = measured > 0 ? step_bound / measured : 0;
      r.basis = "upper bound: the step's own rate if loading cost nothing";
      d.recommendations.push_back(r);
    }
    d.verdict = fmt("Input-bound (%s): the training loop waits for data %.0f%% of the time, and "
                    "loader workers spend it on CPU preprocessing.",
                    d.input_bound.c_str(), 100 * d.data_stall_ratio);
    if (in.loader_only)
      d.verdict = fmt("Loader-only run: %.0f samples/s, limited by CPU preprocessing on %d "
                      "worker(s).", measured, std::max(1, in.num_workers));
  } else if (d.bottleneck == "storage_io") {
    d.verdict = fmt("Input-bound (%s): workers wait on storage reads.", d.input_bound.c_str());
  } else if (d.bottleneck == "host_to_device") {
    d.verdict = fmt("Input-bound (%s): the host-to-device copy limits the pipeline.",
                    d.input_bound.c_str());
  } else {
    const char* where = in.on_gpu ? "GPU" : "CPU";
    d.verdict = fmt("Not input-bound: the %s training step is the limit (%.0f%% of wall time); "
                    "the loader waits on it.",
                    where, 100 * busy(in, Stage::step) / wall);
    Recommendation r;
    r.setting = in.on_gpu ? "step" : "device=cuda";
    r.action = fmt("Speed up the step itself (%s); the loader can deliver %.0f samples/s, %.1fx "
                   "the current rate.",
                   in.on_gpu ? "mixed precision, a bigger batch, a leaner model"
                             : "a GPU, a leaner model",
                   loader_rate, measured > 0 ? loader_rate / measured : 0.0);
    r.predicted_samples_per_s = loader_rate;
    r.predicted_speedup = measured > 0 ? loader_rate / measured : 0;
    r.basis = "upper bound: the loader's capacity at the current num_workers, from per-batch "
              "load time";
    d.recommendations.push_back(r);
  }
  return d;
}

}  // namespace feedscope
