#pragma once
#include <string>

#include "profiler/report.h"

namespace feedscope {

// report.json per DESIGN.md's schema ("feedscope.report/1"), pretty-printed.
std::string report_to_json(const Report& report);

// Writes `text` to `path` through a temporary file and a rename, so a reader never sees half a
// report. Throws std::runtime_error naming the path.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace feedscope
