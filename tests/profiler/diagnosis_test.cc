#include "profiler/diagnosis.h"

#include <gtest/gtest.h>

#include "profiler/stage_stats.h"

namespace feedscope {
namespace {

// A run of `batches` batches over `wall_s`, with per-batch seconds for each stage given.
DiagnosisInput scenario(double wall_s, std::int64_t batches, double read, double decode,
                        double wait, double step, int workers, int cpus, bool gpu) {
  DiagnosisInput in;
  in.wall_s = wall_s;
  in.batches = batches;
  in.batch_size = 64;
  in.samples_per_s = static_cast<double>(batches * 64) / wall_s;
  in.num_workers = workers;
  in.cpus = cpus;
  in.on_gpu = gpu;
  for (int i = 0; i < kStageCount; ++i) {
    StageStats s;
    s.name = std::string(kStageNames[static_cast<std::size_t>(i)]);
    in.stages.push_back(s);
  }
  auto set = [&](Stage stage, double per_batch) {
    StageStats& s = in.stages[static_cast<std::size_t>(stage)];
    s.count = per_batch > 0 ? batches : 0;
    s.busy_s = per_batch * static_cast<double>(batches);
    s.mean_ms = per_batch * 1e3;
  };
  set(Stage::read, read);
  set(Stage::decode, decode);
  set(Stage::wait, wait);
  set(Stage::step, step);
  in.utilization.cpu_process_ratio = 0.9;
  return in;
}

TEST(DiagnosisTest, ThresholdsFollowTheTensorFlowProfiler) {
  EXPECT_STREQ(input_bound_class(0.049), "no");
  EXPECT_STREQ(input_bound_class(0.05), "moderately");
  EXPECT_STREQ(input_bound_class(0.199), "moderately");
  EXPECT_STREQ(input_bound_class(0.20), "highly");
}

TEST(DiagnosisTest, SlowDecodeWithOneWorkerIsCpuPreprocessAndMoreWorkersHelp) {
  // 1 worker decodes a batch in 30 ms; the step takes 10 ms; the loop waits 20 ms a batch.
  const DiagnosisInput in = scenario(3.0, 100, 0.001, 0.029, 0.020, 0.010, 1, 4, true);
  const Diagnosis d = diagnose(in);
  EXPECT_EQ(d.bottleneck, "cpu_preprocess");
  EXPECT_EQ(d.input_bound, "highly");
  EXPECT_NEAR(d.data_stall_ratio, 2.0 / 3.0, 1e-9);
  ASSERT_FALSE(d.recommendations.empty());
  const Recommendation& r = d.recommendations[0];
  EXPECT_EQ(r.setting, "num_workers=3") << "ceil(30 ms / 10 ms) workers keep up with the step";
  // 3 workers: min(3/0.030, 1/0.010) = 100 batches/s = 6400 samples/s, against 2133 measured.
  EXPECT_NEAR(r.predicted_samples_per_s, 6400, 1);
  EXPECT_NEAR(r.predicted_speedup, 3.0, 0.01);
  EXPECT_EQ(d.verdict.rfind("Input-bound (highly)", 0), 0u) << d.verdict;
}

TEST(DiagnosisTest, CpuCountCapsTheWorkerAdvice) {
  const Diagnosis d = diagnose(scenario(3.0, 100, 0.0, 0.030, 0.020, 0.010, 1, 2, false));
  ASSERT_FALSE(d.recommendations.empty());
  EXPECT_EQ(d.recommendations[0].setting, "num_workers=2");
  // On the CPU the step shares the cores: min(2/0.030, 1/0.010, 2/(0.030+0.010)) = 50 batches/s.
  EXPECT_NEAR(d.recommendations[0].predicted_samples_per_s, 50 * 64, 1);
}

TEST(DiagnosisTest, EveryCoreLoadingAlreadyMeansCheaperPreprocessing) {
  const Diagnosis d = diagnose(scenario(3.0, 100, 0.0, 0.060, 0.020, 0.010, 2, 2, true));
  EXPECT_EQ(d.bottleneck, "cpu_preprocess");
  ASSERT_FALSE(d.recommendations.empty());
  EXPECT_EQ(d.recommendations[0].setting, "cheaper preprocessing");
}

TEST(DiagnosisTest, HeavyStepOnTheCpuIsCpuCompute) {
  const Diagnosis d = diagnose(scenario(5.0, 100, 0.0, 0.002, 0.0005, 0.049, 2, 2, false));
  EXPECT_EQ(d.bottleneck, "cpu_compute");
  EXPECT_EQ(d.input_bound, "no");
  EXPECT_EQ(d.verdict.rfind("Not input-bound", 0), 0u) << d.verdict;
}

TEST(DiagnosisTest, HeavyStepOnTheGpuIsGpuCompute) {
  EXPECT_EQ(diagnose(scenario(5.0, 100, 0.0, 0.002, 0.0005, 0.049, 2, 8, true)).bottleneck,
            "gpu_compute");
}

TEST(DiagnosisTest, ReadDominatedLoadingWithIdleCpuIsStorageIo) {
  DiagnosisInput in = scenario(4.0, 100, 0.030, 0.005, 0.025, 0.015, 2, 8, true);
  in.utilization.cpu_process_ratio = 0.15;
  const Diagnosis d = diagnose(in);
  EXPECT_EQ(d.bottleneck, "storage_io");
}

TEST(DiagnosisTest, EvidenceCarriesTheMeasuredNumbers) {
  const Diagnosis d = diagnose(scenario(3.0, 100, 0.001, 0.029, 0.020, 0.010, 1, 4, true));
  ASSERT_GE(d.evidence.size(), 3u);
  EXPECT_NE(d.evidence[0].find("66.7%"), std::string::npos) << d.evidence[0];
  EXPECT_NE(d.evidence[1].find("10.00 ms"), std::string::npos) << d.evidence[1];
}

}  // namespace
}  // namespace feedscope
