#pragma once
// The `sweep` and `tune` commands around cli/sweep.h and cli/tune.h: each point is a real
// profiled run (run_profiled) in its own report directory; progress on stderr (a bar with ETA on
// a terminal, plain lines otherwise); results on stdout and in the report directory.
#include <cstddef>
#include <map>
#include <string>

#include "cli/command_points.h"
#include "cli/config.h"
#include "cli/sweep.h"
#include "cli/tune.h"

namespace feedscope {

// Writes sweep.csv, sweep.json and report.html (heatmaps) into base.report_dir after every point,
// so an interrupted sweep keeps what it completed. Returns the exit code: 0, or 128 + the signal.
// With `program` (its command non-empty), every point runs the user's program under watch
// (cli/command_points.h) instead of feedscope's own training run.
int sweep_command(const RunConfig& base, const std::map<std::string, std::string>& grid_lists,
                  int repeats, const ProgramPoints& program = {});

// Writes tune.json into base.report_dir. Returns the exit code as sweep_command does.
int tune_command(const RunConfig& base, TuneOptions options, const ProgramPoints& program = {});

// "expected 9m00s at most: 6 points x 3 repeats x 30s a run (BASIS); 6m00s where each point's
// first 2 repeats agree within 3 %": said before a sweep starts, from a run's time.
std::string expected_time(std::size_t points, int repeats, double agree_within, double run_s,
                          const std::string& basis);

// The heatmap page: one num_workers x batch_size grid of median samples/s per (prefetch,
// pin_memory) pair, each cell with its bottleneck. Self-contained (inline SVG, no script).
std::string sweep_report_html(const SweepResult& result);

}  // namespace feedscope
