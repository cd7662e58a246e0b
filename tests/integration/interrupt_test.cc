// Ctrl-C or SIGTERM mid-run: the run stops cleanly, writes the partial report and says so in its
// exit code (128 + the signal, the shell's convention).
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/background_process.h"

namespace feedscope {
namespace {

using testing::BackgroundProcess;

class InterruptTest : public ::testing::TestWithParam<int> {};

TEST_P(InterruptTest, SignalMidRunWritesThePartialReportAndExitsWithItsCode) {
  const int signal = GetParam();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("feedscope-interrupt-" + std::to_string(::getpid()) + "-" +
                    std::to_string(signal));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  BackgroundProcess run({FEEDSCOPE_BINARY, "run", "--duration", "300", "--hidden", "64",
                         "--warmup", "2", "--report-dir", (dir / "report").string()},
                        (dir / "run.log").string());
  ASSERT_TRUE(run.started());
  // The announcement comes after the handlers are in place and the loader is up.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (run.log().find(" on synthetic:") == std::string::npos && run.running() &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(run.running()) << run.log();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // some steps past warm-up
  run.send_signal(signal);
  const int code = run.wait_exit(std::chrono::seconds(30));
  EXPECT_EQ(code, 128 + signal) << run.log();

  std::ifstream in(dir / "report" / "report.json");
  ASSERT_TRUE(in.good()) << "no partial report\n" << run.log();
  const auto report = nlohmann::json::parse(in);
  EXPECT_EQ(report["interrupted"], signal == SIGINT ? "SIGINT" : "SIGTERM");
  EXPECT_EQ(report["stopped_early"]["reason"], "interrupted");
  EXPECT_EQ(report["stopped_early"]["message"], report["interrupted"]);
  EXPECT_GT(report["throughput"]["steps"].get<int>(), 0);
  EXPECT_TRUE(std::isfinite(report["throughput"]["samples_per_s"].get<double>()));
  EXPECT_NE(run.log().find("partial report"), std::string::npos) << run.log();
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Signals, InterruptTest, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) { return info.param == SIGINT ? "SIGINT" : "SIGTERM"; });

}  // namespace
}  // namespace feedscope
