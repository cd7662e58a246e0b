#pragma once
// How a run whose loader tuned itself (num_workers=auto) shows it in words: a line per move for
// the console while the run goes on, the summary in the final console report, and the config
// lines that fix the setting it ended at.
#include <string>

#include "profiler/report.h"

namespace feedscope {

// "autotune 1.5 s: num_workers 1 -> 2: kept, 10.2 -> 17.9 batches/s, stall 41.0% -> 3.0% (why)"
std::string describe_autotune_move(const TunerMove& move);

// The YAML that runs at `s` without tuning: "num_workers: 2\nprefetch: 4\n".
std::string autotune_yaml(LoaderSetting s);

// The console report's section: the moves, where the tuner ended, and the YAML to fix it.
std::string describe_autotune(const AutotuneSummary& autotune);

}  // namespace feedscope
