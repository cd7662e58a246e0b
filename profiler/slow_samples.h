#pragma once
// The loader's per-sample recording (loader/sample_costs.h) as the report's SampleCosts: the
// distribution of load times, the share of load time the slowest samples took, the slow samples
// beyond the median's cost, and the slowest files with what they are.
#include <string>

#include "loader/sample_costs.h"
#include "profiler/report.h"

namespace feedscope {

// A sample that takes this many times the p90's load time or more is a slow one. Not the median's:
// the train pipeline's random crop spreads an ordinary file's cost over 1 to 10 ms (a small crop
// decodes at 1/8 scale, a large one at full size), so 4x the median is an ordinary sample.
inline constexpr double kSlowSampleFactor = 4.0;

SampleCosts sample_costs_of(const SampleCostSnapshot& snapshot, std::string measured_by,
                            int image_size);

}  // namespace feedscope
