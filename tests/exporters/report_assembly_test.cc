#include "exporters/report_assembly.h"

#include <gtest/gtest.h>

#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "exporters/json_report.h"
#include "tests/support/durations.h"

namespace feedscope {
namespace {

using testing::kMs;

// Hands back fabricated records, as a CUPTI source that hit its memory cap would.
class FabricatedGpuSource final : public GpuActivitySource {
 public:
  explicit FabricatedGpuSource(GpuActivity activity) : activity_(std::move(activity)) {}
  bool start() override { return true; }
  void stop() override {}
  GpuActivity collect() override { return std::exchange(activity_, {}); }
  std::string unavailable_reason() const override { return ""; }

 private:
  GpuActivity activity_;
};

// A trace of a device that runs what it was given only when drained: kernels still queued when
// the trace stops are lost, as CUPTI's are for work that has not run by then.
class QueuedKernelsSource final : public GpuActivitySource {
 public:
  bool start() override { return true; }
  void stop() override {
    stopped_ = true;
    lost_ = queued_;
  }
  GpuActivity collect() override { return std::exchange(done_, {}); }
  std::string unavailable_reason() const override { return ""; }

  void launch(KernelRecord k) { queued_.push_back(std::move(k)); }
  void run_queued() {
    if (stopped_) return;
    for (KernelRecord& k : queued_) done_.kernels.push_back(std::move(k));
    queued_.clear();
  }
  std::size_t lost() const { return lost_.size(); }

 private:
  bool stopped_ = false;
  std::vector<KernelRecord> queued_, lost_;
  GpuActivity done_;
};

TEST(StopTracersTest, TheDeviceDrainsBeforeTheTraceStopsSoTheLastStepsKernelsAreKept) {
  QueuedKernelsSource gpu;
  for (std::uint32_t i = 0; i < 10; ++i)
    gpu.launch({"k", i * 10 * kMs, i * 10 * kMs + 5 * kMs, 0, 7, i});
  gpu.run_queued();
  // The loop ends two steps ahead of the device, as the step fence allows.
  gpu.launch({"k", 100 * kMs, 105 * kMs, 0, 7, 10});
  gpu.launch({"k", 110 * kMs, 115 * kMs, 0, 7, 11});
  Report report;
  bool drained = false;
  stop_tracers([&] { drained = true; gpu.run_queued(); }, &gpu, nullptr, report);
  EXPECT_TRUE(drained);
  EXPECT_EQ(gpu.lost(), 0u);
  SpanDigest::Steps steps;
  for (int i = 0; i < 12; ++i) steps.windows.push_back({i * 10 * kMs, i * 10 * kMs + 10 * kMs});
  finish_gpu_trace(report, &gpu, "", steps, MeasuredWindow{0, 120 * kMs, 12, 12});
  ASSERT_TRUE(report.gpu_trace);
  EXPECT_EQ(report.gpu_trace->kernels, 12);
  EXPECT_DOUBLE_EQ(report.gpu_trace->kernels_per_step, 1.0);
  EXPECT_NEAR(report.gpu_trace->gpu_busy_ratio, 0.5, 1e-9);
}

TEST(StopTracersTest, WithoutADrainOrTracersItSaysSamplingWasOff) {
  Report report;
  stop_tracers({}, nullptr, nullptr, report);
  EXPECT_EQ(report.utilization.unavailable.count("sampler"), 1u);
}

TEST(FillUtilizationTest, TheRunsOwnGpuIsTheOneReadNotAlwaysTheFirst) {
  UtilizationSummary summary;
  summary.samples = 10;
  summary.series["gpu0_util_ratio"] = SeriesSummary{10, 0.05, 0.1, 0.1};  // another job's GPU
  summary.series["gpu1_util_ratio"] = SeriesSummary{10, 0.9, 0.95, 1.0};  // the run's cuda:1
  Utilization on_1, on_0, on_2;
  fill_utilization(summary, on_1, 1);
  fill_utilization(summary, on_0, 0);
  fill_utilization(summary, on_2, 2);
  EXPECT_DOUBLE_EQ(on_1.gpu_util_ratio.value(), 0.9);
  EXPECT_DOUBLE_EQ(on_0.gpu_util_ratio.value(), 0.05);
  EXPECT_FALSE(on_2.gpu_util_ratio.has_value());  // no series for a GPU not sampled
}

// A MIG instance: NVML_ERROR_NOT_SUPPORTED for the utilization, the memory reading is there.
class MigGpu final : public GpuSource {
 public:
  std::vector<GpuSample> read() override {
    GpuSample g;
    g.memory_used_bytes = 1 << 30;
    g.unavailable["util_ratio"] = "nvmlDeviceGetUtilizationRates: status 3 (NOT_SUPPORTED)";
    return {g};
  }
  std::string unavailable_reason() const override { return ""; }
};

TEST(FillUtilizationTest, AGpuUtilizationNvmlCouldNotReadIsNullInTheReportWithItsReason) {
  UtilizationSampler::Options o;
  o.gpu = std::make_unique<MigGpu>();
  UtilizationSampler sampler(std::move(o));
  for (int i = 1; i <= 3; ++i) sampler.sample(i * 1'000'000'000LL);
  Report report;
  fill_utilization(sampler.summary(), report.utilization, 0);
  const auto j = nlohmann::json::parse(report_to_json(report));
  EXPECT_TRUE(j["utilization"]["gpu_util_ratio"].is_null()) << "not measured, not 0";
  EXPECT_EQ(j["utilization"]["unavailable"]["gpu0_util_ratio"],
            "nvmlDeviceGetUtilizationRates: status 3 (NOT_SUPPORTED)");
  EXPECT_TRUE(j["utilization"]["series"].contains("gpu0_memory_used_bytes"));
}

// Ten 10 ms steps from t = 0, each with one 5 ms kernel at its start.
GpuActivity ten_steps_of_kernels() {
  GpuActivity a;
  for (int i = 0; i < 10; ++i)
    a.kernels.push_back({"k", i * 10 * kMs, i * 10 * kMs + 5 * kMs, 0, 7, static_cast<std::uint32_t>(i)});
  return a;
}

SpanDigest::Steps ten_steps() {
  SpanDigest::Steps s;
  for (int i = 0; i < 10; ++i) s.windows.push_back({i * 10 * kMs, i * 10 * kMs + 10 * kMs});
  return s;
}

TEST(FinishGpuTraceTest, WithEveryRecordAndStepTheSummaryCoversTheWholeWindow) {
  FabricatedGpuSource gpu(ten_steps_of_kernels());
  Report report;
  finish_gpu_trace(report, &gpu, "", ten_steps(), {0, 100 * kMs, 10, 640});
  ASSERT_TRUE(report.gpu_trace);
  EXPECT_EQ(report.gpu_trace->steps, 10);
  EXPECT_EQ(report.gpu_trace->kernels, 10);
  EXPECT_DOUBLE_EQ(report.gpu_trace->gpu_busy_ratio, 0.5);
  EXPECT_EQ(report.gpu_trace->records_not_kept, 0u);
  EXPECT_FALSE(report.gpu_trace->covered_until_s);
}

TEST(FinishGpuTraceTest, PastTheRecordCapOnlyTheStepsBeforeTheCutAreSummarized) {
  GpuActivity a = ten_steps_of_kernels();
  // The source kept the first six kernels; the other four were counted, starting at 60 ms.
  a.kernels.resize(6);
  a.not_kept = 4;
  a.kept_until_ns = 60 * kMs;
  FabricatedGpuSource gpu(std::move(a));
  Report report;
  finish_gpu_trace(report, &gpu, "", ten_steps(), {0, 100 * kMs, 10, 640});
  ASSERT_TRUE(report.gpu_trace);
  // Without the cut the last four steps would count as idle: a busy ratio of 0.3, not 0.5.
  EXPECT_EQ(report.gpu_trace->steps, 6);
  EXPECT_DOUBLE_EQ(report.gpu_trace->gpu_busy_ratio, 0.5);
  EXPECT_EQ(report.gpu_trace->records_not_kept, 4u);
  ASSERT_TRUE(report.gpu_trace->covered_until_s);
  EXPECT_DOUBLE_EQ(*report.gpu_trace->covered_until_s, 0.06);
}

TEST(FinishGpuTraceTest, PastTheStepCapTheSummaryStopsWhereTheStepsDo) {
  FabricatedGpuSource gpu(ten_steps_of_kernels());
  SpanDigest::Steps steps = ten_steps();
  steps.windows.resize(3);
  steps.complete_until_ns = 30 * kMs;
  Report report;
  finish_gpu_trace(report, &gpu, "", steps, {0, 100 * kMs, 10, 640});
  ASSERT_TRUE(report.gpu_trace);
  EXPECT_EQ(report.gpu_trace->steps, 3);
  EXPECT_EQ(report.gpu_trace->kernels, 3);
  EXPECT_DOUBLE_EQ(*report.gpu_trace->covered_until_s, 0.03);
}

}  // namespace
}  // namespace feedscope
