#pragma once
// `feedscope sweep`: a grid over num_workers x batch_size x prefetch x pin_memory, each point run
// up to --repeats times (median kept; a point stops repeating once its repeats agree), with the
// best configuration and the smallest one within 5 % of it. The runner is passed in, so tests
// drive the sweep with fabricated reports.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/config.h"
#include "profiler/report.h"

namespace feedscope {

// Seconds on the steady clock since `start` (a point's, a sweep's or a tune's elapsed time).
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The knobs a sweep varies, each a list of values. An empty list keeps the base config's value.
struct SweepGrid {
  std::vector<std::int64_t> num_workers;
  std::vector<std::int64_t> batch_size;
  std::vector<std::int64_t> prefetch;
  std::vector<bool> pin_memory;
  std::vector<std::int64_t> cpu_threads;  // torch's threads (OMP_NUM_THREADS for a command)
};

// The grid's keys, in the order points are enumerated (the last varies fastest). The first four
// are the loader's (all_knobs()); cpu_threads, torch's thread count, is named only where a sweep
// varies it or a command receives it ({cpu_threads} or {threads}).
inline constexpr const char* kGridKeys[] = {"num_workers", "batch_size", "prefetch", "pin_memory",
                                            "cpu_threads"};

// The knobs a result names, in kGridKeys order: all four for feedscope's own runs; for a user's
// command only those it receives or the grid varies (cli/command_points.h), since the others
// would be feedscope's defaults, which the program never sees.
using KnobList = std::vector<std::string>;
KnobList all_knobs();
bool has_knob(const KnobList& knobs, const std::string& knob);
// "num_workers=2 batch_size=64 prefetch=2 pin_memory=on", with the named knobs only.
std::string knobs_label(const RunConfig& config, const KnobList& knobs = all_knobs());

// Parses comma lists such as {"num_workers": "0,1,2,4"}. Each value is checked exactly as the
// config checks it; a bad one is a ConfigError naming the key and the value. Duplicates are
// dropped, order kept.
SweepGrid parse_grid(const std::map<std::string, std::string>& lists);

// Every combination of the grid over `base`, in grid order.
std::vector<RunConfig> grid_points(const RunConfig& base, const SweepGrid& grid);

struct SweepPoint {
  std::int64_t num_workers = 0;
  std::int64_t batch_size = 0;
  std::int64_t prefetch = 0;
  bool pin_memory = false;
  std::int64_t cpu_threads = 0;  // 0: the default (the cores the workers leave; unset for a command)
  std::vector<double> samples_per_s;  // one per repeat
  double median_samples_per_s = 0;
  std::string bottleneck;     // of the repeat nearest the median
  std::optional<double> data_stall_ratio;  // of that repeat; null where nothing measured it
  std::uint64_t host_bytes = 0;  // slab memory the loader holds at this point
  bool pinned = false;           // that memory is page-locked (pin_memory on a GPU run)

  RunConfig knobs() const;  // a config holding this point's knobs
  // "num_workers=2 batch_size=64 prefetch=2 pin_memory=on", with the named knobs only.
  std::string label(const KnobList& knobs = all_knobs()) const;
};

struct SweepResult {
  KnobList knobs = all_knobs();    // what the table, files and labels name
  // What the points' figures count: "samples/s", or "it/s" for a program that prints it/s or
  // s/it without a batch size to scale them (SweepPoint's samples_per_s fields hold it/s then).
  std::string unit = "samples/s";
  bool host_bytes_known = true;    // false: a program's own loader, whose memory is its own
  std::vector<std::string> command;  // the user's program, as given; empty: feedscope's runs
  std::vector<SweepPoint> points;  // the completed ones, in grid order
  std::size_t planned = 0;
  std::string interrupted;  // "SIGINT" when stopped early: the points done are kept
  double wall_s = 0;
  int best = -1;        // index of the highest median throughput
  int economical = -1;  // fewest workers, then least slab memory, within 5 % of the best
};

struct SweepProgress {
  std::size_t runs_done = 0;
  std::size_t runs_total = 0;
  double elapsed_s = 0;
  double eta_s = 0;
  const SweepPoint* finished = nullptr;  // set when a point's last repeat just finished
  std::string running;                   // the label of the run starting now
};

struct SweepOptions {
  int repeats = 3;  // the most runs of a point
  // A point stops repeating once it has two runs or more whose spread (max - min) is within this
  // share of their median: a further repeat would measure the same again. 0: every repeat runs.
  double agree_within = 0.03;
  KnobList knobs = all_knobs();
  bool by_iterations = false;  // rank by the reports' batches_per_s (SweepResult::unit "it/s")
  std::vector<std::string> command;  // the user's program the points run (SweepResult::command)
  // Slab memory of one batch of `batch_size` samples (the loader's slab), for host_bytes; unset:
  // not known (a program's own loader).
  std::function<std::uint64_t(std::int64_t batch_size)> slab_bytes;
  std::function<void(const SweepProgress&)> on_progress;
  // Polled between runs; also an interrupted report from the runner ends the sweep.
  std::function<bool()> stop_requested;
};

using PointRunner = std::function<Report(const RunConfig&)>;

// An empty result that says what the sweep under `options` measures (knobs, unit, command).
SweepResult sweep_result_for(const SweepOptions& options);
// Runs every point up to `repeats` times through `run` and picks the best and economical points.
SweepResult run_sweep(const RunConfig& base, const SweepGrid& grid, const SweepOptions& options,
                      const PointRunner& run);

// Median of the values (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);
// Two values or more whose spread (max - min) is within `tolerance` of their median.
bool repeats_agree(const std::vector<double>& values, double tolerance);
// Sets result.best and result.economical from the points' medians (within `tolerance` of best).
void choose_best(SweepResult& result, double tolerance = 0.05);

// Loader slab memory for `config`: as many slabs of `slab_bytes` as BatchLoader allocates for
// its workers and prefetch (loader/batch_loader.h's slab_count).
std::uint64_t loader_host_bytes(const RunConfig& config, std::uint64_t slab_bytes);

std::string sweep_csv(const SweepResult& result);
std::string sweep_json(const SweepResult& result, const RunConfig& base);
std::string sweep_table(const SweepResult& result);
// A config snippet of the chosen point's knobs (the named ones), to paste into a run config.
std::string yaml_snippet(const SweepPoint& point, const KnobList& knobs = all_knobs());

}  // namespace feedscope
