#pragma once
// `feedscope merge`: the reports of one torch.distributed job's machines (each `feedscope watch
// --report-dir D -- torchrun --nnodes N --node_rank K ...`) joined into one job report: every
// rank, the straggler judged over all of them (profiler/rank_digest.h), report.json, report.html
// and a trace.json with each machine's tracks and a track per rank, on one clock.
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

// The job report of the machines' report directories (each with its report.json). Throws
// MergeError.
Report merge_job_reports(const std::vector<std::filesystem::path>& dirs);

// Writes report.json, report.html and trace.json of `job` (merge_job_reports') into `out`, the
// trace from the machines' own trace.json files in `dirs`.
void write_merged_job(const std::filesystem::path& out, const Report& job,
                      const std::vector<std::filesystem::path>& dirs);

}  // namespace feedscope
