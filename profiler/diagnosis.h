#pragma once
// Decides which stage holds the run back, from measured numbers only, and predicts what a change
// would give with a simple what-if model of the pipeline (stated in each recommendation's basis).
#include <cstdint>
#include <optional>
#include <vector>

#include "profiler/report.h"

namespace feedscope {

// TensorFlow profiler's input-bound thresholds on the data stall ratio.
inline constexpr double kModeratelyInputBound = 0.05;
inline constexpr double kHighlyInputBound = 0.20;

// GPU thresholds on profiler/gpu_trace.h's summary. Below ~20 us a kernel costs about what its
// launch does (a few us of host API time plus the queueing around it), so the host sets the pace.
inline constexpr double kShortKernelUs = 20.0;
inline constexpr double kGpuBusyCompute = 0.8;  // at or above: the GPU's own work is the limit
inline constexpr double kH2dStepShare = 0.3;    // H2D copies this much of the step: copy-bound
// Pinned host-to-device rate assumed when the run measured none: PCIe 3.0 x16 delivers about
// 12 GB/s from pinned memory (PCIe 4.0 about twice that), so the prediction is conservative.
inline constexpr double kAssumedPinnedGbps = 12.0;
inline constexpr std::int64_t kTinyModelParameters = 1'000'000;
// A change predicted to gain less than this is no advice (run-to-run noise is about as large).
inline constexpr double kMinUsefulSpeedup = 1.05;

// Storage is at work where the process reads at least this much from it (page-cache hits are not
// reads), or the I/O pressure is at least this high.
inline constexpr double kStorageReadBytesPerS = 10e6;
inline constexpr double kStorageIoPressure = 0.10;

struct DiagnosisInput {
  std::vector<StageStats> stages;
  double wall_s = 0;
  std::int64_t batches = 0;  // measured batches (= steps unless loader-only)
  std::int64_t batch_size = 0;
  double samples_per_s = 0;
  int num_workers = 0;
  // Whether the loader collates into pinned memory; unset: not known (a wrapped loop over a
  // loader that did not say). Known on, no advice to pin.
  std::optional<bool> pin_memory;
  int cpus = 1;
  bool on_gpu = false;
  bool loader_only = false;
  std::int64_t model_parameters = 0;  // 0 when unknown
  // The training thread's seconds in copy submission (Report::h2d_submit), outside wait and step.
  double h2d_submit_s = 0;
  // What feedscope measured by trying a change (`run`); without it a what-if that needs one
  // predicts nothing.
  std::optional<WhatIfTrials> trials;
  Utilization utilization;
  // From a GPU activity trace of the measured steps; without it a GPU step is taken as
  // gpu_compute, as the CPU-side spans cannot tell launch-bound from compute-bound.
  std::optional<GpuTraceSummary> gpu_trace;
  // num_workers=auto: what the loader's tuner did; num_workers is where it ended.
  std::optional<AutotuneSummary> autotune;
};

Diagnosis diagnose(const DiagnosisInput& input);

// Takes out of `d` every recommendation predicted below kMinUsefulSpeedup (a slow-down among
// them) and says in its evidence what was considered and why it is not advised.
void drop_unhelpful_advice(Diagnosis& d);

// The batch multiple a launch-bound step is advised to grow by (2 to 16): as far as the GPU's busy
// share leaves room. The trial of `run` tries the same one.
int bigger_batch_factor(const GpuTraceSummary& g);

const char* input_bound_class(double data_stall_ratio);

}  // namespace feedscope
