#pragma once
// The what-if trials of `feedscope run`: after the measured window, the change a first diagnosis
// points at is tried for a moment (a bigger batch on the GPU, the same model on the CPU, a batch
// copied from pinned memory), so that the recommendation's predicted speed-up stands on what the
// change measured on this machine rather than on a model of it. The diagnosis is then made again
// with the trials in its input (profiler/diagnosis.h).
#include <cstddef>
#include <ostream>

#include "cli/trainer.h"
#include "profiler/diagnosis.h"
#include "profiler/report.h"

namespace feedscope {

struct TrialSetup {
  TrainerOptions model;    // the run's model, as its trainer was made
  int cuda_index = -1;     // the run's GPU; -1 on the CPU
  std::size_t batch_bytes = 0;  // one batch with its labels, as the copy engine copies it
  double budget_s = 1.0;   // for each trial's timed steps
};

// The trials `first` asks for; nullopt when it asks for none (not launch-bound, not copy-bound).
// Never throws: a trial that cannot run says why in not_run.
std::optional<WhatIfTrials> run_trials(const Diagnosis& first, const DiagnosisInput& in,
                                       const TrialSetup& setup, std::ostream& log);

}  // namespace feedscope
