// `feedscope watch` of programs that print their progress in a known format, with no flag: their
// lines give the throughput and the data wait (cli/output_scanner.h), and the report says which.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/watch.h"

namespace feedscope {
namespace {

class WatchPrintedLinesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("feedscope-watch-lines-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Watches `/bin/sh -c script sh ARGS...` with no option but the report directory.
  WatchOutcome watch(const std::string& script, const std::vector<std::string>& args = {}) const {
    WatchOptions o;
    o.command = {"/bin/sh", "-c", script, "sh"};
    o.command.insert(o.command.end(), args.begin(), args.end());
    o.report_dir = dir_.string();
    o.sample_hz = 20;
    o.print = false;
    std::ostringstream log;
    return watch_program(o, log);
  }

  nlohmann::json report_json() const {
    std::ifstream in(dir_ / "report.json");
    return nlohmann::json::parse(in);
  }

  std::filesystem::path dir_;
};

// torchvision's reference trainer: `time:` is its iteration (`img/s:` leaves out the wait for
// data), `time:`/`data:` its data wait (20-batch means: the lines before the 20th batch of an
// epoch hold its start-up).
TEST_F(WatchPrintedLinesTest, MetricLoggerLinesGiveAThroughputAndADataStallWithoutAFlag) {
  const WatchOutcome out = watch(
      "printf 'Epoch: [0]  [ 0/90]  eta: 0:09:00  lr: 0.1  img/s: 10.0  loss: 6.9 (6.9)  time: 6.0000  data: 5.9000  max mem: 12\\n"
      "Epoch: [0]  [10/90]  eta: 0:01:00  lr: 0.1  img/s: 100.0  loss: 6.9 (6.9)  time: 1.0000  data: 0.9000  max mem: 12\\n"
      "Epoch: [0]  [20/90]  eta: 0:00:50  lr: 0.1  img/s: 240.0  loss: 6.8 (6.9)  time: 1.0000  data: 0.5000  max mem: 12\\n"
      "Epoch: [0]  [30/90]  eta: 0:00:40  lr: 0.1  img/s: 260.0  loss: 6.7 (6.8)  time: 1.0000  data: 0.4000  max mem: 12\\n'; "
      "sleep 1",
      {"-b", "64"});
  const Report& r = out.report;
  EXPECT_DOUBLE_EQ(r.throughput.batches_per_s, 1.0);
  EXPECT_DOUBLE_EQ(r.throughput.samples_per_s, 64.0) << "-b 64 batches a second, not img/s's 250";
  EXPECT_NE(r.throughput.source.find("torchvision MetricLogger `time: S  data: S` (20-batch means), 4 lines"),
            std::string::npos)
      << r.throughput.source;
  EXPECT_NEAR(r.diagnosis.data_stall_ratio, 0.45, 1e-12);
  EXPECT_EQ(r.diagnosis.data_stall_source, "the program's own MetricLogger `time: ... data: ...` lines");
  EXPECT_EQ(r.diagnosis.input_bound, "highly");
  // An idle shell: where the tree names no limit (a busy machine's full cores are one), the lines'
  // data wait is the verdict.
  const auto& rules = r.diagnosis.rules;
  EXPECT_EQ(std::find(rules.begin(), rules.end(), "tree_no_clear_limit"), rules.end()) << r.diagnosis.verdict;
  if (std::find(rules.begin(), rules.end(), "tree_printed_data_wait") != rules.end()) {
    EXPECT_EQ(r.diagnosis.verdict.rfind("Input-bound: the loop waits for data 45% of the time", 0), 0u)
        << r.diagnosis.verdict;
  }
  const nlohmann::json j = report_json();
  EXPECT_DOUBLE_EQ(j["throughput"]["samples_per_s"].get<double>(), 64.0);
  EXPECT_EQ(j["throughput"]["source"], r.throughput.source);
  EXPECT_TRUE(j["throughput"]["tokens_per_s"].is_null());
  EXPECT_DOUBLE_EQ(j["diagnosis"]["data_stall_ratio"].get<double>(), 0.45);
}

// nanoGPT prints milliseconds per iteration; its --batch_size on the command line makes them samples/s.
TEST_F(WatchPrintedLinesTest, NanoGptLinesGiveSamplesPerSecondFromTheBatchSizeOnItsCommandLine) {
  const WatchOutcome out = watch(
      "printf 'iter 0: loss 4.2874, time 9000.00ms, mfu -100.00%%\\n"
      "iter 10: loss 3.2417, time 40.00ms, mfu 12.30%%\\n"
      "iter 20: loss 2.7913, time 60.00ms, mfu 12.41%%\\n'",
      {"config/train_shakespeare_char.py", "--batch_size=12"});
  const Report& r = out.report;
  EXPECT_DOUBLE_EQ(r.throughput.batches_per_s, 20.0);
  EXPECT_DOUBLE_EQ(r.throughput.samples_per_s, 240.0);
  EXPECT_NE(r.throughput.source.find("nanoGPT `iter N: loss L, time Xms`, 3 lines"), std::string::npos)
      << r.throughput.source;
  EXPECT_NE(r.throughput.source.find("batch size 12 from --batch_size=12"), std::string::npos)
      << r.throughput.source;
  EXPECT_TRUE(report_json()["diagnosis"]["data_stall_ratio"].is_null()) << "no data column";
}

TEST_F(WatchPrintedLinesTest, WithoutABatchSizeTheIterationsAreReportedAndSamplesAreNot) {
  const WatchOutcome out = watch("printf 'iter 10: loss 3.2417, time 50.00ms, mfu 12.30%%\\n'");
  EXPECT_DOUBLE_EQ(out.report.throughput.batches_per_s, 20.0);
  const nlohmann::json j = report_json();
  EXPECT_TRUE(j["throughput"]["samples_per_s"].is_null());
  EXPECT_NE(j["throughput"]["source"].get<std::string>().find("samples/s not measured"), std::string::npos);
}

// mnist's counter of samples done, timed as its lines arrive through the pipe (the rate depends on
// this machine's timing, so only that one was read, and from what, is held).
TEST_F(WatchPrintedLinesTest, ACounterOfSamplesIsTimedOnArrivalWithoutAFlag) {
  watch("for i in 0 1 2 3 4; do printf 'Train Epoch: 1 [%d/60000 (%d%%)]\\tLoss: 0.5\\n' $((i * 640)) $i; "
        "sleep 0.05; done",
        {"--batch-size", "64"});
  const nlohmann::json j = report_json();
  ASSERT_TRUE(j["throughput"]["samples_per_s"].is_number()) << j["throughput"];
  EXPECT_GT(j["throughput"]["samples_per_s"].get<double>(), 0);
  EXPECT_NEAR(j["throughput"]["batches_per_s"].get<double>() * 64, j["throughput"]["samples_per_s"].get<double>(), 1e-6);
  const std::string source = j["throughput"]["source"];
  EXPECT_NE(source.find("pytorch/examples `[N/TOTAL (P%)]`"), std::string::npos) << source;
  EXPECT_NE(source.find("5 lines timed on arrival"), std::string::npos) << source;
  EXPECT_TRUE(j["throughput"]["lines_per_s"].is_null());
}

TEST_F(WatchPrintedLinesTest, LinesInNoKnownFormatAreNotRead) {
  const WatchOutcome out = watch("echo 'loading data: /data/train'; echo 'epoch 1 time: fast'; sleep 1");
  const nlohmann::json j = report_json();
  EXPECT_TRUE(j["throughput"]["samples_per_s"].is_null());
  EXPECT_TRUE(j["throughput"]["batches_per_s"].is_null());
  EXPECT_TRUE(j["throughput"]["source"].is_null());
  EXPECT_TRUE(j["diagnosis"]["data_stall_source"].is_null());
  EXPECT_TRUE(out.work_began_s) << "the first line it printed, read as it always is now";
}

}  // namespace
}  // namespace feedscope
