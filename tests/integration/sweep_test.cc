// `feedscope sweep` and `feedscope tune` end to end on the real binary: bad grid values, a
// complete small grid, a sweep stopped with Ctrl-C that keeps its completed points, and sweeps
// and tunes of a user's command (a shell script printing its throughput).
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/background_process.h"
#include "tests/support/process.h"

namespace feedscope {
namespace {

using testing::BackgroundProcess;
using testing::run_process;

class SweepCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("feedscope-sweep-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(SweepCliTest, BadGridValueExits2NamingIt) {
  const auto r = run_process({FEEDSCOPE_BINARY, "sweep", "--num-workers", "0,1,x", "--report-dir",
                              (dir_ / "out").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("num_workers: 'x'"), std::string::npos) << r.err;
}

TEST_F(SweepCliTest, SmallGridWritesEveryPointAndNamesTheBest) {
  const auto r = run_process({FEEDSCOPE_BINARY, "sweep", "--num-workers", "0,1", "--batch-size",
                              "16,32", "--repeats", "1", "--steps", "5", "--warmup", "1",
                              "--hidden", "16", "--sample-hz", "0", "--report-dir",
                              (dir_ / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir_ / "out" / "sweep.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["completed_points"], 4);
  EXPECT_TRUE(j["interrupted"].is_null());
  EXPECT_FALSE(j["best"].is_null());
  EXPECT_NE(r.out.find("best: num_workers="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("num_workers: "), std::string::npos) << "the YAML snippet";
  EXPECT_TRUE(std::filesystem::exists(dir_ / "out" / "report.html"));
  EXPECT_NE(r.err.find("sweep: 4/4 runs"), std::string::npos) << "plain progress lines off a TTY\n"
                                                               << r.err;
}

TEST_F(SweepCliTest, CtrlCKeepsTheCompletedPoints) {
  BackgroundProcess sweep({FEEDSCOPE_BINARY, "sweep", "--num-workers", "0,1,2", "--repeats", "1",
                           "--duration", "2", "--warmup", "1", "--hidden", "16", "--report-dir",
                           (dir_ / "out").string()},
                          (dir_ / "sweep.log").string());
  ASSERT_TRUE(sweep.started());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  // sweep.csv appears when the first point is done.
  while (!std::filesystem::exists(dir_ / "out" / "sweep.csv") && sweep.running() &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(sweep.running()) << sweep.log();
  sweep.send_signal(SIGINT);
  EXPECT_EQ(sweep.wait_exit(std::chrono::seconds(30)), 128 + SIGINT) << sweep.log();
  std::ifstream in(dir_ / "out" / "sweep.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["interrupted"], "SIGINT");
  EXPECT_GE(j["completed_points"].get<int>(), 1);
  EXPECT_LT(j["completed_points"].get<int>(), 3);
  EXPECT_EQ(j["planned_points"], 3);
  std::ifstream csv(dir_ / "out" / "sweep.csv");
  std::string line;
  int rows = -1;  // the header
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, j["completed_points"].get<int>());
}

TEST_F(SweepCliTest, TunePrintsEachMoveAndTheResult) {
  const auto r = run_process({FEEDSCOPE_BINARY, "tune", "--steps", "5", "--warmup", "1",
                              "--hidden", "16", "--sample-hz", "0", "--max-workers", "1",
                              "--budget", "120", "--report-dir", (dir_ / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tune: [1] start at num_workers=0"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("best: num_workers="), std::string::npos) << r.out;
  std::ifstream in(dir_ / "out" / "tune.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_GE(j["runs"].get<int>(), 1);
  EXPECT_LE(j["best"]["num_workers"].get<int>(), 1);
}

// A program that receives only {num_workers}, fixes its own batch (-b 16) and prints the same
// figure every run: the results name num_workers alone, and each point stops after the two
// repeats that agree.
TEST_F(SweepCliTest, ACommandsSweepNamesOnlyItsKnobsAndStopsRepeatingWhatAgrees) {
  const auto r = run_process({FEEDSCOPE_BINARY, "sweep", "--num-workers", "0,1", "--repeats", "3",
                              "--sample-hz", "2", "--report-dir", (dir_ / "out").string(),
                              "--throughput-pattern", "throughput: ([0-9.]+) samples/s", "--",
                              "/bin/sh", "-c", "echo \"throughput: $((100 + 50 * $1)) samples/s\"; : -b 16",
                              "sh", "{num_workers}"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("best: num_workers=1: 150 samples/s"), std::string::npos) << r.out;
  for (const char* absent : {"prefetch", "pin", "batch", "host MiB"})
    EXPECT_EQ(r.out.find(absent), std::string::npos) << absent << " in\n" << r.out;
  EXPECT_NE(r.out.find("the command at the best point:\n  /bin/sh -c"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("the expected time follows the first run"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(the first run's time)"), std::string::npos) << r.err;
  std::ifstream in(dir_ / "out" / "sweep.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["knobs"], nlohmann::json::array({"num_workers"}));
  for (const auto& p : j["points"]) {
    EXPECT_EQ(p["samples_per_s"].size(), 2u) << "two equal repeats agree: no third";
    EXPECT_FALSE(p.contains("prefetch"));
  }
}

TEST_F(SweepCliTest, ADurationGivesTheExpectedTimeBeforeTheFirstRun) {
  const auto r = run_process({FEEDSCOPE_BINARY, "sweep", "--num-workers", "0,1", "--repeats", "2",
                              "--duration", "30", "--sample-hz", "2", "--report-dir",
                              (dir_ / "out").string(), "--", "/bin/sh", "-c", "echo {num_workers}"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("expected 2m00s at most: 2 points x 2 repeats x 30s a run (from --duration, "
                       "which stops a run)"),
            std::string::npos)
      << r.err;
}

// tune printed "best: batch_size=64" for a command that fixes `-b 16`: now it names and moves only
// what the command receives.
TEST_F(SweepCliTest, TuneOfACommandNamesOnlyTheKnobsItReceives) {
  const auto r = run_process({FEEDSCOPE_BINARY, "tune", "--max-workers", "1", "--budget", "120",
                              "--sample-hz", "2", "--report-dir", (dir_ / "out").string(),
                              "--throughput-pattern", "throughput: ([0-9.]+) samples/s", "--",
                              "/bin/sh", "-c", "echo \"throughput: $((100 + 50 * $1)) samples/s\"; : -b 16",
                              "sh", "{num_workers}"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("best: num_workers="), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("batch_size"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("prefetch"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("tune: [1] start at num_workers=0:"), std::string::npos) << r.err;
  std::ifstream in(dir_ / "out" / "tune.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["knobs"], nlohmann::json::array({"num_workers"}));
  EXPECT_FALSE(j["best"].contains("batch_size"));
  EXPECT_FALSE(j["best"].contains("pin_memory"));
}

}  // namespace
}  // namespace feedscope
