// `feedscope merge` (exporters/job_merge.h) of reports written as a job's tasks write them: one
// per rank under R/rank-N (srun's and mpirun's per-task watches), a rank missing, another job's
// report among them, and the merged trace on one clock.
#include "exporters/job_merge.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "exporters/json_report.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;

constexpr double kBegin = 1.8e9;  // Unix seconds of the first task's watch

// One task's report of a 2-rank job: its rank, loader `worker_busy` (saturated: the straggler),
// `begin_s` after kBegin, with a trace whose time 0 is there.
void write_task_report(const fs::path& dir, int rank, double worker_busy, double begin_s,
                       const std::string& job = "127.0.0.1:29500 slurm=7.0") {
  Report r;
  r.environment.hostname = "node-a";
  RankSummary s;
  s.rank = rank;
  s.local_rank = rank;
  s.rank_source = "slurm";
  s.host = "node-a";
  s.pid = 1000 + rank;
  s.bottleneck = worker_busy > 0.7 ? "cpu_preprocess" : "cpu_compute";
  s.num_workers = 1;
  s.worker_busy = worker_busy;
  s.worker_run_wait = 0.05;
  s.main_thread_busy = worker_busy > 0.7 ? 0.1 : 0.08;
  s.first_seen_s = 0.5;
  s.last_seen_s = 8.5;
  r.ranks = {s};
  JobSummary j;
  j.id = job;
  j.world_size = 2;
  j.hosts = {"node-a"};
  j.begin_unix_s = kBegin + begin_s;
  j.end_unix_s = kBegin + begin_s + 9;
  r.job = j;
  fs::create_directories(dir);
  write_file_atomically((dir / "report.json").string(), report_to_json(r));
  const nlohmann::json trace = {{"displayTimeUnit", "ms"},
                                {"baseTimeNanoseconds", static_cast<std::int64_t>((kBegin + begin_s) * 1e9)},
                                {"traceEvents", nlohmann::json::array({{{"ph", "X"}, {"pid", 1}, {"tid", 1},
                                                                        {"name", "step"}, {"ts", 1e6},
                                                                        {"dur", 1e3}}})}};
  std::ofstream(dir / "trace.json") << trace.dump();
}

TEST(JobMergeTest, AFolderOfRankFoldersIsTheJobsReports) {
  testing::TempDir r;
  write_task_report(r / "rank-0", 0, 0.2, 0);
  write_task_report(r / "rank-1", 1, 0.95, 0.25);
  fs::create_directories(r / "unrelated");  // not rank-N: not a task's
  std::vector<std::string> notes;
  const std::vector<fs::path> dirs = report_dirs_of({r.path()}, notes);
  ASSERT_EQ(dirs, (std::vector<fs::path>{r / "rank-0", r / "rank-1"}));
  EXPECT_TRUE(notes.empty());
  const Report job = merge_job_reports(dirs, notes);
  ASSERT_EQ(job.ranks.size(), 2u);
  EXPECT_EQ(job.ranks[1].rank_source, "slurm");
  EXPECT_EQ(job.job->hosts, std::vector<std::string>{"node-a"}) << "one machine's tasks: one host";
  ASSERT_TRUE(job.diagnosis.straggler);
  EXPECT_EQ(job.diagnosis.straggler->rank, 1);

  // The merged report beside the rank folders is no task's report when merged again.
  write_merged_job(r.path(), job, dirs);
  EXPECT_EQ(report_dirs_of({r.path()}, notes).size(), 2u);

  // Both traces on the job's clock: rank 1's watch began 0.25 s after rank 0's.
  std::ifstream in(r / "trace.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  EXPECT_EQ(trace["baseTimeNanoseconds"].get<std::int64_t>(), static_cast<std::int64_t>(kBegin * 1e9));
  std::vector<double> steps;
  for (const nlohmann::json& e : trace["traceEvents"])
    if (e.value("name", "") == "step") steps.push_back(e["ts"].get<double>());
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_NEAR(steps[1] - steps[0], 0.25e6, 1);
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("cat", "") == "rank" && e["pid"] == 100001) {
      EXPECT_NEAR(e["ts"].get<double>(), 0.75e6, 1);
    }
  }
}

TEST(JobMergeTest, AMissingRankIsNamedAndTheOthersJudged) {
  testing::TempDir r;
  write_task_report(r / "rank-0", 0, 0.2, 0);
  fs::create_directories(r / "rank-1");  // its watch was stopped before it wrote
  std::vector<std::string> notes;
  const std::vector<fs::path> dirs = report_dirs_of({r.path()}, notes);
  ASSERT_EQ(dirs.size(), 1u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], (r / "rank-1").string() +
                          " has no report.json: rank 1's watch did not write one (it was stopped, or "
                          "has not ended yet)");
  const Report job = merge_job_reports(dirs, notes);
  EXPECT_EQ(job.ranks.size(), 1u);
  EXPECT_NE(std::find(job.job->notes.begin(), job.job->notes.end(),
                      "ranks 1 of WORLD_SIZE 2 are in no report given: the job's verdict covers the others"),
            job.job->notes.end())
      << ::testing::PrintToString(job.job->notes);
  EXPECT_FALSE(job.diagnosis.bottleneck.empty()) << "the rank that is there is judged";
}

TEST(JobMergeTest, AnotherJobsReportOrNoReportAtAllIsAMergeErrorNamingTheFolder) {
  testing::TempDir r;
  write_task_report(r / "rank-0", 0, 0.2, 0);
  write_task_report(r / "rank-1", 1, 0.95, 0.25, "127.0.0.1:29500 slurm=8.0");
  std::vector<std::string> notes;
  try {
    merge_job_reports(report_dirs_of({r.path()}, notes));
    FAIL() << "two jobs' reports were merged";
  } catch (const MergeError& e) {
    EXPECT_NE(std::string(e.what()).find((r / "rank-1").string() + ": job 127.0.0.1:29500 slurm=8.0"),
              std::string::npos)
        << e.what();
  }
  testing::TempDir empty;
  EXPECT_THROW(report_dirs_of({empty.path() / "rank-0"}, notes), MergeError);
  fs::create_directories(empty / "rank-0");
  EXPECT_THROW(report_dirs_of({empty.path()}, notes), MergeError);
}

}  // namespace
}  // namespace feedscope
