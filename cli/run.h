#pragma once
// One profiled run: dataset -> loader -> (trainer) with stage spans, then the diagnosis and
// report.json. Shared by `feedscope run` and `feedscope demo`.
#include <iosfwd>
#include <memory>
#include <string>

#include "cli/config.h"
#include "cli/dataset_setup.h"
#include "loader/dataset.h"
#include "profiler/report.h"

namespace feedscope {

// Runs, writes <report_dir>/report.json, and returns the report. `log` gets one line at the start.
// Throws ConfigError/DatasetError (bad input), DeviceError (device), MetricsError (the metrics
// address cannot be served: before any work starts), and SampleError or BadDataError (bad data:
// after writing the partial report, marked stopped_early "bad_data").
Report run_profiled(const RunConfig& config, std::ostream& log);

Environment gather_environment(const std::string& device);

}  // namespace feedscope
