#pragma once
// The evidence of a run or a watched program in a few numbers, for the diagnosis' tests.
#include <cstdint>
#include <string>

#include "profiler/diagnosis.h"
#include "profiler/stage_stats.h"
#include "profiler/watch_diagnosis.h"

namespace feedscope {

// A run of `batches` batches of 64 over `wall_s`, with per-batch seconds for each stage given.
inline DiagnosisInput scenario(double wall_s, std::int64_t batches, double read, double decode,
                               double wait, double step, int workers, int cpus, bool gpu) {
  DiagnosisInput in;
  in.wall_s = wall_s;
  in.batches = batches;
  in.batch_size = 64;
  in.samples_per_s = static_cast<double>(batches * 64) / wall_s;
  in.num_workers = workers;
  in.cpus = cpus;
  in.on_gpu = gpu;
  for (int i = 0; i < kStageCount; ++i) {
    StageStats s;
    s.name = std::string(kStageNames[static_cast<std::size_t>(i)]);
    in.stages.push_back(s);
  }
  auto set = [&](Stage stage, double per_batch) {
    StageStats& s = in.stages[static_cast<std::size_t>(stage)];
    s.count = per_batch > 0 ? batches : 0;
    s.busy_s = per_batch * static_cast<double>(batches);
    s.mean_ms = per_batch * 1e3;
  };
  set(Stage::read, read);
  set(Stage::decode, decode);
  set(Stage::wait, wait);
  set(Stage::step, step);
  in.utilization.cpu_process_ratio = 0.9;
  return in;
}

// A watched program on 8 cores: its training process (pid 100) with the main thread `main_busy`
// of a core, `workers` loader workers each `worker_busy`, the machine `system_busy`, the loaders
// in I/O wait `io_wait` of the readings while reading `read_mb_s` from storage.
inline WatchDiagnosisInput tree_input(double main_busy, int workers, double worker_busy,
                                      double system_busy, double io_wait = 0,
                                      double read_mb_s = 0) {
  WatchDiagnosisInput in;
  in.cpus = 8;
  in.tree.trainer_pid = 100;
  in.tree.trainer_name = "python3";
  in.tree.main_thread_busy = main_busy;
  in.tree.trainer_cores = main_busy;
  in.tree.workers = workers;
  in.tree.worker_busy = worker_busy;
  in.tree.workers_cores = workers * worker_busy;
  in.tree.workers_io_wait = io_wait;
  in.tree.main_thread_io_wait = workers == 0 ? io_wait : 0;
  in.tree.storage_read_bytes_per_s = read_mb_s * 1e6;
  in.utilization.series["cpu_system_ratio"] = SeriesStats{system_busy, system_busy, system_busy};
  return in;
}

}  // namespace feedscope
