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

}  // namespace feedscope
