// A sampled trace's summary (gpu_trace.h over trace_sampling.h's windows) against the whole trace
// of the same program: the shares and per-step figures are the whole's, the totals scale to it,
// and the stretches between windows are neither idle GPU nor silences to leave out.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <algorithm>

#include "profiler/diagnosis.h"
#include "profiler/gpu_trace.h"
#include "profiler/sampled_trace.h"
#include "profiler/trace_sampling.h"
#include "tests/support/diagnosis_scenarios.h"
#include "tests/support/sampled_activity.h"

namespace feedscope {
namespace {

constexpr std::int64_t kSampledUs = 1000;
constexpr std::int64_t kSampledMs = 1000 * kSampledUs;
constexpr std::int64_t kOrigin = 7'200'000 * kSampledMs;  // a steady clock hours after boot

// A launch-bound loop: every 1 ms step launches 10 kernels of 20 us, 50 us apart, and waits
// 100 us in a stream sync for its loss. The GPU is busy 20 % of the step.
GpuActivity launch_bound_program(int steps) {
  GpuActivity a;
  std::uint32_t corr = 1;
  for (int s = 0; s < steps; ++s) {
    const std::int64_t step = kOrigin + s * kSampledMs;
    for (int k = 0; k < 10; ++k) {
      const std::int64_t launch = step + k * 50 * kSampledUs;
      a.runtime.push_back({"cudaLaunchKernel", launch, launch + 5 * kSampledUs, 1, corr});
      a.kernels.push_back({"k", launch + 10 * kSampledUs, launch + 30 * kSampledUs, 0, 7, corr++});
    }
    const std::int64_t sync = step + 800 * kSampledUs;
    a.runtime.push_back({"cudaStreamSynchronize", sync, sync + 100 * kSampledUs, 1, corr++});
  }
  return a;
}

// What the injection would have written of `whole` under `sampling`, from the program's start.
GpuActivity sampled_as(const GpuActivity& whole, const TraceSampling& sampling) {
  return testing::sampled_as(whole, sampling, kOrigin, whole.runtime.back().end_ns + kSampledMs);
}

const TraceSampling kTenthOfEachHalfSecond{50 * kSampledMs, 500 * kSampledMs, 200 * kSampledMs};

// The program ends inside a window, so that its last kernel is traced: a watched span ends at the
// last traced kernel, up to a period before the program's own.
TEST(SampledTraceTest, AWatchedProgramReadsAsItsWholeTraceWithTotalsScaled) {
  const GpuActivity whole = launch_bound_program(2520);
  const GpuActivity sampled = sampled_as(whole, kTenthOfEachHalfSecond);
  ASSERT_LT(sampled.kernels.size(), whole.kernels.size() / 4);

  const GpuTraceSummary w = summarize_program_activity(whole, kernel_active_windows(whole));
  const ActiveWindows active = kernel_active_windows(sampled);
  // The 450 ms between windows are unknown, not silences: nothing is left out as idle.
  EXPECT_TRUE(active.idle.empty());
  const GpuTraceSummary s = summarize_program_activity(sampled, active);
  ASSERT_TRUE(s.sampled);
  EXPECT_FALSE(w.sampled);
  EXPECT_NEAR(s.gpu_busy_ratio, w.gpu_busy_ratio, 0.01);
  EXPECT_NEAR(s.gpu_busy_ratio, 0.20, 0.01);
  EXPECT_NEAR(s.gap_share, w.gap_share, 0.02);
  EXPECT_NEAR(s.mean_kernel_us, 20, 0.01);
  // 0.2 s of lead, then 5 windows of 50 ms (the last cut at the program's end), each read from
  // where it opened: with 5 past the lead, the figures are theirs and stand for the time after it.
  EXPECT_EQ(s.sampled->windows, 5);
  EXPECT_FALSE(s.sampled->lead_in_figures);
  EXPECT_NEAR(s.sampled->lead.read_s, 0.2, 0.001);
  EXPECT_EQ(s.sampled->windows_without_records, 0);
  EXPECT_NEAR(s.sampled->read_s, 0.22, 0.001);
  const double after_lead = w.step_wall_s - 0.2;
  EXPECT_NEAR(s.sampled->span_s, after_lead, 0.001);
  EXPECT_NEAR(s.sampled->scale, s.sampled->span_s / s.sampled->read_s, 1e-9);
  // Totals: estimates of the whole's after the lead, within what 5 windows of whole 1 ms steps can be.
  const double k = after_lead / w.step_wall_s;
  EXPECT_NEAR(static_cast<double>(s.kernels), k * static_cast<double>(w.kernels), 0.02 * w.kernels);
  EXPECT_NEAR(static_cast<double>(s.syncs), k * static_cast<double>(w.syncs), 0.02 * w.syncs);
  EXPECT_NEAR(s.sync_wait_s, k * w.sync_wait_s, 0.03 * w.sync_wait_s);
  EXPECT_NEAR(s.gpu_busy_s, k * w.gpu_busy_s, 0.02 * w.gpu_busy_s);
  EXPECT_NEAR(s.step_wall_s, s.sampled->span_s, 1e-6);

  // The evidence says it was sampled, what was read, and the scale.
  const std::vector<std::string> lines = gpu_trace_losses(s);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("sampled (0.05 s of every 0.5 s after the first 0.2 s)"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("scaled by"), std::string::npos) << lines[0];
  EXPECT_TRUE(gpu_trace_losses(w).empty());
  EXPECT_NE(describe_tracing(*sampled.tracing).find("sampled: 0.05 s of every 0.5 s"),
            std::string::npos);
}

TEST(SampledTraceTest, ARunsStepsAreReadInTheWindowsAndCountedWhole) {
  const GpuActivity whole = launch_bound_program(3000);
  const GpuActivity sampled = sampled_as(whole, kTenthOfEachHalfSecond);
  std::vector<StepWindow> steps;
  for (int i = 0; i < 3000; ++i)
    steps.push_back({kOrigin + i * kSampledMs, kOrigin + i * kSampledMs + 950 * kSampledUs});
  const GpuTraceSummary w = summarize_measured_steps(whole, steps, kOrigin + 3001 * kSampledMs, kOrigin);
  const GpuTraceSummary s = summarize_measured_steps(sampled, steps, kOrigin + 3001 * kSampledMs, kOrigin);
  ASSERT_TRUE(s.sampled);
  EXPECT_NEAR(s.kernels_per_step, w.kernels_per_step, 0.3);
  EXPECT_NEAR(s.syncs_per_step, w.syncs_per_step, 0.05);
  EXPECT_NEAR(s.gpu_busy_ratio, w.gpu_busy_ratio, 0.01);
  EXPECT_NEAR(static_cast<double>(s.steps), 3000 - 200, 60);  // the steps after the 0.2-s lead
}

// A loop whose step runs `kernels` kernels of `kernel_ns`, evenly spread over the step's first
// 80 %, and ends in .item() (a stream sync of 2 ms): `steps` steps of `step_ns`, back to back.
GpuActivity item_loop(int steps, std::int64_t step_ns, int kernels, std::int64_t kernel_ns,
                      std::vector<StepWindow>& windows) {
  GpuActivity a;
  std::uint32_t corr = 1;
  for (int s = 0; s < steps; ++s) {
    const std::int64_t step = kOrigin + s * step_ns;
    for (int k = 0; k < kernels; ++k) {
      const std::int64_t launch = step + k * (step_ns * 8 / 10 / kernels);
      a.runtime.push_back({"cudaLaunchKernel", launch, launch + 5 * kSampledUs, 1, corr});
      a.kernels.push_back({"k", launch + 10 * kSampledUs, launch + 10 * kSampledUs + kernel_ns, 0, 7, corr++});
    }
    const std::int64_t sync = step + step_ns - 3 * kSampledMs;
    a.runtime.push_back({"cudaStreamSynchronize", sync, sync + 2 * kSampledMs, 1, corr++});
    windows.push_back({step, step + step_ns});
  }
  return a;
}

// Each 100 ms window holds a step cut at its head, two whole ones and one cut at its tail: the
// cut ones lack their sync, so counted as steps they read 0.67 syncs a step, and the advice to
// remove the sync (1 or more a step) was never given. Whole steps alone read 1.0.
TEST(SampledTraceTest, ALoopThatSyncsOnceAStepReadsOneSyncAStepAndIsToldToRemoveIt) {
  std::vector<StepWindow> steps;
  const GpuActivity whole = item_loop(800, 37 * kSampledMs, 10, 500 * kSampledUs, steps);
  const TraceSampling sampling{100 * kSampledMs, 1000 * kSampledMs, 1000 * kSampledMs};
  const GpuActivity sampled = sampled_as(whole, sampling);
  const std::int64_t end = kOrigin + 801 * 37 * kSampledMs;
  const GpuTraceSummary w = summarize_measured_steps(whole, steps, end, kOrigin);
  const GpuTraceSummary s = summarize_measured_steps(sampled, steps, end, kOrigin);
  ASSERT_TRUE(s.sampled);
  EXPECT_DOUBLE_EQ(w.syncs_per_step, 1.0);
  EXPECT_DOUBLE_EQ(s.syncs_per_step, 1.0);
  EXPECT_DOUBLE_EQ(s.kernels_per_step, 10.0);
  EXPECT_NEAR(s.device_s_per_step, w.device_s_per_step, 0.0002);
  EXPECT_NEAR(s.device_s_per_step, 0.005, 0.0002);
  EXPECT_NEAR(s.gpu_busy_ratio, w.gpu_busy_ratio, 0.01);
  EXPECT_NEAR(static_cast<double>(s.steps), 800 - 1100 / 37.0, 1);  // the steps after the lead

  DiagnosisInput in = scenario(800 * 0.037, 800, 0, 0.0002, 0, 0.037, 2, 8, true);
  in.gpu_trace = s;
  const Diagnosis d = diagnose(in);
  EXPECT_NE(std::find(d.rules.begin(), d.rules.end(), "remove_host_syncs"), d.rules.end());
  EXPECT_TRUE(std::any_of(d.recommendations.begin(), d.recommendations.end(),
                          [](const Recommendation& r) { return r.setting == "no per-step sync"; }));
}

// A 370 ms step never fits a 100 ms window: each piece counts as its share of its step, so the
// kernels and the device's time per step are the step's, not a quarter of them.
TEST(SampledTraceTest, StepsLongerThanTheWindowAreReadAsTheirShareOfAStep) {
  std::vector<StepWindow> steps;
  const GpuActivity whole = item_loop(100, 370 * kSampledMs, 160, 1 * kSampledMs, steps);
  const TraceSampling sampling{100 * kSampledMs, 1000 * kSampledMs, 0};
  const GpuActivity sampled = sampled_as(whole, sampling);
  const std::int64_t end = kOrigin + 101 * 370 * kSampledMs;
  const GpuTraceSummary w = summarize_measured_steps(whole, steps, end, kOrigin);
  const GpuTraceSummary s = summarize_measured_steps(sampled, steps, end, kOrigin);
  ASSERT_TRUE(s.sampled);
  EXPECT_DOUBLE_EQ(w.kernels_per_step, 160);
  EXPECT_NEAR(s.kernels_per_step, 160, 16);
  EXPECT_NEAR(s.device_s_per_step, w.device_s_per_step, 0.016);
  EXPECT_NEAR(s.syncs_per_step, 1.0, 0.15);
}

// A program whose first 2 s are warm-up (one 9 ms kernel in each 10 ms step: autotuning, the GPU
// busy) and then launch-bound (ten 100 us kernels a step: busy 10 %).
GpuActivity warming_up_program(int steps) {
  GpuActivity a;
  std::uint32_t corr = 1;
  for (int s = 0; s < steps; ++s) {
    const std::int64_t step = kOrigin + s * 10 * kSampledMs;
    const bool warm_up = s < 200;
    for (int k = 0; k < (warm_up ? 1 : 10); ++k) {
      const std::int64_t launch = step + k * 900 * kSampledUs;
      a.runtime.push_back({"cudaLaunchKernel", launch, launch + 5 * kSampledUs, 1, corr});
      a.kernels.push_back({"k", launch + 10 * kSampledUs,
                           launch + 10 * kSampledUs + (warm_up ? 9 * kSampledMs : 100 * kSampledUs), 0, 7, corr++});
    }
  }
  return a;
}

// The lead is no random sample of the run: it is counted as traced, not scaled, and once two later
// windows were read the figures are theirs (the steady state), with the lead said apart.
TEST(SampledTraceTest, TheLeadIsItsOwnStratumAndLeftOutOnceTwoLaterWindowsWereRead) {
  const TraceSampling sampling{100 * kSampledMs, 1000 * kSampledMs, 2000 * kSampledMs};
  const auto summaries = [&](int steps) {
    const GpuActivity whole = warming_up_program(steps);
    const GpuActivity sampled = testing::sampled_as(whole, sampling, kOrigin, kOrigin + steps * 10 * kSampledMs);
    return std::pair{summarize_program_activity(whole, kernel_active_windows(whole)),
                     summarize_program_activity(sampled, kernel_active_windows(sampled))};
  };
  // 60 s: 57 windows after the lead. Pooled with them, the lead read the GPU 31 % busy.
  const auto [w60, s60] = summaries(6000);
  ASSERT_TRUE(s60.sampled);
  EXPECT_FALSE(s60.sampled->lead_in_figures);
  EXPECT_EQ(s60.sampled->later.windows, 57);
  EXPECT_NEAR(s60.sampled->lead.read_s, 2.1, 0.01);
  EXPECT_NEAR(s60.gpu_busy_ratio, 0.10, 0.005);  // the whole run's, warm-up in it: 0.13
  EXPECT_GT(w60.gpu_busy_ratio, 0.12);
  EXPECT_NEAR(s60.sampled->span_s, 59.1 - 2.1, 0.02);  // to the last traced kernel
  const std::vector<std::string> lines = gpu_trace_losses(s60);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("left out"), std::string::npos) << lines[0];

  // 3.1 s: one window after the lead. The lead's 2.1 s count as traced, the window's 0.1 s stand
  // for the 1 s after it: the totals are the whole's, where scaling the lead with the window made
  // 564 kernels of 1300.
  const auto [w3, s3] = summaries(310);
  ASSERT_TRUE(s3.sampled);
  EXPECT_TRUE(s3.sampled->lead_in_figures);
  EXPECT_EQ(s3.sampled->later.windows, 1);
  EXPECT_EQ(w3.kernels, 1300);
  EXPECT_NEAR(static_cast<double>(s3.kernels), 1300, 30);
  EXPECT_NEAR(s3.gpu_busy_s, w3.gpu_busy_s, 0.02 * w3.gpu_busy_s);
  EXPECT_NEAR(s3.gpu_busy_ratio, w3.gpu_busy_ratio, 0.01);
}

// A recording cut to the program's last seconds (exporters/recording.h's cap) holds one window and
// no lead: its first traced window is no lead, and is read as a window.
TEST(SampledTraceTest, AWindowNoLongerThanTheSamplingsIsNoLead) {
  const TraceSampling sampling{100 * kSampledMs, 1000 * kSampledMs, 2000 * kSampledMs};
  const GpuActivity whole = warming_up_program(6000);
  GpuActivity sampled = testing::sampled_as(whole, sampling, kOrigin, kOrigin + 6000 * 10 * kSampledMs);
  const TimeWindow last = sampled.traced_windows.back();
  sampled.traced_windows = {last};
  std::erase_if(sampled.kernels, [&](const KernelRecord& k) { return k.start_ns < last.begin_ns; });
  std::erase_if(sampled.runtime, [&](const RuntimeApiRecord& r) { return r.start_ns < last.begin_ns; });
  const GpuTraceSummary s = summarize_program_activity(sampled, kernel_active_windows(sampled));
  ASSERT_TRUE(s.sampled);
  EXPECT_EQ(s.sampled->lead.read_s, 0);
  EXPECT_EQ(s.sampled->later.windows, 1);
  EXPECT_FALSE(s.sampled->lead_in_figures);
  EXPECT_NEAR(s.gpu_busy_ratio, 0.10, 0.005);
}

// An input-bound program: a 10 ms kernel in the middle of each 100 ms step, the GPU idle the rest.
// Read from their first kernel, the windows dropped the idle head and read it busy 20 %.
TEST(SampledTraceTest, AnIdleHeadOfEachWindowIsReadAsIdle) {
  GpuActivity whole;
  for (std::uint32_t s = 0; s < 300; ++s) {
    const std::int64_t launch = kOrigin + s * 100 * kSampledMs + 50 * kSampledMs;
    whole.runtime.push_back({"cudaLaunchKernel", launch, launch + 5 * kSampledUs, 1, s + 1});
    whole.kernels.push_back({"k", launch + 10 * kSampledUs, launch + 10 * kSampledMs, 0, 7, s + 1});
  }
  const TraceSampling sampling{100 * kSampledMs, 1000 * kSampledMs, 0};
  const GpuActivity sampled = testing::sampled_as(whole, sampling, kOrigin, kOrigin + 30'000 * kSampledMs);
  const GpuTraceSummary s = summarize_program_activity(sampled, kernel_active_windows(sampled));
  ASSERT_TRUE(s.sampled);
  EXPECT_NEAR(s.gpu_busy_ratio, 0.10, 0.005);
}

// A CUPTI that did not record again after its first window closed: the later windows have the
// launches and no kernel. They are left out and said, not read as an idle GPU.
TEST(SampledTraceTest, WindowsWithLaunchesButNoKernelAreLeftOutNotReadAsIdle) {
  const GpuActivity whole = launch_bound_program(3000);
  GpuActivity sampled = sampled_as(whole, kTenthOfEachHalfSecond);
  const std::int64_t lead_end = kOrigin + 200 * kSampledMs;
  std::erase_if(sampled.kernels, [&](const KernelRecord& k) { return k.start_ns >= lead_end; });
  const GpuTraceSummary s = summarize_program_activity(sampled, kernel_active_windows(sampled));
  ASSERT_TRUE(s.sampled);
  EXPECT_EQ(s.sampled->windows_without_records, 5);
  EXPECT_NEAR(s.gpu_busy_ratio, 0.20, 0.01);
  const std::vector<std::string> lines = gpu_trace_losses(s);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("5 sampled windows had launch calls but no kernel"), std::string::npos)
      << lines[1];
}

}  // namespace
}  // namespace feedscope
