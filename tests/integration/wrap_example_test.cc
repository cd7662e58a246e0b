// Runs examples/wrap_torch_loop (a plain libtorch loop plus the wrap API's lines) end to end and
// checks what the wrap API promises it writes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"
#include "tests/support/process.h"

namespace feedscope {
namespace {

// examples/mnist_like.h: 2048 samples in batches of 64; wrap_torch_loop.cc warms up 5 steps.
constexpr int kBatchesPerEpoch = 2048 / 64;
constexpr int kWarmup = 5;

TEST(WrapExample, WritesTheReportFilesWithWaitAndStepPerMeasuredStep) {
  testing::TempDir dir;
  const auto report_dir = dir / "report";
  const auto r = testing::run_process({WRAP_EXAMPLE_BINARY, "2", report_dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("final loss"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("bottleneck"), std::string::npos) << r.err;  // the printed verdict

  std::ifstream in(report_dir / "report.json");
  ASSERT_TRUE(in) << "no report.json";
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["schema"], "feedscope.report/1");
  for (const char* key : {"config", "environment", "throughput", "stages", "custom_stages",
                          "utilization", "gpu_trace", "diagnosis"})
    EXPECT_TRUE(j.contains(key)) << key;
  const int measured = 2 * kBatchesPerEpoch - kWarmup;
  EXPECT_EQ(j["throughput"]["steps"], measured);
  EXPECT_EQ(j["throughput"]["samples"], measured * 64);
  EXPECT_EQ(j["stages"]["wait"]["count"], measured);
  EXPECT_EQ(j["stages"]["step"]["count"], measured);
  EXPECT_GT(j["stages"]["step"]["busy_s"].get<double>(), 0);
  EXPECT_EQ(j["config"]["mode"], "wrap");
  EXPECT_EQ(j["config"]["num_workers"], 2);
  EXPECT_FALSE(j["diagnosis"]["verdict"].get<std::string>().empty());
  EXPECT_FALSE(j["environment"]["torch_version"].get<std::string>().empty());
  // No GPU here: the trace says why rather than being absent.
  EXPECT_TRUE(j["gpu_trace"].contains("kernels") || j["gpu_trace"].contains("unavailable"));
  EXPECT_TRUE(std::filesystem::exists(report_dir / "report.html"));
  EXPECT_TRUE(std::filesystem::exists(report_dir / "trace.json"));
  EXPECT_TRUE(std::filesystem::exists(report_dir / "timeseries.csv"));
  std::ifstream trace(report_dir / "trace.json");
  EXPECT_TRUE(nlohmann::json::accept(trace));
}

// The same program under `feedscope watch`: its Session hands its spans to the watcher, whose
// report joins them with the process tree; the program's own report is written as before.
TEST(WrapExample, UnderWatchItsSpansJoinTheWatchersReport) {
  testing::TempDir dir;
  const auto own = dir / "own", watched = dir / "watched";
  const auto r = testing::run_process({FEEDSCOPE_BINARY, "watch", "--report-dir", watched.string(),
                                       "--", WRAP_EXAMPLE_BINARY, "1", own.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("final loss"), std::string::npos) << "its output passes through";
  std::ifstream in(watched / "report.json");
  ASSERT_TRUE(in) << "no report.json";
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["config"]["mode"], "watch");
  EXPECT_TRUE(j["program"]["spans"].get<std::string>().starts_with("session (pid ")) << j["program"];
  EXPECT_EQ(j["stages"]["step"]["count"], kBatchesPerEpoch - kWarmup);
  EXPECT_EQ(j["program"]["ended"], "exited");
  EXPECT_TRUE(std::filesystem::exists(own / "report.json"));
#if !defined(__SANITIZE_ADDRESS__)
  // libtorch's DataLoader workers are threads of the trainer, not processes. (Under ASan,
  // LeakSanitizer's exit-time helper is a forked copy of the trainer and counts as one.)
  EXPECT_EQ(j["program"]["tree"]["workers"], 0);
#endif
}

}  // namespace
}  // namespace feedscope
