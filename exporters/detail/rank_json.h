#pragma once
// report.json's `ranks`, `job` and `diagnosis.straggler`, both ways: json_report writes them and
// `feedscope merge` (exporters/job_merge.h) reads a machine's back to judge the job as a whole.
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/report.h"

namespace feedscope::detail {

nlohmann::ordered_json ranks_to_json(const std::vector<RankSummary>& ranks);
nlohmann::ordered_json straggler_to_json(const std::optional<Straggler>& s);
nlohmann::ordered_json job_to_json(const std::optional<JobSummary>& job);

// Throws nlohmann::json::exception (a key of the wrong type) or std::runtime_error naming the key.
std::vector<RankSummary> ranks_from_json(const nlohmann::json& ranks);
std::optional<JobSummary> job_from_json(const nlohmann::json& job);

}  // namespace feedscope::detail
