#pragma once
#include <string>

#include "profiler/report.h"

namespace feedscope {

// report.json per DESIGN.md's schema ("feedscope.report/1"), pretty-printed.
std::string report_to_json(const Report& report);

// Writes `text` to `path` through a temporary file and a rename, so a reader never sees half a
// report. Throws std::runtime_error naming the path.
void write_file_atomically(const std::string& path, const std::string& text);

// report.json's autotune object (null for a loader at fixed settings), as its own JSON text: what
// feedscope.DataLoader's `autotune` shows (api/handed_loader.cc).
// report.json's `samples` object alone (feedscope.DataLoader.sample_costs()).
std::string samples_to_json(const SampleCosts& samples);
std::string autotune_to_json(const std::optional<AutotuneSummary>& autotune);

}  // namespace feedscope
