#pragma once
// `feedscope merge`: the reports of one distributed job's machines (each `feedscope watch
// --report-dir D -- torchrun --nnodes N --node_rank K ...`), or of its tasks (`srun feedscope
// watch --report-dir R -- ...` writes R/rank-N each), joined into one job report: every rank, the
// straggler judged over all of them (profiler/rank_digest.h), report.json, report.html and a
// trace.json with each report's tracks and a track per rank, on one clock.
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "profiler/report.h"

namespace feedscope {

// Reports that cannot be one job's: none, unreadable, not of a distributed job, of different
// jobs, the same ranks twice, or apart in time. The message names the directories.
class MergeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The report directories `given` names: each a report directory, or a folder of rank folders
// (rank-N, each a task's report directory; its own report.json, a merge's, is not one of them).
// A rank folder without its report.json is said in `notes`. Throws MergeError naming a folder
// that is neither.
std::vector<std::filesystem::path> report_dirs_of(const std::vector<std::filesystem::path>& given,
                                                  std::vector<std::string>& notes);

// The job report of the machines' report directories (each with its report.json); `notes` go
// into its job.notes. Throws MergeError.
Report merge_job_reports(const std::vector<std::filesystem::path>& dirs,
                         const std::vector<std::string>& notes = {});

// Writes report.json, report.html and trace.json of `job` (merge_job_reports') into `out`, the
// trace from the machines' own trace.json files in `dirs`.
void write_merged_job(const std::filesystem::path& out, const Report& job,
                      const std::vector<std::filesystem::path>& dirs);

}  // namespace feedscope
