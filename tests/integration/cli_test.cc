// Runs the real feedscope binary end to end: exit codes, messages, report.json.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/support/process.h"

namespace feedscope {
namespace {

using testing::run_process;

const std::string kBinary = FEEDSCOPE_BINARY;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("feedscope-cli-" + std::to_string(::getpid()) + "-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  nlohmann::json read_report(const std::string& sub = "report") {
    std::ifstream in(dir_ / sub / "report.json");
    return nlohmann::json::parse(in);
  }
  std::filesystem::path dir_;
};

TEST_F(CliTest, RunWritesAReportWithTheSchemaAndStages) {
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:64", "--hidden", "32",
                              "--steps", "30", "--warmup", "3", "--batch-size", "16",
                              "--num-workers", "2", "--report-dir", (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("feedscope: "), std::string::npos);
  EXPECT_NE(r.out.find("bottleneck:"), std::string::npos);
  const auto j = read_report();
  EXPECT_EQ(j["schema"], "feedscope.report/1");
  EXPECT_EQ(j["throughput"]["steps"], 30);
  EXPECT_EQ(j["throughput"]["samples"], 30 * 16);
  EXPECT_GT(j["throughput"]["samples_per_s"].get<double>(), 0);
  EXPECT_EQ(j["stages"]["wait"]["count"], 30);
  EXPECT_EQ(j["stages"]["step"]["count"], 30);
  EXPECT_EQ(j["config"]["num_workers"], 2);
  EXPECT_EQ(j["environment"]["device"], "cpu");
  EXPECT_FALSE(j["environment"]["torch_version"].get<std::string>().empty());
  const std::string bottleneck = j["diagnosis"]["bottleneck"];
  EXPECT_TRUE(bottleneck == "cpu_compute" || bottleneck == "cpu_preprocess") << bottleneck;
  EXPECT_FALSE(j["diagnosis"]["verdict"].get<std::string>().empty());
}

TEST_F(CliTest, CpuRunWritesASpanTraceAndSaysWhyThereIsNoGpuTrace) {
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:64", "--hidden", "32",
                              "--steps", "20", "--warmup", "2", "--batch-size", "16",
                              "--num-workers", "1", "--device", "cpu",
                              "--report-dir", (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = read_report();
  ASSERT_TRUE(j["gpu_trace"].contains("unavailable")) << j["gpu_trace"].dump();
  const std::string reason = j["gpu_trace"]["unavailable"];
  EXPECT_TRUE(reason == "the step runs on the CPU" || reason.rfind("no CUDA device: ", 0) == 0 ||
              reason == "built without CUDA")
      << reason;
  std::ifstream in(dir_ / "report" / "trace.json");
  const auto trace = nlohmann::json::parse(in);
  std::map<int, std::string> lanes;
  int steps = 0;
  for (const auto& e : trace["traceEvents"]) {
    EXPECT_EQ(e["pid"], 1) << "host only without a GPU trace: " << e.dump();
    if (e["ph"] == "M" && e["name"] == "thread_name") lanes[e["tid"]] = e["args"]["name"];
    if (e["ph"] == "X" && e["name"] == "step") {
      ++steps;
      EXPECT_GE(e["ts"].get<double>(), 0);
    }
  }
  EXPECT_EQ(steps, 22) << "warm-up steps are in the trace too";
  std::set<std::string> names;
  for (const auto& [tid, name] : lanes) names.insert(name);
  EXPECT_TRUE(names.contains("training"));
  EXPECT_TRUE(names.contains("worker 0"));
}

TEST_F(CliTest, TrainingLowersTheLoss) {
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:3x8x8", "--steps", "150",
                              "--warmup", "0", "--hidden", "64", "--num-workers", "1",
                              "--report-dir", (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = read_report();
  EXPECT_LT(j["training"]["last_loss"].get<double>(), 0.7 * j["training"]["first_loss"].get<double>());
}

TEST_F(CliTest, JsonFlagPrintsTheReportOnStdout) {
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:32", "--steps", "5",
                              "--warmup", "0", "--loader-only", "--json", "--report-dir",
                              (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "feedscope.report/1");
  EXPECT_EQ(j["config"]["loader_only"], true);
  EXPECT_EQ(j["stages"]["step"]["count"], 0);
}

TEST_F(CliTest, ConfigFileWithCommandLineOverride) {
  std::ofstream(dir_ / "run.yaml") << "dataset: synthetic:16\nsteps: 4\nwarmup: 0\nnum_workers: 1\n";
  const auto r = run_process({kBinary, "run", "--config", (dir_ / "run.yaml").string(),
                              "--num-workers", "0", "--report-dir", (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_report()["config"]["num_workers"], 0) << "the command line wins";
}

TEST_F(CliTest, BadConfigValuesExit2NamingKeyAndValue) {
  const auto neg = run_process({kBinary, "run", "--num-workers", "-3"});
  EXPECT_EQ(neg.exit_code, 2);
  EXPECT_NE(neg.err.find("num_workers: '-3'"), std::string::npos) << neg.err;
  const auto dev = run_process({kBinary, "run", "--device", "gpu7"});
  EXPECT_EQ(dev.exit_code, 2);
  EXPECT_NE(dev.err.find("auto | cpu | cuda | cuda:N"), std::string::npos) << dev.err;
  std::ofstream(dir_ / "bad.yaml") << "batch_size: 0\n";
  const auto zero = run_process({kBinary, "run", "--config", (dir_ / "bad.yaml").string()});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("bad.yaml:1"), std::string::npos) << zero.err;
  const auto both = run_process({kBinary, "run", "--steps", "3", "--duration", "2"});
  EXPECT_EQ(both.exit_code, 2) << "steps and duration exclude each other";
  const auto unknown = run_process({kBinary, "run", "--num-wrokers", "2"});
  EXPECT_EQ(unknown.exit_code, 2);
}

TEST_F(CliTest, MissingGpuIsExit4WithTheReason) {
  const auto probe = run_process({kBinary, "probe", "--json"});
  ASSERT_EQ(probe.exit_code, 0);
  if (nlohmann::json::parse(probe.out)["torch"]["cuda_available"].get<bool>())
    GTEST_SKIP() << "a CUDA device is present";
  const auto r = run_process({kBinary, "run", "--device", "cuda", "--steps", "1",
                              "--report-dir", (dir_ / "report").string()});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("device 'cuda' is not available"), std::string::npos) << r.err;
}

TEST_F(CliTest, ProbeNamesEveryFacility) {
  const auto r = run_process({kBinary, "probe"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* key : {"cpus:", "memory:", "block devices:", "torch:", "cuda:", "cupti:", "nvml:"})
    EXPECT_NE(r.out.find(key), std::string::npos) << key;
  const auto j = nlohmann::json::parse(run_process({kBinary, "probe", "--json"}).out);
  EXPECT_GE(j["cpus"].get<int>(), 1);
  EXPECT_TRUE(j["cuda"].contains("devices"));
}

TEST_F(CliTest, DemoRunsOnEmbeddedDefaults) {
  const auto r = run_process({kBinary, "demo", "--steps", "20", "--warmup", "2"}, dir_.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("bottleneck:"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "feedscope-demo" / "report.json"));
}

TEST_F(CliTest, HelpAndVersionExit0) {
  EXPECT_EQ(run_process({kBinary, "--help"}).exit_code, 0);
  const auto v = run_process({kBinary, "--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("feedscope "), std::string::npos);
  EXPECT_EQ(run_process({kBinary}).exit_code, 2) << "a subcommand is required";
}

}  // namespace
}  // namespace feedscope
