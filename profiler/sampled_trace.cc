#include "profiler/sampled_trace.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "profiler/time_windows.h"
#include "profiler/trace_sampling.h"

namespace feedscope {

namespace {

// The steps of `sorted` that overlap `r`, each as fn(step).
template <typename Fn>
void for_each_overlapping(const std::vector<StepWindow>& sorted, std::int64_t longest,
                          const TimeWindow& r, Fn&& fn) {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), r.begin_ns - longest,
                             [](const StepWindow& s, std::int64_t t) { return s.begin_ns < t; });
  for (; it != sorted.end() && it->begin_ns < r.end_ns; ++it)
    if (it->end_ns > r.begin_ns) fn(*it);
}

// Every count and summed time of `s` times `k`; shares, rates, means and per-step figures stay.
// The steps are the caller's: a piece of a step counts as its share, which the count has lost.
void scale_totals(GpuTraceSummary& s, double k) {
  const auto count = [k](std::int64_t& n) { n = std::llround(static_cast<double>(n) * k); };
  const auto bytes = [k](std::uint64_t& n) {
    n = static_cast<std::uint64_t>(std::llround(static_cast<double>(n) * k));
  };
  s.step_wall_s *= k;
  count(s.kernels);
  s.gpu_busy_s *= k;
  count(s.launch_gaps);
  count(s.syncs);
  s.sync_wait_s *= k;
  for (auto& [call, n] : s.syncs_by_call) count(n);
  count(s.launch_calls);
  count(s.launches_without_call);
  bytes(s.h2d_pinned_bytes);
  bytes(s.h2d_pageable_bytes);
  bytes(s.h2d_other_bytes);
  bytes(s.d2h_bytes);
  count(s.syncs_after_h2d);
  s.sync_after_h2d_wait_s *= k;
  count(s.graph_kernels);
  count(s.graph_replays);
  count(s.driver_launch_calls);
  count(s.triton_kernels);
  s.collective_s *= k;
  for (GpuTraceSummary::DeviceBusy& d : s.devices) {
    count(d.kernels);
    d.busy_s *= k;
  }
}

// One stratum of a sampled trace: its summary as read, and what it read and stands for.
struct SampledStratum {
  GpuTraceSummary summary;
  GpuTraceSummary::Sampled::Stratum said;
};

// The steps read in `readable` (sorted, disjoint), standing for the steps' time inside `span`.
SampledStratum read_stratum(const GpuActivity& a, const std::vector<StepWindow>& steps,
                     const std::vector<TimeWindow>& readable, const std::vector<StepWindow>& whole,
                     const TimeWindow& span) {
  SampledStratum out;
  const StepsRead read = steps_read_in(steps, readable);
  out.summary = summarize_steps(a, read);
  out.said.read_s = static_cast<double>(windows_ns(read.windows)) / 1e9;
  out.said.steps = read.steps;
  out.said.span_s = static_cast<double>(windows_ns(intersect_windows(whole, {span}))) / 1e9;
  for (const TimeWindow& r : readable)
    if (covered_ns(read.windows, {r}) > 0) ++out.said.windows;
  return out;
}

// The stratum's summary with its totals scaled to `span_s`, and the steps that stand for.
GpuTraceSummary scaled(SampledStratum s, double span_s, double& steps) {
  const double k = s.said.read_s > 0 ? span_s / s.said.read_s : 1.0;
  scale_totals(s.summary, k);
  steps = s.said.steps * k;
  s.summary.steps = std::llround(steps);
  return s.summary;
}

// Bytes over the copies' summed time, from each side's bytes and rate.
std::optional<double> combined_rate(std::uint64_t bytes_a, std::optional<double> gbps_a,
                                    std::uint64_t bytes_b, std::optional<double> gbps_b) {
  double bytes = 0, ns = 0;
  for (const auto& [b, r] : {std::pair{bytes_a, gbps_a}, std::pair{bytes_b, gbps_b}}) {
    if (!r || *r <= 0) continue;
    bytes += static_cast<double>(b);
    ns += static_cast<double>(b) / *r;
  }
  if (ns <= 0) return gbps_a ? gbps_a : gbps_b;
  return bytes / ns;
}

std::vector<GpuTraceSummary::DeviceBusy> combined_devices(const GpuTraceSummary& a,
                                                          const GpuTraceSummary& b, double wall_s) {
  std::map<std::uint32_t, GpuTraceSummary::DeviceBusy> by_device;
  for (const GpuTraceSummary* s : {&a, &b})
    for (const GpuTraceSummary::DeviceBusy& d : s->devices) {
      GpuTraceSummary::DeviceBusy& x = by_device[d.device];
      x.device = d.device;
      x.kernels += d.kernels;
      x.busy_s += d.busy_s;
    }
  std::vector<GpuTraceSummary::DeviceBusy> out;
  for (auto& [device, d] : by_device) {
    d.busy_ratio = wall_s > 0 ? d.busy_s / wall_s : 0;
    out.push_back(d);
  }
  return out;
}

}  // namespace

StepsRead steps_read_in(const std::vector<StepWindow>& given, const std::vector<TimeWindow>& readable) {
  std::vector<StepWindow> steps;
  std::int64_t longest = 0;
  for (const StepWindow& w : given) {
    if (w.end_ns <= w.begin_ns) continue;
    steps.push_back(w);
    longest = std::max(longest, w.end_ns - w.begin_ns);
  }
  std::sort(steps.begin(), steps.end(),
            [](const StepWindow& a, const StepWindow& b) { return a.begin_ns < b.begin_ns; });
  StepsRead out;
  std::vector<StepWindow> read;
  for (const TimeWindow& r : readable) {
    bool whole = false;
    for_each_overlapping(steps, longest, r, [&](const StepWindow& s) {
      whole = whole || (s.begin_ns >= r.begin_ns && s.end_ns <= r.end_ns);
    });
    std::int64_t first = std::numeric_limits<std::int64_t>::max();
    std::int64_t last = std::numeric_limits<std::int64_t>::min();
    for_each_overlapping(steps, longest, r, [&](const StepWindow& s) {
      const StepWindow piece{std::max(s.begin_ns, r.begin_ns), std::min(s.end_ns, r.end_ns)};
      if (whole ? piece != s : piece.end_ns <= piece.begin_ns) return;
      read.push_back(piece);
      out.steps += static_cast<double>(piece.end_ns - piece.begin_ns) /
                   static_cast<double>(s.end_ns - s.begin_ns);
      first = std::min(first, piece.begin_ns);
      last = std::max(last, piece.end_ns);
    });
    if (last > first) out.stretches.push_back({first, last});
  }
  out.windows = merged_windows(std::move(read), true);
  out.stretches = merged_windows(std::move(out.stretches));
  return out;
}

GpuTraceSummary summarize_sampled(const GpuActivity& a, const std::vector<StepWindow>& steps) {
  constexpr std::int64_t kEarliest = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kLatest = std::numeric_limits<std::int64_t>::max();
  const ReadableWindows readable = readable_windows(a);
  const std::vector<TimeWindow> traced = merged_windows(a.traced_windows);
  const std::vector<StepWindow> whole = merged_windows(steps, true);
  // The lead: the first traced window, from the recorder's start past the first kernel's lead,
  // where it is longer than a sampled window can be; a recording cut to a later stretch has none.
  const bool has_lead = !traced.empty() &&
                        traced.front().end_ns - traced.front().begin_ns > a.tracing->sampling.window_ns;
  const std::int64_t lead_end = has_lead ? traced.front().end_ns : kEarliest;
  const TimeWindow before{kEarliest, lead_end}, after{lead_end, kLatest};
  const SampledStratum lead = read_stratum(a, steps, intersect_windows(readable.windows, {before}), whole, before);
  const SampledStratum later = read_stratum(a, steps, intersect_windows(readable.windows, {after}), whole, after);

  GpuTraceSummary::Sampled t;
  t.sampling = a.tracing->sampling;
  t.windows_without_records = readable.without_records;
  t.lead = lead.said;
  t.later = later.said;
  GpuTraceSummary s;
  double lead_steps = 0, later_steps = 0;
  if (later.said.windows >= kLaterWindowsWithoutLead) {
    // The steady state: the later windows alone, standing for the time after the lead.
    t.lead_in_figures = false;
    s = scaled(later, later.said.span_s, later_steps);
    t.read_s = later.said.read_s;
    t.span_s = later.said.span_s;
    t.windows = later.said.windows;
  } else if (lead.said.read_s > 0 && later.said.read_s > 0) {
    s = combined_summary(scaled(lead, lead.said.span_s, lead_steps), lead_steps,
                         scaled(later, later.said.span_s, later_steps), later_steps);
    t.read_s = lead.said.read_s + later.said.read_s;
    t.span_s = lead.said.span_s + later.said.span_s;
    t.windows = lead.said.windows + later.said.windows;
  } else {
    // One stratum read, or none: what was read stands for every step.
    const SampledStratum& only = lead.said.read_s > 0 ? lead : later;
    t.lead_in_figures = lead.said.read_s > 0;
    t.span_s = lead.said.span_s + later.said.span_s;
    double only_steps = 0;
    s = scaled(only, t.span_s, only_steps);
    t.read_s = only.said.read_s;
    t.windows = only.said.windows;
  }
  t.scale = t.read_s > 0 ? t.span_s / t.read_s : 1.0;
  s.sampled = t;
  return s;
}

GpuTraceSummary combined_summary(const GpuTraceSummary& a, double steps_a, const GpuTraceSummary& b,
                                 double steps_b) {
  GpuTraceSummary s = b;  // the records' losses and tracing, which both share
  const double wall = a.step_wall_s + b.step_wall_s;
  const double steps = steps_a + steps_b;
  const auto by_wall = [&](double x, double y) {
    return wall > 0 ? (x * a.step_wall_s + y * b.step_wall_s) / wall : 0.0;
  };
  const auto by_steps = [&](double x, double y) {
    return steps > 0 ? (x * steps_a + y * steps_b) / steps : 0.0;
  };
  const auto by_count = [](double x, std::int64_t n, double y, std::int64_t m) {
    return n + m > 0 ? (x * static_cast<double>(n) + y * static_cast<double>(m)) / static_cast<double>(n + m)
                     : 0.0;
  };
  s.steps = std::llround(steps);
  s.step_wall_s = wall;
  s.kernels = a.kernels + b.kernels;
  s.kernels_per_step = by_steps(a.kernels_per_step, b.kernels_per_step);
  s.mean_kernel_us = by_count(a.mean_kernel_us, a.kernels, b.mean_kernel_us, b.kernels);
  if (b.kernels == 0) {
    s.p50_kernel_us = a.p50_kernel_us;
    s.p95_kernel_us = a.p95_kernel_us;
  }
  s.gpu_busy_s = a.gpu_busy_s + b.gpu_busy_s;
  s.gpu_busy_ratio = by_wall(a.gpu_busy_ratio, b.gpu_busy_ratio);
  s.device_s_per_step = by_steps(a.device_s_per_step, b.device_s_per_step);
  s.launch_gaps = a.launch_gaps + b.launch_gaps;
  s.mean_gap_us = by_count(a.mean_gap_us, a.launch_gaps, b.mean_gap_us, b.launch_gaps);
  if (b.launch_gaps == 0) s.p95_gap_us = a.p95_gap_us;
  s.gap_share = by_wall(a.gap_share, b.gap_share);
  s.syncs = a.syncs + b.syncs;
  s.syncs_per_step = by_steps(a.syncs_per_step, b.syncs_per_step);
  s.sync_wait_s = a.sync_wait_s + b.sync_wait_s;
  for (const auto& [call, n] : a.syncs_by_call) s.syncs_by_call[call] += n;
  s.launch_calls = a.launch_calls + b.launch_calls;
  s.launches_without_call = a.launches_without_call + b.launches_without_call;
  s.mean_launch_call_us = by_count(a.mean_launch_call_us, a.launch_calls - a.launches_without_call,
                                   b.mean_launch_call_us, b.launch_calls - b.launches_without_call);
  s.h2d_pinned_bytes = a.h2d_pinned_bytes + b.h2d_pinned_bytes;
  s.h2d_pageable_bytes = a.h2d_pageable_bytes + b.h2d_pageable_bytes;
  s.h2d_other_bytes = a.h2d_other_bytes + b.h2d_other_bytes;
  s.h2d_pinned_gbps = combined_rate(a.h2d_pinned_bytes, a.h2d_pinned_gbps, b.h2d_pinned_bytes, b.h2d_pinned_gbps);
  s.h2d_pageable_gbps =
      combined_rate(a.h2d_pageable_bytes, a.h2d_pageable_gbps, b.h2d_pageable_bytes, b.h2d_pageable_gbps);
  s.h2d_share = by_wall(a.h2d_share, b.h2d_share);
  s.h2d_pageable_s_per_step = by_steps(a.h2d_pageable_s_per_step, b.h2d_pageable_s_per_step);
  s.d2h_bytes = a.d2h_bytes + b.d2h_bytes;
  s.syncs_after_h2d = a.syncs_after_h2d + b.syncs_after_h2d;
  s.sync_after_h2d_wait_s = a.sync_after_h2d_wait_s + b.sync_after_h2d_wait_s;
  s.graph_kernels = a.graph_kernels + b.graph_kernels;
  s.graphs = std::max(a.graphs, b.graphs);
  s.graph_replays = a.graph_replays + b.graph_replays;
  s.driver_launch_calls = a.driver_launch_calls + b.driver_launch_calls;
  s.triton_kernels = a.triton_kernels + b.triton_kernels;
  s.collective_s = a.collective_s + b.collective_s;
  s.collective_share = by_wall(a.collective_share, b.collective_share);
  s.collective_alone_share = by_wall(a.collective_alone_share, b.collective_alone_share);
  s.devices = combined_devices(a, b, wall);
  return s;
}

}  // namespace feedscope
