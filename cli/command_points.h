#pragma once
// Sweep and tune points that run the user's own program (`feedscope sweep|tune [options] --
// COMMAND ... {num_workers} ... {batch_size}`): each point substitutes its knobs into the command
// ({num_workers}, {batch_size}, {prefetch}, {pin_memory}) and its environment
// (FEEDSCOPE_NUM_WORKERS, ...), and runs it under `feedscope watch` (cli/watch.h) in a report
// directory of its own. A point's throughput is, in order: the samples/s of the spans a feedscope
// Session inside the program sent; the figure matching --throughput-pattern in its output
// (cli/output_scanner.h; it/s and s/it scaled by the point's {batch_size}); else
// --workload-samples over its wall time from its first sign of work (a fixed workload: the same
// work at every point; see WatchOutcome::work_began_s). Results name only the knobs the command
// receives as a {placeholder}, or the sweep's grid varies: the others are feedscope's defaults,
// which the program never sees.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cli/config.h"
#include "cli/sweep.h"

namespace feedscope {

struct ProgramPoints {
  std::vector<std::string> command;
  std::string throughput_pattern;
  std::string throughput_unit;  // "samples/s", "it/s", "s/it"; empty: what the pattern implies
  // The knobs the points name (sweep_knobs, tune_knobs). The batch size scales it/s into
  // samples/s only where batch_size is one of them: otherwise the program chose its own.
  KnobList knobs;
  // Samples one run of the program processes, for throughput from wall time; 0: 1 (the table's
  // samples/s then reads runs per second, still comparable between points).
  std::int64_t workload_samples = 0;
  double sample_hz = 10;
};

// The command with every {knob} of `point` replaced by its value (pin_memory as 1 or 0; a knob
// the grid does not vary takes the base config's value).
std::vector<std::string> substitute_knobs(const std::vector<std::string>& command,
                                          const RunConfig& point);
// FEEDSCOPE_NUM_WORKERS, FEEDSCOPE_BATCH_SIZE, FEEDSCOPE_PREFETCH, FEEDSCOPE_PIN_MEMORY.
std::map<std::string, std::string> knob_environment(const RunConfig& point);
// The grid's varied knobs (those with more than one value) whose {placeholder} the command lacks:
// the program then sees them only in its environment.
std::vector<std::string> knobs_missing_from(const std::vector<std::string>& command,
                                            const SweepGrid& grid);
// The knobs whose {placeholder} the command has, in kGridKeys order.
KnobList knobs_received(const std::vector<std::string>& command);
// What a sweep of the command names: the knobs it receives and those the grid sets.
KnobList sweep_knobs(const std::vector<std::string>& command, const SweepGrid& grid);
// What tune moves in the command: the knobs it receives; with none, all four, which the program
// can only read from its environment (FEEDSCOPE_NUM_WORKERS, ...).
KnobList tune_knobs(const std::vector<std::string>& command);
// The points' figures are iterations per second: the pattern's unit is it/s or s/it and no
// {batch_size} scales them into samples/s.
bool counts_iterations(const ProgramPoints& program);

// Runs each point under watch in <base.report_dir>/points/<knobs>; a program that fails has 0
// samples/s and the bottleneck "failed (exited with N)". Throws ConfigError for an empty command,
// a bad pattern or unit, before any point runs.
PointRunner program_point_runner(const RunConfig& base, const ProgramPoints& program);

}  // namespace feedscope
