#include "cli/merge.h"

#include <unistd.h>

#include <filesystem>

#include "exporters/console_report.h"
#include "exporters/job_merge.h"

namespace feedscope {

int merge_command(const std::string& report_dir, const std::vector<std::string>& dirs, std::ostream& log) {
  const std::vector<std::filesystem::path> given(dirs.begin(), dirs.end());
  std::vector<std::string> notes;
  const std::vector<std::filesystem::path> paths = report_dirs_of(given, notes);
  // `feedscope merge R`: the job's report goes beside its tasks' rank folders.
  std::string out = report_dir;
  std::error_code ec;
  if (out.empty() && given.size() == 1 && std::filesystem::equivalent(paths.front().parent_path(), given.front(), ec))
    out = dirs.front();
  if (out.empty())
    throw MergeError("merge: --report-dir is needed where the reports are not one folder of rank-N folders");
  const Report job = merge_job_reports(paths, notes);
  write_merged_job(out, job, paths);
  log << "feedscope merge: " << job.ranks.size() << " ranks from " << paths.size() << " reports\n"
      << format_console_report(job, ::isatty(STDERR_FILENO) != 0) << "feedscope: report in " << out
      << std::endl;
  return 0;
}

}  // namespace feedscope
