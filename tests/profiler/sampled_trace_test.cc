// A sampled trace's summary (gpu_trace.h over trace_sampling.h's windows) against the whole trace
// of the same program: the shares and per-step figures are the whole's, the totals scale to it,
// and the stretches between windows are neither idle GPU nor silences to leave out.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/gpu_trace.h"
#include "profiler/trace_sampling.h"
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
  // 0.2 s of lead and 5 windows of 50 ms, each read from its first kernel.
  EXPECT_EQ(s.sampled->windows, 6);
  EXPECT_EQ(s.sampled->windows_without_records, 0);
  EXPECT_NEAR(s.sampled->read_s, 0.42, 0.01);
  EXPECT_NEAR(s.sampled->span_s, w.step_wall_s, 0.001);
  EXPECT_NEAR(s.sampled->scale, s.sampled->span_s / s.sampled->read_s, 1e-9);
  // Totals: estimates of the whole's, within what 6 windows of whole 1 ms steps can be.
  EXPECT_NEAR(static_cast<double>(s.kernels), static_cast<double>(w.kernels), 0.02 * w.kernels);
  EXPECT_NEAR(static_cast<double>(s.syncs), static_cast<double>(w.syncs), 0.02 * w.syncs);
  EXPECT_NEAR(s.sync_wait_s, w.sync_wait_s, 0.03 * w.sync_wait_s);
  EXPECT_NEAR(s.gpu_busy_s, w.gpu_busy_s, 0.02 * w.gpu_busy_s);
  EXPECT_NEAR(s.step_wall_s, w.step_wall_s, 1e-6);

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
  EXPECT_NEAR(static_cast<double>(s.steps), 3000, 60);
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
