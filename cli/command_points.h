#pragma once
// Sweep and tune points that run the user's own program (`feedscope sweep|tune [options] --
// COMMAND ... {num_workers} ... {batch_size}`): each point substitutes its knobs into the command
// ({num_workers}, {batch_size}, {prefetch}, {pin_memory}) and its environment
// (FEEDSCOPE_NUM_WORKERS, ...), and runs it under `feedscope watch` (cli/watch.h) in a report
// directory of its own. A point's throughput is, in order: the samples/s of the spans a feedscope
// Session inside the program sent; the last figure matching --throughput-pattern in its output;
// else --workload-samples over its wall time (a fixed workload: the same work at every point).
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

// Runs each point under watch in <base.report_dir>/points/<knobs>; a program that fails has 0
// samples/s and the bottleneck "failed (exited with N)". Throws ConfigError for an empty command
// or a bad pattern, before any point runs.
PointRunner program_point_runner(const RunConfig& base, const ProgramPoints& program);

}  // namespace feedscope
