#include "cli/command_points.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "cli/config.h"

namespace feedscope {
namespace {

const std::vector<std::string> kTrain = {"python3", "train.py", "--workers", "{num_workers}",
                                         "-b", "16"};

TEST(CommandKnobsTest, ACommandReceivesTheKnobsItsPlaceholdersName) {
  EXPECT_EQ(knobs_received(kTrain), (KnobList{"num_workers"}));
  EXPECT_EQ(knobs_received({"run", "--bs={batch_size}", "--pin", "{pin_memory}"}),
            (KnobList{"batch_size", "pin_memory"}));
  EXPECT_TRUE(knobs_received({"true"}).empty());
}

TEST(CommandKnobsTest, ASweepNamesWhatTheCommandReceivesAndWhatTheGridSets) {
  EXPECT_EQ(sweep_knobs(kTrain, parse_grid({{"num_workers", "0,2"}})), (KnobList{"num_workers"}))
      << "no prefetch or pin_memory for a program that has neither";
  EXPECT_EQ(sweep_knobs(kTrain, parse_grid({{"num_workers", "0,2"}, {"prefetch", "2,4"}})),
            (KnobList{"num_workers", "prefetch"}))
      << "a varied knob the program reads from its environment";
}

TEST(CommandKnobsTest, TuneMovesWhatTheCommandReceivesOrEveryKnobThroughTheEnvironment) {
  EXPECT_EQ(tune_knobs(kTrain), (KnobList{"num_workers"}));
  EXPECT_EQ(tune_knobs({"true"}), all_knobs());
}

// torch's thread count: {threads} or {cpu_threads} in the command, and always OMP_NUM_THREADS and
// MKL_NUM_THREADS in its environment where a point sets it, so a program with no placeholder
// still receives it; 0 leaves the program's default.
TEST(CommandKnobsTest, TheThreadCountReachesTheProgramThroughItsEnvironmentOrAPlaceholder) {
  const std::vector<std::string> threads = {"python3", "t.py", "--threads", "{threads}", "-j", "{num_workers}"};
  EXPECT_EQ(knobs_received(threads), (KnobList{"num_workers", "cpu_threads"}));
  RunConfig point;
  point.num_workers = 2;
  point.cpu_threads = 3;
  EXPECT_EQ(substitute_knobs(threads, point)[3], "3");
  EXPECT_EQ(substitute_knobs({"x", "--t={cpu_threads}"}, point)[1], "--t=3");
  const auto env = knob_environment(point);
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "3");
  EXPECT_EQ(env.at("MKL_NUM_THREADS"), "3");
  EXPECT_EQ(env.at("FEEDSCOPE_CPU_THREADS"), "3");
  point.cpu_threads = 0;
  EXPECT_FALSE(knob_environment(point).contains("OMP_NUM_THREADS")) << "the program's default";

  const SweepGrid grid = parse_grid({{"cpu_threads", "1,2"}});
  EXPECT_EQ(sweep_knobs(kTrain, grid), (KnobList{"num_workers", "cpu_threads"}));
  EXPECT_TRUE(knobs_missing_from(kTrain, grid).empty()) << "it reaches the program as OMP_NUM_THREADS";
  EXPECT_EQ(tune_knobs(threads), (KnobList{"num_workers", "cpu_threads"}));
}

TEST(CommandKnobsTest, IterationsCountWhereNoBatchSizeScalesThem) {
  ProgramPoints p;
  p.command = kTrain;
  p.knobs = {"num_workers"};
  p.throughput_pattern = R"(([0-9.]+)it/s)";
  EXPECT_TRUE(counts_iterations(p));
  p.knobs = {"num_workers", "batch_size"};
  EXPECT_FALSE(counts_iterations(p)) << "{batch_size} makes them samples/s";
  p.knobs = {"num_workers"};
  p.throughput_pattern = R"(([0-9.]+) img/s)";
  EXPECT_FALSE(counts_iterations(p));
  p.throughput_unit = "s/it";
  EXPECT_TRUE(counts_iterations(p)) << "the flag over the pattern's text";
}

class ProgramPointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("feedscope-points-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    base_.report_dir = dir_.string();
    base_.batch_size = 8;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A program that prints `script` through sh, with {batch_size} as its $1.
  ProgramPoints program(const std::string& script, const std::string& pattern, KnobList knobs) const {
    ProgramPoints p;
    p.command = {"/bin/sh", "-c", script, "sh", "{batch_size}"};
    p.throughput_pattern = pattern;
    p.knobs = std::move(knobs);
    p.sample_hz = 2;
    return p;
  }

  std::filesystem::path dir_;
  RunConfig base_;
};

TEST_F(ProgramPointTest, TqdmItersPerSecondTimesThePointsBatchSize) {
  const ProgramPoints p = program(R"(printf ' 1/2 [00:01<00:01, 4.00it/s]\r 2/2 [00:01<00:00, 5.00it/s]\n' >&2)",
                                  R"(([0-9.]+)it/s)", {"batch_size"});
  const Report r = program_point_runner(base_, p)(base_);
  EXPECT_DOUBLE_EQ(r.throughput.samples_per_s, 5.0 * 8);
  EXPECT_DOUBLE_EQ(r.throughput.batches_per_s, 5.0);
}

TEST_F(ProgramPointTest, WithoutABatchSizeTheIterationsCount) {
  ProgramPoints p = program(R"(echo '100%|###| 2/2 [00:01<00:00, 5.00it/s]')", R"(([0-9.]+)it/s)", {});
  const Report r = program_point_runner(base_, p)(base_);
  EXPECT_DOUBLE_EQ(r.throughput.batches_per_s, 5.0);
  EXPECT_DOUBLE_EQ(r.throughput.samples_per_s, 0) << "not measured: null in report.json";
}

TEST_F(ProgramPointTest, ImageNetLinesGiveTheDataStallWithItsSource) {
  const ProgramPoints p = program(
      "printf 'Epoch: [0][ 0/9]\\tTime  3.000 ( 3.000)\\tData  2.900 ( 2.900)\\n"
      "Epoch: [0][ 5/9]\\tTime  0.500 ( 0.800)\\tData  0.150 ( 0.500)\\n'",
      R"(Time\s+([0-9.]+))", {"batch_size"});
  const Report r = program_point_runner(base_, p)(base_);
  EXPECT_DOUBLE_EQ(r.throughput.samples_per_s, 8 / 0.5);
  EXPECT_NEAR(r.diagnosis.data_stall_ratio, 0.3, 1e-12);
  EXPECT_NE(r.diagnosis.data_stall_source.find("Time ... Data"), std::string::npos);
  EXPECT_EQ(r.diagnosis.input_bound, "highly");
}

TEST_F(ProgramPointTest, AFixedWorkloadCountsFromTheFirstLineItPrinted) {
  ProgramPoints p = program("echo starting; sleep 1", "", {});
  p.workload_samples = 100;
  const Report r = program_point_runner(base_, p)(base_);
  EXPECT_GT(r.throughput.samples_per_s, 0);
  bool said = false;
  for (const std::string& note : r.program->notes)
    said = said || (note.find("100 samples (--workload-samples)") != std::string::npos &&
                    note.find("from the first line it printed") != std::string::npos);
  EXPECT_TRUE(said) << "program.notes says where the time began";
}

TEST_F(ProgramPointTest, ABadUnitIsNamedBeforeAnyPointRuns) {
  ProgramPoints p = program("true", R"(([0-9.]+)it/s)", {});
  p.throughput_unit = "iters";
  try {
    program_point_runner(base_, p);
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'iters'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "points"));
}

}  // namespace
}  // namespace feedscope
