#pragma once
// `feedscope tune`: a hill climb in the style of tf.data's autotune, but one that shows its work.
// It starts from minimal parallelism, measures, and moves the knob the diagnosis predicts gains
// most (its recommendations first, then the moves that answer the bottleneck), keeps a move only
// when the measured throughput rises by more than the noise margin, and stops when no move in
// bounds gains, or at the time budget. Bounded by the CPU cores, a RAM budget for slab memory,
// and a time budget.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cli/config.h"
#include "cli/sweep.h"

namespace feedscope {

struct TuneMove;

struct TuneOptions {
  double time_budget_s = 300;     // no run starts that would end past it (by the last run's time)
  std::uint64_t ram_budget_bytes = 0;  // slab memory; 0: unbounded
  int max_workers = 1;            // the CPU cores
  int max_threads = 1;            // torch's threads at most (cpu_threads): the CPU cores
  std::int64_t max_batch_size = 0;  // 0: the batch size is not tuned (it changes the training)
  std::int64_t max_prefetch = 8;
  double min_gain = 0.03;  // a move must beat the current point by this much: less is noise
  // The knobs it moves (batch_size only up to max_batch_size) and names; the others keep the
  // base config's value. A user's command: those it receives (cli/command_points.h).
  KnobList knobs = all_knobs();
  bool by_iterations = false;  // climb on the reports' batches_per_s (TuneResult::unit "it/s")
  std::function<std::uint64_t(std::int64_t batch_size)> slab_bytes;
  std::function<void(const TuneMove&)> on_move;
  std::function<bool()> stop_requested;
};

struct TuneMove {
  int run = 0;             // 1-based count of runs so far
  std::string knob;        // "num_workers", or "start"
  std::string from, to;    // values as text
  std::string reason;      // why this move: the bottleneck and the prediction's basis
  double predicted_speedup = 0;  // 0: no prediction
  double samples_per_s = 0;  // in TuneResult::unit
  double gain = 0;         // measured / current - 1
  bool kept = false;
  std::string bottleneck;  // of the measured run
};

struct TuneResult {
  KnobList knobs = all_knobs();  // what best and the moves name
  std::string unit = "samples/s";  // or "it/s" (TuneOptions::by_iterations)
  RunConfig best;
  double best_samples_per_s = 0;  // in unit
  std::string best_bottleneck;
  std::vector<TuneMove> moves;
  std::string stop_reason;
  std::string interrupted;  // "SIGINT" when stopped early
  int runs = 0;
  double wall_s = 0;
};

// Throws ConfigError for a bad option (e.g. max_workers < 1).
TuneResult run_tune(const RunConfig& base, const TuneOptions& options, const PointRunner& run);

std::string tune_json(const TuneResult& result);

}  // namespace feedscope
