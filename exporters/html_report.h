#pragma once
// report.html: one self-contained page (inline SVG and CSS, no script, no network) with the
// verdict first, then the evidence and recommendations, the stage breakdown, utilization over
// time, the GPU trace summary, the environment and the configuration.
#include <cstdint>
#include <string>
#include <vector>

#include "profiler/report.h"
#include "sampler/utilization_sample.h"

namespace feedscope {

// Text made safe inside HTML elements and attribute values.
std::string html_escape(const std::string& text);

// `series`: the sampler's readings in time order; `run_begin_ns` puts their times at 0.
std::string report_to_html(const Report& report, const std::vector<UtilizationSample>& series,
                           std::int64_t run_begin_ns);

}  // namespace feedscope
