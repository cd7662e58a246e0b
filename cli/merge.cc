#include "cli/merge.h"

#include <unistd.h>

#include <filesystem>

#include "exporters/console_report.h"
#include "exporters/job_merge.h"

namespace feedscope {

int merge_command(const std::string& report_dir, const std::vector<std::string>& dirs, std::ostream& log) {
  const std::vector<std::filesystem::path> paths(dirs.begin(), dirs.end());
  const Report job = merge_job_reports(paths);
  write_merged_job(report_dir, job, paths);
  log << "feedscope merge: " << job.ranks.size() << " ranks from " << dirs.size() << " reports\n"
      << format_console_report(job, ::isatty(STDERR_FILENO) != 0) << "feedscope: report in " << report_dir
      << std::endl;
  return 0;
}

}  // namespace feedscope
