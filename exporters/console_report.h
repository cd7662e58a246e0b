#pragma once
#include <string>

#include "profiler/report.h"

namespace feedscope {

// The human summary: verdict first, then throughput, the stage table, evidence and
// recommendations. `color` adds ANSI emphasis (only on a terminal).
std::string format_console_report(const Report& report, bool color);

// What trace.json holds when its span cap left spans out ("1000000 of 5431000 stage spans: those
// that began from 0.84 s to 19.16 s are left out (trace_max_spans)"); empty when it holds them all.
std::string describe_trace_cap(const TraceSummary& trace);

// The bad samples of a run, for the terminal: how many of how many were skipped (or failed), the
// max_bad_ratio rule with its grace floor, and the first `shown` files with their errors; empty
// when there were none.
std::string describe_data_errors(const DataErrorsSummary& errors, std::size_t shown = 5);

// Each sample's load time, for the terminal: the distribution, the share the slowest took, and the
// `shown` slowest files; empty where nothing was measured.
std::string describe_samples(const SampleCosts& samples, std::size_t shown = 3);

}  // namespace feedscope
