#include "profiler/gpu_trace.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "profiler/detail/format.h"
#include "profiler/time_windows.h"
#include "profiler/sampled_trace.h"
#include "profiler/trace_sampling.h"
#include "sampler/statistics.h"

namespace feedscope {

namespace {

std::string sync_kind_name(SyncType type) {
  switch (type) {
    case SyncType::event: return "event synchronize";
    case SyncType::stream: return "stream synchronize";
    case SyncType::context: return "context synchronize";
    case SyncType::stream_wait_event: return "stream wait event";
    case SyncType::other: break;
  }
  return "synchronize";
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

// What a sampled trace read, per stratum (sampled_trace.h), and how its totals were scaled.
std::string sampled_line(const GpuTraceSummary::Sampled& t) {
  using detail::fmt;
  const std::string head = "the GPU trace was sampled (" + describe_sampling(t.sampling) + "): ";
  const std::string tail = fmt(", counts and times scaled by %.2f, shares and per-step figures as read",
                               t.scale);
  if (!t.lead_in_figures && t.lead.read_s > 0)
    return head + fmt("the figures are the %.1f s read of the %.1f s after the lead, in %lld windows",
                      t.read_s, t.span_s, static_cast<long long>(t.windows)) +
           tail + fmt("; the lead's %.1f s (the first kernels, traced whole: the warm-up) are left out "
                      "of them, as not the steady state",
                      t.lead.read_s);
  if (t.lead_in_figures && t.later.read_s > 0)
    return head + fmt("the lead's %.1f s counted as traced, whole; of the %.1f s after it %.1f s read "
                      "in %lld windows, scaled by %.2f; %.1f s of %.1f s read in all",
                      t.lead.read_s, t.later.span_s, t.later.read_s,
                      static_cast<long long>(t.later.windows),
                      t.later.read_s > 0 ? t.later.span_s / t.later.read_s : 1.0, t.read_s, t.span_s) +
           tail;
  return head + fmt("%.1f s of %.1f s read in %lld windows%s", t.read_s, t.span_s,
                    static_cast<long long>(t.windows),
                    t.lead_in_figures ? " (the lead alone: no later window held a step)" : "") +
         tail;
}

}  // namespace

std::vector<std::string> gpu_trace_losses(const GpuTraceSummary& g) {
  using detail::fmt;
  std::vector<std::string> out;
  if (g.dropped > 0)
    out.push_back(fmt("%llu GPU activity records were dropped: the GPU numbers are low bounds",
                      static_cast<unsigned long long>(g.dropped)));
  if (g.records_bad_timestamps > 0)
    out.push_back(fmt("%llu GPU activity records were left out for timestamps of 0 or an end "
                      "before the start (CUPTI could not time them): the GPU numbers are low "
                      "bounds",
                      static_cast<unsigned long long>(g.records_bad_timestamps)));
  if (g.buffers_incomplete > 0)
    out.push_back(fmt("%llu CUPTI buffers ended at an incomplete record, losing the records behind "
                      "it (a forced flush, at the end or a tick after a sampled window closed, "
                      "handed them over while a GPU activity in them still ran): the GPU numbers "
                      "are low bounds",
                      static_cast<unsigned long long>(g.buffers_incomplete)));
  if (g.sampled) {
    out.push_back(sampled_line(*g.sampled));
    if (g.sampled->windows_without_records > 0)
      out.push_back(fmt("%lld sampled windows had launch calls but no kernel, copy or memset "
                        "record (CUPTI did not record again after a window closed): left out",
                        static_cast<long long>(g.sampled->windows_without_records)));
  }
  return out;
}

std::string describe_tracing(const TracingMode& t) {
  using detail::fmt;
  std::string out;
  switch (t.runtime_calls) {
    case TracingMode::Calls::selected:
      out = fmt("runtime calls: the %u the summary reads", t.runtime_callbacks);
      break;
    case TracingMode::Calls::all: out = "runtime calls: all"; break;
    case TracingMode::Calls::none: out = "runtime calls: none"; break;
  }
  out += t.driver_calls == TracingMode::Calls::selected
             ? fmt("; driver launches: %u calls", t.driver_callbacks)
             : std::string("; driver launches: not traced");
  out += !t.sync_records          ? "; sync records: none (the runtime's sync calls carry the waits)"
         : t.completed_syncs_only ? "; sync records: completed queries only"
                                  : "; sync records: every query";
  if (t.sampling.sampled()) out += "; sampled: " + describe_sampling(t.sampling);
  if (!t.note.empty()) out += " (" + t.note + ")";
  return out;
}

ActiveWindows kernel_active_windows(const GpuActivity& a) {
  ActiveWindows out;
  if (a.kernels.empty()) return out;
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
  std::int64_t last = std::numeric_limits<std::int64_t>::min();
  for (const KernelRecord& k : a.kernels) {
    first = std::min(first, k.start_ns);
    last = std::max(last, k.end_ns);
  }
  // The copy that fed the first kernel (its batch) belongs to training: the last host-to-device
  // copy that ended within a second before it.
  const MemcpyRecord* feeding = nullptr;
  for (const MemcpyRecord& m : a.memcpys)
    if (m.kind == MemcpyKind::h2d && m.end_ns <= first && m.end_ns >= first - 1'000'000'000 &&
        (feeding == nullptr || m.end_ns > feeding->end_ns))
      feeding = &m;
  if (feeding != nullptr) first = feeding->start_ns;
  std::int64_t begin = first, end = last;
  std::vector<TimeWindow> activity;
  const auto add = [&](const auto& records) {
    for (const auto& r : records) {
      begin = std::min(begin, r.start_ns);
      end = std::max(end, r.end_ns);
      activity.push_back({std::max(r.start_ns, first), std::min(r.end_ns, last)});
    }
  };
  add(a.kernels);
  add(a.memcpys);
  add(a.memsets);
  add(a.runtime);
  add(a.syncs);
  // Under sampled tracing the stretches between windows have no records: unknown, not silent.
  if (a.sampled())
    for (std::size_t i = 1; i < a.traced_windows.size(); ++i)
      activity.push_back({std::max(a.traced_windows[i - 1].end_ns, first),
                          std::min(a.traced_windows[i].begin_ns, last)});
  out.before_ns = first - begin;
  out.after_ns = end - last;
  const std::int64_t span = last - first;
  const auto long_enough = [span](std::int64_t gap) {
    return gap >= kIdleLeftOutNs && static_cast<double>(gap) >= kIdleLeftOutShare * static_cast<double>(span);
  };
  std::int64_t quiet_from = first;  // where the current silence began
  for (const TimeWindow& i : merged_windows(std::move(activity))) {
    if (i.begin_ns > quiet_from && long_enough(i.begin_ns - quiet_from))
      out.idle.push_back({quiet_from, i.begin_ns});
    quiet_from = std::max(quiet_from, i.end_ns);
  }
  std::int64_t at = first;
  for (const StepWindow& gap : out.idle) {
    out.windows.push_back({at, gap.begin_ns});
    at = gap.end_ns;
  }
  out.windows.push_back({at, last});
  return out;
}

namespace {

// Sorts and merges `windows` into the time base; returns how many steps they were (overlapping
// steps are merged for the time base, but each one is still a step).
std::int64_t merge_step_windows(std::vector<StepWindow>& windows) {
  const std::size_t given = std::count_if(windows.begin(), windows.end(), [](const StepWindow& x) {
    return x.end_ns > x.begin_ns;
  });
  windows = merged_windows(std::move(windows), true);
  return static_cast<std::int64_t>(given);
}

// Whether a time falls in one of the merged, sorted step windows.
class InStep {
 public:
  explicit InStep(const std::vector<StepWindow>& windows) : windows_(windows) {}
  bool operator()(std::int64_t t) const { return windows_cover(windows_, t); }

 private:
  const std::vector<StepWindow>& windows_;
};

void summarize_kernels(const GpuActivity& a, const InStep& in_step, double steps,
                       GpuTraceSummary& s) {
  std::vector<double> kernel_us;
  std::set<std::uint32_t> graphs;
  std::set<std::pair<std::uint32_t, std::uint32_t>> replays;  // (graph, launch's correlation)
  for (const KernelRecord& k : a.kernels) {
    if (!in_step(k.start_ns)) continue;
    kernel_us.push_back(static_cast<double>(k.end_ns - k.start_ns) / 1e3);
    if (k.name.str().starts_with("triton_")) ++s.triton_kernels;
    if (k.graph_id == 0) continue;
    ++s.graph_kernels;
    graphs.insert(k.graph_id);
    replays.emplace(k.graph_id, k.correlation_id);
  }
  s.graphs = static_cast<std::int64_t>(graphs.size());
  s.graph_replays = static_cast<std::int64_t>(replays.size());
  s.kernels = static_cast<std::int64_t>(kernel_us.size());
  s.kernels_per_step = static_cast<double>(s.kernels) / steps;
  s.mean_kernel_us = mean(kernel_us);
  s.p50_kernel_us = percentile(kernel_us, 0.50);
  s.p95_kernel_us = percentile(kernel_us, 0.95);
}

// The GPU busy (kernels, copies, memsets) within the steps, and the launch gaps between its
// pieces inside each step.
void summarize_busy(const GpuActivity& a, const std::vector<StepWindow>& windows,
                    std::int64_t wall_ns, GpuTraceSummary& s) {
  std::vector<TimeWindow> busy;
  busy.reserve(a.kernels.size() + a.memcpys.size() + a.memsets.size());
  for (const KernelRecord& k : a.kernels) busy.push_back({k.start_ns, k.end_ns});
  for (const MemcpyRecord& m : a.memcpys) busy.push_back({m.start_ns, m.end_ns});
  for (const MemsetRecord& m : a.memsets) busy.push_back({m.start_ns, m.end_ns});
  const std::vector<TimeWindow> merged = merged_windows(std::move(busy));
  std::int64_t busy_ns = 0, gap_ns = 0;
  std::vector<double> gap_us;
  for (const StepWindow& w : windows) {
    std::int64_t prev_end = -1;
    bool first = true;
    for_each_piece(merged, w, [&](const TimeWindow& piece) {
      busy_ns += piece.end_ns - piece.begin_ns;
      if (!first) {
        gap_ns += piece.begin_ns - prev_end;
        gap_us.push_back(static_cast<double>(piece.begin_ns - prev_end) / 1e3);
      }
      first = false;
      prev_end = piece.end_ns;
    });
  }
  s.gpu_busy_s = static_cast<double>(busy_ns) / 1e9;
  s.gpu_busy_ratio = static_cast<double>(busy_ns) / static_cast<double>(wall_ns);
  s.launch_gaps = static_cast<std::int64_t>(gap_us.size());
  s.mean_gap_us = mean(gap_us);
  s.p95_gap_us = percentile(gap_us, 0.95);
  s.gap_share = static_cast<double>(gap_ns) / static_cast<double>(wall_ns);
}

// The time inside the steps covered by `intervals`, merged.
std::int64_t in_steps_ns(std::vector<TimeWindow> intervals, const std::vector<StepWindow>& windows) {
  return covered_ns(merged_windows(std::move(intervals)), windows);
}

// NCCL's kernels apart from the rest: a rank waiting in an all-reduce runs one, so the device's
// own work is what ran beside or without them.
void summarize_collectives(const GpuActivity& a, const std::vector<StepWindow>& windows,
                           std::int64_t wall_ns, GpuTraceSummary& s) {
  std::vector<TimeWindow> collective, other;
  for (const KernelRecord& k : a.kernels)
    (is_collective_kernel(k.name.str()) ? collective : other).push_back({k.start_ns, k.end_ns});
  if (collective.empty()) return;
  for (const MemcpyRecord& m : a.memcpys) other.push_back({m.start_ns, m.end_ns});
  for (const MemsetRecord& m : a.memsets) other.push_back({m.start_ns, m.end_ns});
  const std::int64_t collective_ns = in_steps_ns(std::move(collective), windows);
  const std::int64_t other_ns = in_steps_ns(std::move(other), windows);
  s.collective_s = static_cast<double>(collective_ns) / 1e9;
  s.collective_share = static_cast<double>(collective_ns) / static_cast<double>(wall_ns);
  s.collective_alone_share =
      std::max(0.0, s.gpu_busy_ratio - static_cast<double>(other_ns) / static_cast<double>(wall_ns));
}

// Each device's busy time, where the steps' work ran on more than one: the union over every
// device reads busy while one of them is, however idle the others.
void summarize_devices(const GpuActivity& a, const InStep& in_step,
                       const std::vector<StepWindow>& windows, std::int64_t wall_ns,
                       GpuTraceSummary& s) {
  std::map<std::uint32_t, std::vector<TimeWindow>> by_device;
  std::map<std::uint32_t, std::int64_t> kernels;
  for (const KernelRecord& k : a.kernels) {
    by_device[k.device].push_back({k.start_ns, k.end_ns});
    if (in_step(k.start_ns)) ++kernels[k.device];
  }
  for (const MemcpyRecord& m : a.memcpys) by_device[m.device].push_back({m.start_ns, m.end_ns});
  for (const MemsetRecord& m : a.memsets) by_device[m.device].push_back({m.start_ns, m.end_ns});
  if (by_device.size() < 2) return;
  for (auto& [device, intervals] : by_device) {
    GpuTraceSummary::DeviceBusy d;
    d.device = device;
    d.kernels = kernels[device];
    const std::int64_t ns = in_steps_ns(std::move(intervals), windows);
    d.busy_s = static_cast<double>(ns) / 1e9;
    d.busy_ratio = static_cast<double>(ns) / static_cast<double>(wall_ns);
    s.devices.push_back(d);
  }
}

// Kernels and memsets only: copies run on the copy engines beside the step's kernels (and a
// pageable copy is the host's time, which h2d_submit counts).
double device_s_per_step(const GpuActivity& a, const std::vector<TimeWindow>& stretches,
                         double steps) {
  std::vector<TimeWindow> compute;
  for (const KernelRecord& k : a.kernels) compute.push_back({k.start_ns, k.end_ns});
  for (const MemsetRecord& m : a.memsets) compute.push_back({m.start_ns, m.end_ns});
  const std::int64_t all_ns = covered_ns(merged_windows(std::move(compute)), stretches);
  return static_cast<double>(all_ns) / 1e9 / steps;
}

double h2d_share(const GpuActivity& a, const std::vector<StepWindow>& windows,
                 std::int64_t wall_ns) {
  std::vector<TimeWindow> h2d;
  for (const MemcpyRecord& m : a.memcpys)
    if (m.kind == MemcpyKind::h2d) h2d.push_back({m.start_ns, m.end_ns});
  const std::int64_t h2d_ns = in_steps_ns(std::move(h2d), windows);
  return static_cast<double>(h2d_ns) / static_cast<double>(wall_ns);
}

// The host's waits for the device within the steps. A synchronous call and the synchronization
// record CUPTI makes for it share a correlation id: the call is counted (its duration is what
// the host waited) and the record skipped.
class SyncCount {
 public:
  SyncCount(const GpuActivity& a, const InStep& in_step, GpuTraceSummary& s)
      : a_(a), in_step_(in_step), s_(s) {}
  void count_runtime_calls();
  void count_sync_records();
  void count_pageable_copies();
  void count_syncs_after_h2d();
  void count_launches_without_call();
  std::int64_t sync_ns() const { return sync_ns_; }
  std::int64_t launch_ns() const { return launch_ns_; }

 private:
  const GpuActivity& a_;
  const InStep& in_step_;
  GpuTraceSummary& s_;
  std::unordered_set<std::uint32_t> counted_;
  std::unordered_map<std::uint32_t, const RuntimeApiRecord*> call_of_;  // by correlation id
  std::unordered_set<std::uint32_t> launch_ids_;  // correlation ids of every launch call
  std::unordered_map<std::uint32_t, std::vector<std::int64_t>> sync_calls_by_thread_;  // starts
  std::int64_t sync_ns_ = 0, launch_ns_ = 0;
};

void SyncCount::count_runtime_calls() {
  for (const RuntimeApiRecord& r : a_.runtime) {
    // Before the step filter: a kernel that runs in a step may have been launched before it.
    if (r.correlation_id != 0 && is_launch_runtime_call(r.name)) launch_ids_.insert(r.correlation_id);
    if (!in_step_(r.start_ns)) continue;
    if (r.correlation_id != 0) call_of_.emplace(r.correlation_id, &r);
    if (is_synchronous_runtime_call(r.name)) {
      sync_calls_by_thread_[r.thread_id].push_back(r.start_ns);
      ++s_.syncs;
      ++s_.syncs_by_call[std::string(base_name(r.name))];
      sync_ns_ += r.end_ns - r.start_ns;
      if (r.correlation_id != 0) counted_.insert(r.correlation_id);
    } else if (is_launch_runtime_call(r.name)) {
      ++s_.launch_calls;
      launch_ns_ += r.end_ns - r.start_ns;
    }
    if (r.domain == ApiDomain::driver && base_name(r.name).starts_with("cuLaunch"))
      ++s_.driver_launch_calls;
  }
}

void SyncCount::count_sync_records() {
  for (const SyncRecord& r : a_.syncs) {
    if (r.type == SyncType::stream_wait_event || !in_step_(r.start_ns)) continue;
    if (r.correlation_id != 0 && counted_.contains(r.correlation_id)) continue;
    const auto call = r.correlation_id != 0 ? call_of_.find(r.correlation_id) : call_of_.end();
    // CUPTI also makes a synchronization record for a cudaEventQuery that finds its event done
    // (seen on an H100, CUPTI 13): a query never blocks the host, and it is how feedscope's own
    // copy engine and step fence wait.
    if (call != call_of_.end() && is_query_runtime_call(call->second->name)) continue;
    ++s_.syncs;
    ++s_.syncs_by_call[call != call_of_.end() ? std::string(base_name(call->second->name))
                                              : sync_kind_name(r.type)];
    sync_ns_ += r.end_ns - r.start_ns;
  }
}

// An "async" copy into pageable memory returns only once the bytes are there, so after all the
// work queued before it: torch's .item() and .cpu() block the host here, before any sync call.
void SyncCount::count_pageable_copies() {
  for (auto& [thread, starts] : sync_calls_by_thread_) std::sort(starts.begin(), starts.end());
  for (const MemcpyRecord& m : a_.memcpys) {
    if (m.kind != MemcpyKind::d2h || m.dst != MemoryKind::pageable) continue;
    const auto call = call_of_.find(m.correlation_id);
    if (call == call_of_.end() || counted_.contains(m.correlation_id) ||
        !base_name(call->second->name).starts_with("cudaMemcpy") ||
        is_synchronous_runtime_call(call->second->name))
      continue;
    counted_.insert(m.correlation_id);
    const RuntimeApiRecord& r = *call->second;
    sync_ns_ += r.end_ns - r.start_ns;
    // .item() is the copy and then a stream sync: one sync of the loop's, its wait in the copy.
    const std::vector<std::int64_t>& syncs = sync_calls_by_thread_[r.thread_id];
    const auto next_sync = std::lower_bound(syncs.begin(), syncs.end(), r.end_ns);
    if (next_sync != syncs.end() && *next_sync - r.end_ns <= 1'000'000) continue;
    ++s_.syncs;
    ++s_.syncs_by_call[std::string(base_name(r.name)) + " to pageable memory"];
  }
}

// torch's `.to(device)` without non_blocking: the copy (cudaMemcpyAsync, which from pageable
// memory returns once the bytes are staged) and then a stream sync on the same thread, which waits
// for everything queued before it.
void SyncCount::count_syncs_after_h2d() {
  std::unordered_map<std::uint32_t, std::vector<std::int64_t>> copy_ends_by_thread;
  for (const MemcpyRecord& m : a_.memcpys) {
    if (m.kind != MemcpyKind::h2d) continue;
    const auto call = call_of_.find(m.correlation_id);
    if (call != call_of_.end())
      copy_ends_by_thread[call->second->thread_id].push_back(call->second->end_ns);
  }
  if (copy_ends_by_thread.empty()) return;
  for (auto& [thread, ends] : copy_ends_by_thread) std::sort(ends.begin(), ends.end());
  for (const RuntimeApiRecord& r : a_.runtime) {
    if (!in_step_(r.start_ns) || !is_synchronous_runtime_call(r.name) ||
        base_name(r.name).starts_with("cudaMemcpy"))
      continue;
    const auto ends = copy_ends_by_thread.find(r.thread_id);
    if (ends == copy_ends_by_thread.end()) continue;
    auto after = std::upper_bound(ends->second.begin(), ends->second.end(), r.start_ns);
    if (after == ends->second.begin() || r.start_ns - *std::prev(after) > 1'000'000) continue;
    ++s_.syncs_after_h2d;
    s_.sync_after_h2d_wait_s += static_cast<double>(r.end_ns - r.start_ns) / 1e9;
  }
}

// A kernel is launched by a host call: where the trace has none for it (a launch API it did not
// record, a CUPTI that records only some calls), the kernel stands for its launch, so a
// launch-bound step's launches are not undercounted. A graph's kernels share their launch's id.
void SyncCount::count_launches_without_call() {
  for (const KernelRecord& k : a_.kernels) {
    if (!in_step_(k.start_ns)) continue;
    if (k.correlation_id != 0 && launch_ids_.contains(k.correlation_id)) continue;
    ++s_.launches_without_call;
  }
}

void summarize_syncs(const GpuActivity& a, const InStep& in_step, double steps,
                     GpuTraceSummary& s) {
  SyncCount count(a, in_step, s);
  count.count_runtime_calls();
  count.count_sync_records();
  count.count_pageable_copies();
  count.count_syncs_after_h2d();
  s.syncs_per_step = static_cast<double>(s.syncs) / steps;
  s.sync_wait_s = static_cast<double>(count.sync_ns()) / 1e9;
  if (s.launch_calls > 0)
    s.mean_launch_call_us =
        static_cast<double>(count.launch_ns()) / 1e3 / static_cast<double>(s.launch_calls);
  count.count_launches_without_call();
  s.launch_calls += s.launches_without_call;
}

// Copies that started in the stretches (the first step's start to the last step's end), by
// direction and host memory, with the host-to-device rates.
void summarize_copies(const GpuActivity& a, const std::vector<TimeWindow>& stretches, double steps,
                      GpuTraceSummary& s) {
  std::int64_t pinned_ns = 0, pageable_ns = 0;
  for (const MemcpyRecord& m : a.memcpys) {
    if (!windows_cover(stretches, m.start_ns)) continue;
    const std::int64_t ns = std::max<std::int64_t>(m.end_ns - m.start_ns, 0);
    if (m.kind == MemcpyKind::d2h) {
      s.d2h_bytes += m.bytes;
    } else if (m.kind == MemcpyKind::h2d) {
      if (m.src == MemoryKind::pinned) {
        s.h2d_pinned_bytes += m.bytes;
        pinned_ns += ns;
      } else if (m.src == MemoryKind::pageable) {
        s.h2d_pageable_bytes += m.bytes;
        pageable_ns += ns;
      } else {
        s.h2d_other_bytes += m.bytes;
      }
    }
  }
  // Bytes per nanosecond is GB/s.
  if (pinned_ns > 0)
    s.h2d_pinned_gbps = static_cast<double>(s.h2d_pinned_bytes) / static_cast<double>(pinned_ns);
  if (pageable_ns > 0)
    s.h2d_pageable_gbps =
        static_cast<double>(s.h2d_pageable_bytes) / static_cast<double>(pageable_ns);
  s.h2d_pageable_s_per_step = static_cast<double>(pageable_ns) / 1e9 / steps;
}

}  // namespace

GpuTraceSummary summarize_steps(const GpuActivity& a, const StepsRead& read) {
  GpuTraceSummary s;
  s.dropped = a.dropped;
  s.records_bad_timestamps = a.bad_timestamps;
  s.buffers_incomplete = a.incomplete_buffers;
  s.tracing = a.tracing;
  s.steps = std::llround(read.steps);
  const std::vector<StepWindow>& windows = read.windows;
  if (windows.empty() || read.steps <= 0) return s;
  const std::int64_t wall_ns = windows_ns(windows);
  s.step_wall_s = static_cast<double>(wall_ns) / 1e9;
  const double steps = read.steps;
  const InStep in_step(windows);

  summarize_kernels(a, in_step, steps, s);
  summarize_busy(a, windows, wall_ns, s);
  summarize_collectives(a, windows, wall_ns, s);
  summarize_devices(a, in_step, windows, wall_ns, s);
  s.device_s_per_step = device_s_per_step(a, read.stretches, steps);
  s.h2d_share = h2d_share(a, windows, wall_ns);
  summarize_syncs(a, in_step, steps, s);
  summarize_copies(a, read.stretches, steps, s);
  return s;
}

GpuTraceSummary summarize_gpu_trace(const GpuActivity& a, std::vector<StepWindow> windows) {
  StepsRead read;
  read.steps = static_cast<double>(merge_step_windows(windows));
  if (!windows.empty()) read.stretches = {{windows.front().begin_ns, windows.back().end_ns}};
  read.windows = std::move(windows);
  return summarize_steps(a, read);
}

namespace {

GpuTraceSummary summarize_windows(const GpuActivity& a, std::vector<StepWindow> windows) {
  return a.sampled() ? summarize_sampled(a, windows) : summarize_gpu_trace(a, std::move(windows));
}

}  // namespace

GpuTraceSummary summarize_measured_steps(const GpuActivity& activity,
                                         const std::vector<StepWindow>& steps,
                                         std::int64_t steps_complete_until_ns,
                                         std::int64_t measured_begin_ns) {
  const std::int64_t complete_until = std::min(steps_complete_until_ns, activity.kept_until_ns);
  std::vector<StepWindow> windows;
  for (const StepWindow& w : steps)
    if (w.end_ns <= complete_until) windows.push_back(w);
  GpuTraceSummary s = summarize_windows(activity, std::move(windows));
  s.records_not_kept = activity.not_kept;
  if (complete_until != std::numeric_limits<std::int64_t>::max())
    s.covered_until_s =
        static_cast<double>(std::max<std::int64_t>(complete_until - measured_begin_ns, 0)) / 1e9;
  return s;
}

GpuTraceSummary summarize_program_activity(const GpuActivity& activity, const ActiveWindows& active) {
  GpuTraceSummary s = summarize_windows(activity, active.windows);
  s.records_not_kept = activity.not_kept;
  return s;
}

}  // namespace feedscope
