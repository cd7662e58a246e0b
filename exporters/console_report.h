#pragma once
#include <string>

#include "profiler/report.h"

namespace feedscope {

// The human summary: verdict first, then throughput, the stage table, evidence and
// recommendations. `color` adds ANSI emphasis (only on a terminal).
std::string format_console_report(const Report& report, bool color);

}  // namespace feedscope
