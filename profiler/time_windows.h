#pragma once
// Arithmetic on time windows ([begin_ns, end_ns), TimeWindow in gpu_activity.h): the union of a
// trace's records, the parts of them inside steps or traced windows, and what is left when some
// are cut out. Pure; shared by the GPU trace's summary (gpu_trace.cc), sampled tracing
// (trace_sampling.cc) and the activity's wire format (gpu_activity_wire.cc).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "profiler/gpu_activity.h"

namespace feedscope {

// The sorted, disjoint union of `windows` (any order; empty ones dropped): concurrent kernels on
// several streams count once. Windows that only touch are joined unless `keep_touching`
// (back-to-back steps stay two).
std::vector<TimeWindow> merged_windows(std::vector<TimeWindow> windows, bool keep_touching = false);

// `from` less `cut`, both sorted and disjoint.
std::vector<TimeWindow> subtract_windows(const std::vector<TimeWindow>& from,
                                         const std::vector<TimeWindow>& cut);

// The parts of `spans` (any order) inside `windows` (sorted, disjoint), sorted by begin.
std::vector<TimeWindow> intersect_windows(const std::vector<TimeWindow>& spans,
                                          const std::vector<TimeWindow>& windows);

// The summed length of sorted, disjoint windows.
std::int64_t windows_ns(const std::vector<TimeWindow>& windows);
// The length of the union of `windows` (any order, overlapping): time covered once however many
// of them cover it.
std::int64_t union_ns(std::vector<TimeWindow> windows);

// Calls fn(piece) for each piece of the sorted, disjoint `merged` that lies inside `w`, clipped
// to it.
template <typename Fn>
void for_each_piece(const std::vector<TimeWindow>& merged, const TimeWindow& w, Fn&& fn) {
  // Disjoint and sorted by begin means sorted by end too.
  auto it = std::upper_bound(merged.begin(), merged.end(), w.begin_ns,
                             [](std::int64_t t, const TimeWindow& m) { return t < m.end_ns; });
  for (; it != merged.end() && it->begin_ns < w.end_ns; ++it)
    fn(TimeWindow{std::max(it->begin_ns, w.begin_ns), std::min(it->end_ns, w.end_ns)});
}

// Whether `t` falls in one of the sorted, disjoint `windows`.
bool windows_cover(const std::vector<TimeWindow>& windows, std::int64_t t);

// The length of `merged` (sorted, disjoint) inside each of `windows` (sorted, disjoint), summed.
std::int64_t covered_ns(const std::vector<TimeWindow>& merged, const std::vector<TimeWindow>& windows);

}  // namespace feedscope
