#pragma once
// What the injection writes of a program under sampled tracing, made from the program's whole
// fabricated trace: the windows the schedule opens from `start_ns`, each kernel, copy and memset
// launched in one (their launch call's correlation), and the host calls and sync records that
// started in one; the rest counted in outside_windows, as detail/cupti_records.cc drops them.
#include <cstdint>
#include <unordered_set>

#include "profiler/gpu_activity.h"
#include "profiler/trace_sampling.h"

namespace feedscope::testing {

inline GpuActivity sampled_as(const GpuActivity& whole, const TraceSampling& sampling,
                              std::int64_t start_ns, std::int64_t end_ns) {
  GpuActivity out;
  TracingMode mode = whole.tracing.value_or(TracingMode{});
  mode.sampling = sampling;
  out.tracing = mode;
  TracedWindowLog log;
  for (std::int64_t t = start_ns; t < end_ns; t = next_sampling_change(sampling, start_ns, t)) {
    if (traced_at(sampling, start_ns, t)) log.open(t);
    else log.close(t);
  }
  log.close(end_ns);
  out.traced_windows = log.take(end_ns);
  std::unordered_set<std::uint32_t> launched;
  for (const RuntimeApiRecord& r : whole.runtime) {
    if (!log.covers(r.start_ns)) {
      ++out.outside_windows;
      continue;
    }
    out.runtime.push_back(r);
    launched.insert(r.correlation_id);
  }
  for (const SyncRecord& y : whole.syncs) {
    if (log.covers(y.start_ns)) out.syncs.push_back(y);
    else ++out.outside_windows;
  }
  for (const KernelRecord& k : whole.kernels)
    if (launched.contains(k.correlation_id)) out.kernels.push_back(k);
  for (const MemcpyRecord& m : whole.memcpys)
    if (launched.contains(m.correlation_id)) out.memcpys.push_back(m);
  for (const MemsetRecord& m : whole.memsets)
    if (launched.contains(m.correlation_id)) out.memsets.push_back(m);
  return out;
}

}  // namespace feedscope::testing
