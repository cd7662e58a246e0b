#include "profiler/trace_sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <unordered_map>

#include "profiler/cuda_api_names.h"
#include "profiler/time_windows.h"

namespace feedscope {

namespace {

constexpr double kMaxSamplingSeconds = 3600;

// Seconds from the whole of `text`; nullopt for anything else.
std::optional<double> seconds_of(std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::int64_t ns_of(double seconds) { return std::llround(seconds * 1e9); }

std::string seconds_text(std::int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(ns) / 1e9);
  return buf;
}

// A device record's start and the launch that queued it.
struct DeviceStart {
  std::int64_t start_ns = 0;
  std::uint32_t correlation_id = 0;
  bool operator<(const DeviceStart& o) const { return start_ns < o.start_ns; }
};

template <typename Records>
void add_starts(const Records& records, std::vector<DeviceStart>& starts) {
  for (const auto& r : records) starts.push_back({r.start_ns, r.correlation_id});
}

// The first of a sorted `starts` in [begin, end), where there is one.
const DeviceStart* first_in(const std::vector<DeviceStart>& starts, std::int64_t begin, std::int64_t end) {
  const auto it = std::lower_bound(starts.begin(), starts.end(), DeviceStart{begin, 0});
  if (it == starts.end() || it->start_ns >= end) return nullptr;
  return &*it;
}

bool any_in(const std::vector<std::int64_t>& sorted, std::int64_t begin, std::int64_t end) {
  const auto it = std::lower_bound(sorted.begin(), sorted.end(), begin);
  return it != sorted.end() && *it < end;
}

}  // namespace

std::optional<TraceSampling> parse_trace_sampling(std::string_view spec, double lead_s,
                                                  std::string& why) {
  if (!(lead_s >= 0 && lead_s <= kMaxSamplingSeconds)) {
    why = "a lead of " + std::to_string(lead_s) + " s: give 0 to 3600 seconds";
    return std::nullopt;
  }
  if (spec == "whole") return TraceSampling{};
  const std::size_t slash = spec.find('/');
  const std::optional<double> window =
      slash == std::string_view::npos ? std::nullopt : seconds_of(spec.substr(0, slash));
  const std::optional<double> period =
      slash == std::string_view::npos ? std::nullopt : seconds_of(spec.substr(slash + 1));
  if (!window || !period || !(*window > 0) || !(*window < *period) ||
      *period > kMaxSamplingSeconds) {
    why = "\"" + std::string(spec) +
          "\": give \"whole\", or W/P in seconds with 0 < W < P <= 3600 (\"1/10\": 1 s traced of "
          "every 10)";
    return std::nullopt;
  }
  return TraceSampling{ns_of(*window), ns_of(*period), ns_of(lead_s)};
}

std::string trace_sampling_spec(const TraceSampling& s) {
  if (!s.sampled()) return "whole";
  return seconds_text(s.window_ns) + "/" + seconds_text(s.period_ns);
}

std::string describe_sampling(const TraceSampling& s) {
  if (!s.sampled()) return "whole";
  std::string out = seconds_text(s.window_ns) + " s of every " + seconds_text(s.period_ns) + " s";
  if (s.lead_ns > 0) out += " after the first " + seconds_text(s.lead_ns) + " s";
  return out;
}

bool traced_at(const TraceSampling& s, std::int64_t start_ns, std::int64_t t) {
  if (!s.sampled() || start_ns > t || t - start_ns < s.lead_ns) return true;
  const std::int64_t phase = ((t % s.period_ns) + s.period_ns) % s.period_ns;
  return phase < s.window_ns;
}

std::int64_t next_sampling_change(const TraceSampling& s, std::int64_t start_ns, std::int64_t t) {
  // Whole, or a lead that has not begun: nothing is due.
  if (!s.sampled() || start_ns > t) return std::numeric_limits<std::int64_t>::max();
  // The schedule changes only at the lead's end and at the windows' edges.
  const auto next_edge = [&s, start_ns](std::int64_t x) {
    const std::int64_t period_start = x - (((x % s.period_ns) + s.period_ns) % s.period_ns);
    std::int64_t next = std::numeric_limits<std::int64_t>::max();
    for (std::int64_t edge : {start_ns + s.lead_ns, period_start + s.window_ns,
                              period_start + s.period_ns, period_start + s.period_ns + s.window_ns})
      if (edge > x) next = std::min(next, edge);
    return next;
  };
  const bool now_traced = traced_at(s, start_ns, t);
  std::int64_t x = t;
  for (int i = 0; i < 4; ++i) {
    x = next_edge(x);
    if (traced_at(s, start_ns, x) != now_traced) break;
  }
  return x;
}

void TracedWindowLog::open(std::int64_t t) {
  if (is_open()) return;
  windows_.push_back({t, kOpen});
}

void TracedWindowLog::close(std::int64_t t) {
  if (!is_open()) return;
  windows_.back().end_ns = std::max(t, windows_.back().begin_ns);
}

bool TracedWindowLog::covers(std::int64_t t) const { return windows_cover(windows_, t); }

std::vector<TimeWindow> TracedWindowLog::take(std::int64_t now) {
  std::vector<TimeWindow> out;
  for (; first_untaken_ < windows_.size(); ++first_untaken_) {
    const TimeWindow& w = windows_[first_untaken_];
    const std::int64_t begin = std::max(w.begin_ns, taken_until_ns_);
    const std::int64_t end = std::min(w.end_ns, now);
    if (end > begin) out.push_back({begin, end});
    if (w.end_ns > now) break;  // still open, or closed after `now`: the rest next time
  }
  taken_until_ns_ = std::max(taken_until_ns_, now);
  return out;
}

std::vector<TimeWindow> traced_by_every_process(
    const std::vector<std::vector<TimeWindow>>& per_process) {
  std::vector<TimeWindow> lives, gaps;
  for (const std::vector<TimeWindow>& windows : per_process) {
    const std::vector<TimeWindow> w = merged_windows(windows);
    if (w.empty()) continue;
    lives.push_back({w.front().begin_ns, w.back().end_ns});
    for (std::size_t i = 1; i < w.size(); ++i) gaps.push_back({w[i - 1].end_ns, w[i].begin_ns});
  }
  return subtract_windows(merged_windows(std::move(lives)), merged_windows(std::move(gaps)));
}

ReadableWindows readable_windows(const GpuActivity& a) {
  std::vector<DeviceStart> device;
  std::vector<std::int64_t> launches;
  add_starts(a.kernels, device);
  add_starts(a.memcpys, device);
  add_starts(a.memsets, device);
  std::unordered_map<std::uint32_t, std::int64_t> call_end;  // by correlation id
  for (const RuntimeApiRecord& r : a.runtime) {
    if (is_launch_runtime_call(r.name)) launches.push_back(r.start_ns);
    if (r.correlation_id != 0) call_end.emplace(r.correlation_id, r.end_ns);
  }
  std::sort(device.begin(), device.end());
  std::sort(launches.begin(), launches.end());
  ReadableWindows out;
  for (const TimeWindow& w : merged_windows(a.traced_windows)) {
    if (const DeviceStart* first = first_in(device, w.begin_ns, w.end_ns)) {
      const auto call = call_end.find(first->correlation_id);
      const bool queued = call == call_end.end() || first->start_ns - call->second >= kQueuedBehindNs;
      out.windows.push_back({queued ? first->start_ns : w.begin_ns, w.end_ns});
    } else if (any_in(launches, w.begin_ns, w.end_ns)) {
      ++out.without_records;
    } else {
      out.windows.push_back(w);
    }
  }
  return out;
}

}  // namespace feedscope
