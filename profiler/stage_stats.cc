#include "profiler/stage_stats.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

namespace feedscope {

std::vector<StageStats> compute_stage_stats(const std::vector<Span>& spans, std::int64_t begin_ns,
                                            std::int64_t end_ns) {
  std::array<std::vector<double>, kStageCount> durations_ms;
  std::array<std::set<std::uint16_t>, kStageCount> stage_lanes;
  for (const Span& span : spans) {
    if (span.begin_ns < begin_ns || span.begin_ns >= end_ns) continue;
    const auto s = static_cast<std::size_t>(span.stage);
    durations_ms[s].push_back(static_cast<double>(span.end_ns - span.begin_ns) / 1e6);
    stage_lanes[s].insert(span.lane);
  }
  const double wall_s = static_cast<double>(std::max<std::int64_t>(end_ns - begin_ns, 1)) / 1e9;
  std::vector<StageStats> out;
  for (int i = 0; i < kStageCount; ++i) {
    const auto s = static_cast<std::size_t>(i);
    out.push_back(stats_of_durations(std::string(kStageNames[s]), durations_ms[s],
                                     static_cast<int>(stage_lanes[s].size()), wall_s));
  }
  return out;
}

StageStats stats_of_durations(std::string name, const std::vector<double>& durations_ms, int lanes,
                              double wall_s) {
  StageStats st;
  st.name = std::move(name);
  st.count = static_cast<std::int64_t>(durations_ms.size());
  st.lanes = lanes;
  if (durations_ms.empty()) return st;
  double sum_ms = 0;
  for (double v : durations_ms) sum_ms += v;
  st.busy_s = sum_ms / 1e3;
  st.mean_ms = sum_ms / static_cast<double>(durations_ms.size());
  st.p50_ms = percentile(durations_ms, 0.50);
  st.p95_ms = percentile(durations_ms, 0.95);
  st.share = st.busy_s / (wall_s * std::max(1, lanes));
  return st;
}

const StageStats* find_stage(const std::vector<StageStats>& stages, Stage stage) {
  const std::string_view name = stage_name(stage);
  for (const StageStats& st : stages)
    if (st.name == name) return &st;
  return nullptr;
}

}  // namespace feedscope
