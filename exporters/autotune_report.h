#pragma once
// How a run whose loader tuned itself (num_workers=auto) shows it in words: a line per move for
// the console while the run goes on, the summary in the final console report, and the config
// lines that fix the setting it ended at.
#include <optional>
#include <string>

#include "loader/batch_loader.h"
#include "profiler/report.h"

namespace feedscope {

// The report's autotune section of a loader that tunes itself, its moves timed `shift_s` after the
// tuner's start (the run's clock); nullopt for a loader at fixed settings. A trial the loader was
// stopped before measuring is not where the tuner settled: `final` is where it came from.
std::optional<AutotuneSummary> autotune_summary(const BatchLoader& loader, double shift_s);

// Whether the console shows `move` yet: a trial once judged (its `after` measured), a move back
// at once (it carries its judgement).
bool autotune_move_judged(const TunerMove& move);

// "autotune 1.5 s: num_workers 1 -> 2: kept, 10.2 -> 17.9 batches/s, stall 41.0% -> 3.0% (why)"
std::string describe_autotune_move(const TunerMove& move);

// The YAML that runs at `s` without tuning: "num_workers: 2\nprefetch: 4\n".
std::string autotune_yaml(LoaderSetting s);

// The console report's section: the moves, where the tuner ended, and the YAML to fix it.
std::string describe_autotune(const AutotuneSummary& autotune);

}  // namespace feedscope
