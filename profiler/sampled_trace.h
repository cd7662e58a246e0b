#pragma once
// A sampled trace's summary (GpuTraceSummary::Sampled): which steps its windows can be read in,
// and how the lead and the later windows stand for the whole. Each traced window holds a cut first
// step, whole ones and a cut last one; a cut step lacks the records on the far side of the edge
// (the kernels launched before the window opened, the .item() after it closed), so it is read only
// where no whole step fits in the window, and then as its share of a step. The lead (the first
// traced window, traced whole from each process's first kernel: cuDNN's autotuning, compilation,
// workers starting) is no random sample of the run, so it is a stratum of its own: its totals
// exact, only the later windows scaled, and left out of the figures once enough later windows
// were read. Pure; gpu_trace.cc's summaries call it for a sampled trace.
#include <cstdint>
#include <vector>

#include "profiler/gpu_activity.h"
#include "profiler/gpu_trace.h"
#include "profiler/report.h"

namespace feedscope {

// Later windows read from which the figures leave the lead out (torch.profiler's schedule warms
// up before it records, for the same reason).
inline constexpr std::int64_t kLaterWindowsWithoutLead = 2;

// The steps of `steps` (any order) read in `readable` (sorted, disjoint): in each window, every
// step that lies whole in it; where none does, the piece of each step in it, counted as its share
// of that step. `stretches`: from the first step read to the last in each window.
StepsRead steps_read_in(const std::vector<StepWindow>& steps, const std::vector<TimeWindow>& readable);

// The summary of `activity` (sampled) over `steps`: the lead and the later windows each read by
// steps_read_in, each scaled to the span of the steps it stands for, and summed; the later ones
// alone once kLaterWindowsWithoutLead of them were read.
GpuTraceSummary summarize_sampled(const GpuActivity& activity, const std::vector<StepWindow>& steps);

// Two summaries of disjoint stretches of one program as one: counts and times summed; shares
// weighted by step time, per-step figures by steps, means by what they average; percentiles the
// later one's where it has kernels. `steps_a` and `steps_b`: the steps each stands for.
GpuTraceSummary combined_summary(const GpuTraceSummary& a, double steps_a, const GpuTraceSummary& b,
                                 double steps_b);

}  // namespace feedscope
