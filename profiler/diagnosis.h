#pragma once
// Decides which stage holds the run back, from measured numbers only, and predicts what a change
// would give with a simple what-if model of the pipeline (stated in each recommendation's basis).
#include <cstdint>
#include <vector>

#include "profiler/report.h"

namespace feedscope {

// TensorFlow profiler's input-bound thresholds on the data stall ratio.
inline constexpr double kModeratelyInputBound = 0.05;
inline constexpr double kHighlyInputBound = 0.20;

struct DiagnosisInput {
  std::vector<StageStats> stages;
  double wall_s = 0;
  std::int64_t batches = 0;  // measured batches (= steps unless loader-only)
  std::int64_t batch_size = 0;
  double samples_per_s = 0;
  int num_workers = 0;
  int cpus = 1;
  bool on_gpu = false;
  bool loader_only = false;
  Utilization utilization;
};

Diagnosis diagnose(const DiagnosisInput& input);

const char* input_bound_class(double data_stall_ratio);

}  // namespace feedscope
