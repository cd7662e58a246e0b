#pragma once
// `feedscope merge --report-dir JOB DIR...` (or `feedscope merge R`, R a folder of rank-N
// folders): one distributed job's reports joined into one (exporters/job_merge.h), its verdict
// printed. Exit 2 (MergeError) where the reports are not one job's.
#include <ostream>
#include <string>
#include <vector>

namespace feedscope {

int merge_command(const std::string& report_dir, const std::vector<std::string>& dirs, std::ostream& log);

}  // namespace feedscope
