#include "cli/trials.h"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "pinned_memory/copy_engine.h"
#include "pinned_memory/host_allocator.h"
#include "pinned_memory/pinned_pool.h"
#include "sampler/statistics.h"

namespace feedscope {

namespace {

// GB/s of `bytes` copied from a pinned slab by the copy engine, the median of a few copies timed
// with events on the copy stream (the copy alone, not the host's wait for it).
std::optional<double> pinned_copy_gbps(int device, std::size_t bytes, std::string& why_not) {
  try {
    auto pool = PinnedPool::create(bytes, 1, make_pinned_allocator());
    CopyEngine engine({.device = device, .buffer_bytes = pool->slab_bytes(), .buffers = 2});
    std::vector<CopyTiming> timings;
    for (int i = 0; i < 6; ++i) {
      DeviceCopy copy = engine.submit(pool->acquire(), bytes, i);
      engine.wait_idle();
      engine.reclaim(&timings);
      copy.release_after(nullptr);
    }
    std::vector<double> gbps;
    for (const CopyTiming& t : timings)
      if (t.tag > 0 && t.end_ns > t.begin_ns)  // the first copy warms the path up
        gbps.push_back(static_cast<double>(t.bytes) / static_cast<double>(t.end_ns - t.begin_ns));
    if (gbps.empty()) {
      why_not = "the copy engine timed no copy";
      return std::nullopt;
    }
    return percentile(std::move(gbps), 0.50);
  } catch (const std::exception& e) {
    why_not = e.what();
    return std::nullopt;
  }
}

}  // namespace

std::optional<WhatIfTrials> run_trials(const Diagnosis& first, const DiagnosisInput& in,
                                       const TrialSetup& setup, std::ostream& log) {
  const bool launch_bound = first.bottleneck == "launch_overhead" && in.gpu_trace && setup.cuda_index >= 0;
  const bool copy_bound = first.bottleneck == "host_to_device" && setup.cuda_index >= 0 &&
                          setup.batch_bytes > 0;
  if (!launch_bound && !copy_bound) return std::nullopt;
  WhatIfTrials t;
  std::string why;
  if (launch_bound) {
    t.bigger_batch = in.batch_size * bigger_batch_factor(*in.gpu_trace);
    log << "feedscope: trying the model at batch " << t.bigger_batch << " on the GPU" << std::endl;
    TrainerOptions gpu = setup.model;
    gpu.device = "cuda:" + std::to_string(setup.cuda_index);
    t.bigger_batch_step_s = trial_step_seconds(gpu, t.bigger_batch, 200, setup.budget_s, why);
    if (!t.bigger_batch_step_s) t.not_run.push_back("batch " + std::to_string(t.bigger_batch) + ": " + why);
    // The same trial at the run's batch: the ratio of the two scales the run's measured step,
    // which also carries what the trial leaves out (the copy's ordering, the buffers' release).
    t.run_batch_step_s = trial_step_seconds(gpu, in.batch_size, 200, setup.budget_s, why);
    if (!t.run_batch_step_s) t.not_run.push_back("batch " + std::to_string(in.batch_size) + ": " + why);
    if (in.model_parameters > 0 && in.model_parameters < kTinyModelParameters) {
      TrainerOptions cpu = setup.model;
      cpu.device = "cpu";
      // The threads a CPU run would give its step: the cores its workers leave.
      cpu.cpu_threads = std::max(1, in.cpus - in.num_workers);
      t.cpu_threads = cpu.cpu_threads;
      log << "feedscope: trying the model on the CPU (" << t.cpu_threads << " threads)" << std::endl;
      t.cpu_step_s = trial_step_seconds(cpu, in.batch_size, 1000, setup.budget_s, why);
      if (!t.cpu_step_s) t.not_run.push_back("the CPU: " + why);
    }
  }
  if (copy_bound) {
    log << "feedscope: trying a batch's copy from pinned memory" << std::endl;
    t.pinned_h2d_gbps = pinned_copy_gbps(setup.cuda_index, setup.batch_bytes, why);
    if (!t.pinned_h2d_gbps) t.not_run.push_back("a pinned copy: " + why);
  }
  return t;
}

}  // namespace feedscope
