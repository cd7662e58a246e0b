#pragma once
// The loader's per-sample recording (loader/sample_costs.h) as the report's SampleCosts: the
// distribution of load times, the share of load time the slowest samples took, the slow samples
// beyond the median's cost, and the slowest files with what they are.
#include <string>

#include "loader/sample_costs.h"
#include "profiler/report.h"

namespace feedscope {

// A sample that takes this many times the median's load time or more is a slow one.
inline constexpr double kSlowSampleFactor = 4.0;

SampleCosts sample_costs_of(const SampleCostSnapshot& snapshot, std::string measured_by,
                            int image_size);

}  // namespace feedscope
