#pragma once
// Sampled GPU tracing (TraceSampling, gpu_activity.h). The device's records are most of what
// tracing costs a launch-bound program (the kernels' records alone took 11 points of its speed on
// an H200), so a long job has them taken only in windows, and the summary reads those windows and
// scales to the whole. Here: the schedule, the log of the windows a recorder opened, the windows
// of several processes combined, and where in each window the records can be read. Pure, and
// clock-free, so tests drive them with fabricated times; shared by the CUPTI recorder
// (detail/cupti_records.cc, also in the injection library) and the summary (gpu_trace.cc).
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/gpu_activity.h"

namespace feedscope {

// `spec` "whole", or "W/P" in seconds ("1/10", "0.5/5"): W traced of every P, 0 < W < P <= 3600;
// `lead_s` (0 to 3600) seconds traced whole first. nullopt, with `why` naming the text, otherwise.
std::optional<TraceSampling> parse_trace_sampling(std::string_view spec, double lead_s,
                                                  std::string& why);
// "whole", or "1/10" (what parse_trace_sampling reads back).
std::string trace_sampling_spec(const TraceSampling& sampling);
// For people: "whole", or "1 s of every 10 s after the first 5 s".
std::string describe_sampling(const TraceSampling& sampling);

// Whether a process whose lead began at `start_ns` takes the device's records at `t`: always
// before and during the lead, then in the windows. The recorder starts the lead at the process's
// first kernel, so until one has run, `start_ns` is the largest time.
bool traced_at(const TraceSampling& sampling, std::int64_t start_ns, std::int64_t t);
// The first time after `t` at which traced_at changes; the largest time under whole tracing or
// before the lead began.
std::int64_t next_sampling_change(const TraceSampling& sampling, std::int64_t start_ns,
                                  std::int64_t t);

// The windows a recorder opened and closed, handed out by takes. Not thread-safe: the recorder
// calls it under its lock.
class TracedWindowLog {
 public:
  void open(std::int64_t t);   // nothing where a window is open
  void close(std::int64_t t);  // nothing where none is
  bool is_open() const { return !windows_.empty() && windows_.back().end_ns == kOpen; }
  // Whether `t` lies in a window opened so far, the open one included.
  bool covers(std::int64_t t) const;
  // The windows' time since the last take up to `now`, in order: the open one is cut at `now` and
  // goes on in the next take (GpuActivity::append merges the pieces again).
  std::vector<TimeWindow> take(std::int64_t now);

 private:
  static constexpr std::int64_t kOpen = std::numeric_limits<std::int64_t>::max();
  std::vector<TimeWindow> windows_;  // every window, in order; the open one ends at kOpen
  std::size_t first_untaken_ = 0;
  std::int64_t taken_until_ns_ = std::numeric_limits<std::int64_t>::min();
};

// The windows of several processes of one program together: a time is traced where every process
// alive then was tracing. A process's life is its first window's begin to its last window's end,
// so one that started late or ended early does not cut the others' windows. Sorted, disjoint.
std::vector<TimeWindow> traced_by_every_process(
    const std::vector<std::vector<TimeWindow>>& per_process);

// Where a sampled trace can be read: each window from where it was opened, so that the GPU idle at
// its head counts as idle (an input-bound program's GPU waits there). Work launched before a window
// opened runs into it with no record, though: where the window's first kernel, copy or memset
// started kQueuedBehindNs or more after its launch call returned (or its call is not in the trace),
// it waited behind such work, and the window is read from that record on. A window with launch
// calls but no device record (CUPTI did not record again after a window closed) is left out and
// counted, so a failed re-enable reads as "not traced", never as an idle GPU; a window with neither
// stays whole (the program left the GPU idle).
inline constexpr std::int64_t kQueuedBehindNs = 100'000;
struct ReadableWindows {
  std::vector<TimeWindow> windows;  // sorted, disjoint
  std::int64_t without_records = 0;   // windows left out: launches but no device record
};
ReadableWindows readable_windows(const GpuActivity& activity);

}  // namespace feedscope
