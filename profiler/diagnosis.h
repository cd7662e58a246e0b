#pragma once
// Decides which stage holds the run back, from measured numbers only, and predicts what a change
// would give with a simple what-if model of the pipeline (stated in each recommendation's basis).
// The thresholds the rules share live here; the rules themselves in profiler/rules/.
#include <cstdint>
#include <optional>
#include <vector>

#include "profiler/evidence.h"
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
// NCCL's collectives alone on the GPU this much of the step: the rank waits for the others.
inline constexpr double kCollectiveWaitDominant = 0.3;
// Kernel launch calls take this much of the step or more: launch-bound even in a CUDA graph or
// compiled code; less, and an idle GPU beside them is the host's other work.
inline constexpr double kLaunchHostShare = 0.3;
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

// slow_samples: the samples that take kSlowSampleFactor (profiler/slow_samples.h) x the p90 or
// more are at most this share of all samples, and their time beyond the median's cost is at least
// this share of all load time: a few samples cost a large part of loading. Below kSlowSamplesMinCount
// measured samples, no tail is told apart.
inline constexpr double kSlowSamplesMaxShare = 0.05;
inline constexpr double kSlowSamplesCost = 0.20;
inline constexpr std::uint64_t kSlowSamplesMinCount = 200;
// Memory (profiler/rules/memory_rules.cc): a process's private memory that grows steadily at
// this rate or more, by this much or more over its window, is growing; a loader worker whose
// shared memory falls by this share of that rise or more is copying its parent's pages.
inline constexpr double kMemoryGrowthBytesPerS = 256.0 * 1024;
inline constexpr double kMemoryGrowthBytes = 32.0 * 1024 * 1024;
inline constexpr double kMemoryCopiedShare = 0.25;
// A process that grows alone is called a leak only over this many seconds of its readings (its
// start-up left out): a CUDA program's first seconds grow steadily as torch loads its kernels and
// cuBLAS its workspaces (a 7-s matmul loop on an H200: 124 MiB/s over 3.9 s, then nothing).
inline constexpr double kMemoryLeakSeconds = 10.0;
// And it is judged a leak only once it was watched this long: under it, it is "growing, not yet
// judged", with no time to exhaustion (fast_neural_style's VGG16 grew 2.6 MiB/s over 27 s of a
// 60-s watch and was called a leak with a time to run out).
inline constexpr double kMemoryLeakJudgedSeconds = 60.0;
// Loader workers this many times the cores or more, each wanting less than this share of a core
// (busy + waiting for one): mostly idle, and fewer would do.
inline constexpr int kIdleWorkersPerCore = 4;
inline constexpr double kIdleWorkerDemand = 0.5;
// The data stall measured from outside (sampler/thread_wait.h) needs this many looks at the
// training thread while its workers were alive: at 50 looks a second, 4 s of them; its error is
// then at most sqrt(0.25 / 200) = 3.5 points.
inline constexpr std::size_t kMinQueueLooks = 200;
// report.json's data_stall_source for that stall.
inline constexpr const char* kQueueStallSource = "blocked on the DataLoader queue";
// And at num_workers=0, where the training thread's Python stack said it was loading.
inline constexpr const char* kLoadingStackSource = "the training thread in torch.utils.data (its Python stack)";

// What `run` and a wrapped loop measured, as they hand it over: the loop's spans and the
// run's own readings. diagnose() files it into the one Evidence every path shares.
struct DiagnosisInput : LoopSpans {
  int cpus = 1;
  std::optional<WhatIfTrials> trials;
  Utilization utilization;
  // From a GPU activity trace of the measured steps; without it a GPU step is taken as
  // gpu_compute, as the CPU-side spans cannot tell launch-bound from compute-bound.
  std::optional<GpuTraceSummary> gpu_trace;
  std::optional<AutotuneSummary> autotune;
  std::optional<SampleCosts> samples;
};

Evidence evidence_of(const DiagnosisInput& input);

// The one diagnosis: the rules of profiler/rules/registry.cc in their order, over what was
// measured. Every path (run, wrap, watch, each rank) ends here.
Diagnosis diagnose(const Evidence& evidence);
Diagnosis diagnose(const DiagnosisInput& input);

// Takes out of `d` every recommendation predicted below kMinUsefulSpeedup (a slow-down among
// them) and says in its evidence what was considered and why it is not advised.
void drop_unhelpful_advice(Diagnosis& d);

// The batch multiple a launch-bound step is advised to grow by (2 to 16): as far as the GPU's busy
// share leaves room. The trial of `run` tries the same one.
int bigger_batch_factor(const GpuTraceSummary& g);

const char* input_bound_class(double data_stall_ratio);

}  // namespace feedscope
