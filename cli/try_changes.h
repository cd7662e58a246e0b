#pragma once
// `feedscope watch --try`: the changes a watcher cannot predict, measured. After the watched run,
// the program is run again for short windows (--try-seconds each), with each change feedscope can
// make from outside: torch's thread count (OMP_NUM_THREADS and MKL_NUM_THREADS in its
// environment), the worker count or batch size where its command line carries a flag feedscope
// recognizes (-j, --workers, --num-workers, --num_workers; -b, --batch-size, --batch_size), and a
// DataLoader's persistent_workers through a sitecustomize on its PYTHONPATH. Each
// changed run alternates with the unchanged command (unchanged, change 1, change 2, ..., then the
// same again for every round), so that a machine slowing down weighs on both; a change's speed-up
// is its rates over the unchanged runs' rates of the same rounds. The rates are the program's own:
// its progress lines or its Session's spans, as the watched run read them; where that run read
// none, nothing is run.
#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/report.h"

namespace feedscope {

struct WatchOptions;

// One change to try: what it changes in the command line or environment, and why it is a candidate.
struct ChangeCandidate {
  std::string label;  // "OMP_NUM_THREADS=2", "-j 3"
  std::string setting;  // the same as a setting: "threads=2", "num_workers=3", "batch_size=128"
  std::string why;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;  // added to the watched run's
  std::int64_t batch_size = 0;             // the run's batch size where the change sets it; 0: as watched
  // A sitecustomize.py put first on the program's PYTHONPATH (cli/python_hook.h), where the change
  // is made inside the program; empty: none.
  std::string python_hook;
};

// The changes the watched run's report and command point at, in the order they are tried:
// - the thread count: the step on one thread (its compute threads under kOneThreadOthers of a core)
//   with more cores than that on the machine: OMP_NUM_THREADS=<cores>; compute threads that share a
//   full machine with loader workers: OMP_NUM_THREADS=1. Not where the environment sets it already
//   to that value.
// - the worker count, where the command carries a worker flag: the diagnosis' num_workers=N, else
//   the count a guess in the advice names, else one more worker where it is input-bound
//   (cpu_preprocess).
// - the batch size, where the command carries a batch flag and the diagnosis advises batch_size=N.
// - persistent_workers=True, where the diagnosis advises it: no command line has a flag for it, so
//   a sitecustomize on the program's PYTHONPATH sets it in every DataLoader with workers.
std::vector<ChangeCandidate> change_candidates(const std::vector<std::string>& command,
                                               const std::map<std::string, std::string>& env,
                                               const Report& watched, int cpus);

// The command with the value of the first of `flags` replaced by `value` (`-j 2`, `--workers=2`);
// none where the command has none of them. Nothing after `--` is touched.
std::optional<std::vector<std::string>> with_flag_value(const std::vector<std::string>& command,
                                                        std::span<const std::string_view> flags,
                                                        std::int64_t value, std::string* label);

// Runs the tries of `options` (its command, --try-seconds, --try-rounds; with --try=auto only the
// changes that settle a guess left in the advice) against `report`, the watched run's, records
// them in report.program->tries and settles the advice with them (cli/try_verdicts.h). Says on
// `log` what it will run and for how long before it starts. Never throws for a trial that fails:
// its end is recorded. Where the program's rate was not read, nothing runs and each guess says so.
void try_changes(const WatchOptions& options, Report& report, std::ostream& log);

// Without --try: where a guess is left that a change from outside can settle, the guess offers the
// exact `feedscope watch --try=auto -- COMMAND` that measures it, with what it costs, where the
// program ran at least two trials' windows (2 x --try-seconds); where its rate was not read, each
// guess says it cannot be measured so.
void offer_tries(const WatchOptions& options, Report& report);

}  // namespace feedscope
