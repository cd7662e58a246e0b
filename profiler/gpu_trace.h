#pragma once
// What the GPU did during the training steps: kernel statistics, busy time as the union of
// activity over every stream, idle gaps between launches, host syncs, and H2D copies by source
// memory. Pure functions of the records and the step windows, so tests feed fabricated ones.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/cuda_api_names.h"  // the call predicates the summary reads
#include "profiler/gpu_activity.h"
#include "profiler/report.h"

namespace feedscope {

// [begin_ns, end_ns) of one `step` span, in now_ns() time.
using StepWindow = TimeWindow;

// Windows may come in any order; empty ones are ignored. Overlapping windows are merged so that
// no GPU time counts twice.
GpuTraceSummary summarize_gpu_trace(const GpuActivity& activity,
                                    std::vector<StepWindow> step_windows);

// What a summary reads: the steps' windows (sorted, disjoint; back-to-back steps kept apart), how
// many steps they are (a piece of a step counts as its share of it: sampled_trace.h), and the
// stretches in which the device's work per step and the copies are read, which a step's kernels may
// run past its end in (from the first step's start to the last step's end; under sampled tracing,
// in each traced window). summarize_gpu_trace reads every step whole.
struct StepsRead {
  std::vector<StepWindow> windows;
  double steps = 0;
  std::vector<TimeWindow> stretches;
};
GpuTraceSummary summarize_steps(const GpuActivity& activity, const StepsRead& read);

// The span of a watched program's CUDA work that a GPU summary should cover: from its first
// kernel's start to its last kernel's end (start-up, module loading, moving the model in and the
// teardown are not training), less every stretch inside it with no CUDA activity of any kind (no
// runtime call, no kernel, copy or memset) at least kIdleLeftOutNs long and at least
// kIdleLeftOutShare of the span: a checkpoint written by the CPU, an evaluation on the CPU, a
// pause. Shorter silences stay in: a loop waiting for its data makes them every step, and that
// wait is what the summary must see.
inline constexpr std::int64_t kIdleLeftOutNs = 2'000'000'000;
inline constexpr double kIdleLeftOutShare = 0.10;

struct ActiveWindows {
  std::vector<StepWindow> windows;  // empty: no kernel ran
  std::int64_t before_ns = 0;       // CUDA activity before the first kernel (start-up)
  std::int64_t after_ns = 0;        // and after the last
  std::vector<StepWindow> idle;     // the silent stretches left out between

  // All the CUDA activity's time the windows leave out: before, after and between.
  std::int64_t left_out_ns() const {
    std::int64_t ns = before_ns + after_ns;
    for (const StepWindow& gap : idle) ns += gap.end_ns - gap.begin_ns;
    return ns;
  }
};
ActiveWindows kernel_active_windows(const GpuActivity& activity);

// `run`'s and a wrapped loop's summary: over the measured `steps` that are complete both in the
// records (activity.kept_until_ns, past a tracer's memory cap) and in the steps themselves
// (`steps_complete_until_ns`, SpanDigest::Steps), so that it describes the first part of the run
// rather than mixing in steps whose GPU work was never recorded; covered_until_s counts from
// `measured_begin_ns`. A recording's replay (exporters/recording.h) calls it with what it stored.
// A sampled trace (activity.sampled()) is read where its windows can be (readable_windows,
// trace_sampling.h), and its totals scaled to the steps (GpuTraceSummary::sampled).
GpuTraceSummary summarize_measured_steps(const GpuActivity& activity,
                                         const std::vector<StepWindow>& steps,
                                         std::int64_t steps_complete_until_ns,
                                         std::int64_t measured_begin_ns);

// `watch`'s summary of a program's CUDA work: over kernel_active_windows(activity), and of a
// sampled trace over their parts its windows can be read in, scaled as above.
GpuTraceSummary summarize_program_activity(const GpuActivity& activity, const ActiveWindows& active);

// Evidence lines for records the trace lost or left out, one per cause with a non-zero count, so
// a reader knows the GPU numbers are low bounds; and for a sampled trace, what was read and the
// scale. Empty for a complete, whole trace.
std::vector<std::string> gpu_trace_losses(const GpuTraceSummary& summary);

// How the trace was taken, for people: "runtime calls: the 41 the summary reads; driver launches:
// 8 calls; sync records: completed queries only", and the fallback's note.
std::string describe_tracing(const TracingMode& tracing);

}  // namespace feedscope
