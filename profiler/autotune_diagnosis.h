#pragma once
// The diagnosis of a run whose loader tuned itself (num_workers=auto): the evidence says so and
// where it ended, and a worker count the tuner tried and measured no gain at is not advised again.
#include "profiler/report.h"

namespace feedscope {

// Adds to `d`'s evidence what the tuner did, and takes out of its recommendations a
// num_workers=N the tuner refused (saying so in the evidence, with what it measured).
void advise_from_autotune(const AutotuneSummary& autotune, Diagnosis& d);

}  // namespace feedscope
