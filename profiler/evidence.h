#pragma once
// What a diagnosis reasons from: one model that every path fills with what it measured and leaves
// empty what it did not (docs/diagnosis.md). `run` and a wrapped loop fill `loop` (their stage
// spans); `watch` fills `tree` (the process tree by role), `end`, `torch`, and `loop` where a
// Session inside the program sent spans; each rank of a job is its own Evidence. The rules
// (profiler/rules/) read only this, so "not measured" is an empty optional, never a zero.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profiler/process_tree.h"
#include "profiler/program_torch.h"
#include "profiler/report.h"

namespace feedscope {

// What a training loop's stage spans measured over their window (`run`, `wrap`, a Session).
struct LoopSpans {
  std::vector<StageStats> stages;
  double wall_s = 0;         // the window the spans cover
  std::int64_t batches = 0;  // measured batches (= steps unless loader-only)
  std::int64_t batch_size = 0;
  double samples_per_s = 0;
  int num_workers = 0;
  // Whether the loader collates into pinned memory; unset: not known (a wrapped loop over a
  // loader that did not say). Known on, no advice to pin.
  std::optional<bool> pin_memory;
  bool on_gpu = false;
  bool loader_only = false;
  std::int64_t model_parameters = 0;  // 0 when unknown
  // The training thread's seconds in copy submission (Report::h2d_submit), outside wait and step.
  double h2d_submit_s = 0;
};

// What a program's own progress lines say of its wait for data (cli/output_scanner.h reads them):
// ImageNet-style `Time ... Data ...` lines, or torchvision MetricLogger's `time: ... data: ...`.
struct PrintedDataWait {
  std::size_t lines = 0;    // such lines read
  std::size_t counted = 0;  // those summed: all but the ones that carry the start-up
  double time_s = 0;        // the summed per-batch times (each line's current value)
  double data_s = 0;        // the summed waits for data
  std::optional<double> share;  // data_s / time_s; null without a line
  std::string columns = "`Time ... Data ...`";  // which lines, as the evidence names them
};

// How a watched program ended (ProgramSummary's `ended` and `exit`) and after how long.
struct ProgramEnd {
  std::string ended;
  std::string exit;
  double wall_s = 0;
};

struct Evidence {
  int cpus = 1;
  Utilization utilization;  // the sampler's series: process and system CPU, disk, pressure, GPUs
  std::optional<LoopSpans> loop;
  std::optional<ProcessTreeSummary> tree;
  // A GPU activity trace: over the loop's measured steps where there are spans, else over the
  // program's CUDA-active time.
  std::optional<GpuTraceSummary> gpu_trace;
  // What feedscope measured by trying a change (`run`); without it a what-if that needs one
  // predicts nothing.
  std::optional<WhatIfTrials> trials;
  // num_workers=auto: what the loader's tuner did; the loop's num_workers is where it ended.
  std::optional<AutotuneSummary> autotune;
  std::optional<ProgramTorch> torch;  // the program's own torch, where its memory map showed one
  std::optional<ProgramEnd> end;      // a watched program: how it ended
  // A watched program's own `Time ... Data ...` lines, where it printed any.
  std::optional<PrintedDataWait> printed;
  // How many data files (images, shards) `watch` saw the program hold open; unset where it did
  // not look (--no-try-loader).
  std::optional<std::size_t> data_files_seen;
  std::string data_kind;  // WatchDiagnosisInput's: "images", "shards", "none"; empty: not looked
  // Each sample's load time and the slowest files (Report::samples); unset where not measured.
  std::optional<SampleCosts> samples;
};

}  // namespace feedscope
