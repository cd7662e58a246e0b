#pragma once
// `feedscope run` with num_workers=auto or prefetch=auto: follows the loader's moves while the run
// goes on. The CPU step gets the cores the workers leave (as a run at that fixed setting would),
// the Prometheus series feedscope_loader_workers/prefetch follow, and each move is a console line
// once it is judged. At the end, the report's autotune section.
#include <atomic>
#include <cstddef>
#include <ostream>

#include "cli/trainer.h"
#include "exporters/metrics_exporter.h"
#include "loader/batch_loader.h"
#include "profiler/report.h"

namespace feedscope {

// Not thread-safe: the training thread. The loader, trainer and metrics must outlive it.
class AutotuneFollower {
 public:
  // `trainer`, `metrics` may be null. `step_cores` > 0: a CPU step runs on step_cores - workers
  // threads (at least 1); 0: its threads stay as they are (--cpu-threads given). Moves are
  // timed from `origin_ns` (the run's start, as report.html's timeline and trace.json).
  AutotuneFollower(const BatchLoader& loader, Trainer* trainer, MetricsExporter* metrics,
                   int step_cores, std::int64_t origin_ns, std::ostream& log);
  // After each batch: cheap when nothing moved.
  void poll();
  // The report's autotune section; nullopt when the loader did not tune itself.
  std::optional<AutotuneSummary> summary() const;
  // The worker count the loader runs at now, as of the last poll(); any thread (the live
  // diagnosis reads it on the collector's).
  int workers() const noexcept { return workers_.load(std::memory_order_relaxed); }

 private:
  void follow(LoaderSetting now);
  TunerMove timed(TunerMove move) const;  // t_s from origin_ns

  const BatchLoader& loader_;
  Trainer* trainer_;
  MetricsExporter* metrics_;
  int step_cores_;
  double shift_s_;  // the tuner's start after origin_ns
  std::ostream& log_;
  LoaderSetting last_;
  std::atomic<int> workers_;
  std::size_t printed_ = 0;  // moves written to the console
};

}  // namespace feedscope
