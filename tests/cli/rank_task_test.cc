// `feedscope watch` as one task of a launcher's job (cli/rank_task.h): where it writes and
// listens, the rank folder of another job it refuses, and what it says of `watch -- srun` and of a
// `watch -- mpirun` whose ranks ran elsewhere.
#include "cli/rank_task.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "cli/config.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;

RankIdentity srun_task(int rank, const std::string& job = "127.0.0.1:29500 slurm=7.0") {
  RankIdentity id;
  id.rank = rank;
  id.local_rank = rank;
  id.world_size = 2;
  id.source = "slurm";
  id.job = job;
  return id;
}

void write_report(const fs::path& dir, const std::string& job_json) {
  fs::create_directories(dir);
  std::ofstream(dir / "report.json") << R"({"schema": "feedscope.report/1", "job": )" << job_json << "}";
}

TEST(RankTaskTest, TheProgramsRankIsWatchsEnvironmentUnderItsOptions) {
  ::setenv("SLURM_STEP_ID", "0", 1);
  ::setenv("SLURM_PROCID", "1", 1);
  ::setenv("SLURM_NTASKS", "2", 1);
  WatchOptions o;
  EXPECT_EQ(started_identity(o).rank, 1);
  o.env["SLURM_PROCID"] = "0";  // what watch passes the program wins
  EXPECT_EQ(started_identity(o).rank, 0);
  ::unsetenv("SLURM_STEP_ID");
  ::unsetenv("SLURM_PROCID");
  ::unsetenv("SLURM_NTASKS");
}

TEST(RankTaskTest, ARanksWatchWritesItsRankFolderAndListensOnItsOwnPort) {
  testing::TempDir r;
  WatchOptions o;
  o.report_dir = r.path().string();
  o.metrics_addr = "0.0.0.0:9464";
  const WatchTask task = place_watch_task(o, srun_task(1));
  EXPECT_EQ(task.report_dir, (r / "rank-1").string());
  EXPECT_EQ(task.metrics.address, "0.0.0.0:9465");
  const WatchTask alone = place_watch_task(o, RankIdentity{});
  EXPECT_EQ(alone.report_dir, r.path().string()) << "a program that is no rank: the folder given";
  EXPECT_EQ(alone.metrics.address, "0.0.0.0:9464");
  o.metrics_addr = "0.0.0.0:65535";
  EXPECT_THROW(place_watch_task(o, srun_task(1)), ConfigError);
}

TEST(RankTaskTest, ARankFolderHoldingAnotherJobsReportIsRefusedUnlessForced) {
  testing::TempDir r;
  WatchOptions o;
  o.report_dir = r.path().string();
  write_report(r / "rank-1", R"({"id": "127.0.0.1:29500 slurm=6.0"})");
  try {
    place_watch_task(o, srun_task(1));
    FAIL() << "another job's report would be overwritten";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "report_dir");
    EXPECT_EQ(std::string(e.what()),
              (r / "rank-1" / "report.json").string() +
                  " holds the report of job 127.0.0.1:29500 slurm=6.0, not this job's (127.0.0.1:29500 "
                  "slurm=7.0, rank 1 by slurm): give each run its own --report-dir, or --force to replace it");
  }
  EXPECT_NO_THROW(place_watch_task(o, srun_task(0))) << "rank 0's folder is free";
  o.force = true;
  EXPECT_EQ(place_watch_task(o, srun_task(1)).report_dir, (r / "rank-1").string());
  o.force = false;
  write_report(r / "rank-1", R"({"id": "10.0.0.9:29500 slurm=7.0"})");  // the same step: its own
  EXPECT_NO_THROW(place_watch_task(o, srun_task(1)));
  write_report(r / "rank-1", "null");  // a watch of no job
  EXPECT_THROW(place_watch_task(o, srun_task(1)), ConfigError);
  std::ofstream(r / "rank-1" / "report.json") << "{ cut short";
  EXPECT_THROW(place_watch_task(o, srun_task(1)), ConfigError);
}

TEST(RankTaskTest, AWatchOfSrunIsRefusedWithThePerTaskCommand) {
  EXPECT_EQ(srun_tasks_are_not_children({"python3", "train.py"}, "R"), "");
  const std::string said = srun_tasks_are_not_children(
      {"/usr/bin/srun", "-n", "2", "--mpi=none", "--ntasks-per-node", "2", "--pty", "python3", "train.py", "-b", "8"},
      "R");
  EXPECT_NE(said.find("srun's tasks are not its children"), std::string::npos) << said;
  EXPECT_NE(said.find("\n  /usr/bin/srun -n 2 --mpi=none --ntasks-per-node 2 --pty feedscope watch --report-dir R "
                      "-- python3 train.py -b 8\n  feedscope merge R"),
            std::string::npos)
      << said;
  WatchOptions o;
  o.command = {"srun", "-n", "2", "python3", "train.py"};
  EXPECT_THROW(validate_watch_options(o), ConfigError);
}

TEST(RankTaskTest, AWatchOfMpirunThatReadFewerRanksThanTheJobsSizeSaysHowToReadThemAll) {
  const std::vector<std::string> mpirun = {"mpirun", "--oversubscribe", "-n", "4", "--mca", "btl", "self,tcp",
                                           "-x", "MASTER_ADDR", "python3", "train.py"};
  EXPECT_FALSE(mpi_ranks_elsewhere(mpirun, "R", 4, 4)) << "every rank was read";
  const auto some = mpi_ranks_elsewhere(mpirun, "R", 2, 4);
  ASSERT_TRUE(some);
  EXPECT_NE(some->find("mpirun started ranks on other hosts"), std::string::npos) << *some;
  EXPECT_NE(some->find("mpirun --oversubscribe -n 4 --mca btl self,tcp -x MASTER_ADDR feedscope watch "
                       "--report-dir R -- python3 train.py, then feedscope merge R"),
            std::string::npos)
      << *some;
  EXPECT_TRUE(mpi_ranks_elsewhere(mpirun, "R", 0, std::nullopt));
  EXPECT_FALSE(mpi_ranks_elsewhere({"torchrun", "train.py"}, "R", 0, std::nullopt));
}

TEST(RankTaskTest, TheTasksOfAMachineShareOneWatchsBudget) {
  WatchTask task;
  task.identity = srun_task(3);
  task.identity.local_size = 8;
  task.one_task = true;
  SamplingOptions so;
  so.wait_probe_hz = 50;
  so.memory_cpu_share = 0.05;
  share_with_the_other_tasks(task, so);
  EXPECT_DOUBLE_EQ(so.wait_probe_hz, 10) << "50 / 8, 10 at least";
  EXPECT_DOUBLE_EQ(so.memory_cpu_share, 0.05 / 8);
  task.identity.local_size = 2;
  so.wait_probe_hz = 50;
  share_with_the_other_tasks(task, so);
  EXPECT_DOUBLE_EQ(so.wait_probe_hz, 25);
  task.one_task = false;  // a watch of the machine's launcher keeps its own
  so.wait_probe_hz = 50;
  share_with_the_other_tasks(task, so);
  EXPECT_DOUBLE_EQ(so.wait_probe_hz, 50);
}

TEST(RankTaskTest, TheLaunchersOfRanks) {
  EXPECT_TRUE(launches_ranks({"/usr/bin/mpirun", "-n", "2", "python3", "t.py"}));
  EXPECT_TRUE(launches_ranks({"python3", "-m", "torch.distributed.run", "t.py"}));
  EXPECT_TRUE(launches_ranks({"torchrun", "t.py"}));
  EXPECT_FALSE(launches_ranks({"python3", "t.py"}));
  EXPECT_FALSE(launches_ranks({}));
}

}  // namespace
}  // namespace feedscope
