#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "loader/span_recorder.h"
#include "profiler/report.h"
#include "sampler/statistics.h"

namespace feedscope {

// Statistics per stage over the window [begin_ns, end_ns): spans that start inside it count.
// One entry per stage name, in pipeline order; stages with no span have count 0. Exact, over spans
// held in memory: the reference for tests and benchmarks. A run digests its spans as they come
// instead (stage_accumulator.h), with the same numbers and p50/p95 within 0.79 %.
std::vector<StageStats> compute_stage_stats(const std::vector<Span>& spans, std::int64_t begin_ns,
                                            std::int64_t end_ns);

// One stage's statistics from its span durations; `share` is busy / (wall_s x lanes).
StageStats stats_of_durations(std::string name, const std::vector<double>& durations_ms, int lanes,
                              double wall_s);

const StageStats* find_stage(const std::vector<StageStats>& stages, Stage stage);
// The result points into `stages`: a temporary vector would leave it dangling.
const StageStats* find_stage(std::vector<StageStats>&& stages, Stage stage) = delete;

}  // namespace feedscope
