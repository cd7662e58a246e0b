#pragma once
// What a diagnosis reads, as JSON both ways and without loss: a recording (exporters/recording.h)
// stores the input `run` or `watch` handed the diagnosis and reads it back for a replay, so every
// field round-trips (doubles with 17 digits; a NaN or an infinity as the string "nan", "inf").
// report.json's writers (json_report.cc) are for people and leave fields out; these are not.
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "profiler/diagnosis.h"
#include "profiler/report.h"
#include "profiler/watch_diagnosis.h"

namespace feedscope::detail {

// A key that is missing or of the wrong type. what() names the file and the key's path
// ("input.json: run.utilization.series.cpu_system_ratio.mean: missing").
class JsonKeyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Read-only view of one JSON object, naming where it is for errors. Holds references: the JSON
// outlives it.
class JsonIn {
 public:
  JsonIn(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {}
  const nlohmann::json& json() const { return j_; }
  const std::string& where() const { return where_; }
  // The member `key`, which must be there (null is there). Throws JsonKeyError.
  JsonIn at(const std::string& key) const;
  // Array element i.
  JsonIn at(std::size_t i) const;
  bool is_null() const { return j_.is_null(); }
  std::size_t size() const;  // of an array; throws unless one

  double number() const;
  std::int64_t integer() const;
  std::uint64_t unsigned_integer() const;
  bool boolean() const;
  std::string text() const;
  [[noreturn]] void fail(const std::string& what) const;

 private:
  const nlohmann::json& j_;
  std::string where_;
};

// A double as JSON: a number, or "nan", "inf", "-inf".
nlohmann::ordered_json number_json(double v);
nlohmann::ordered_json optional_json(const std::optional<double>& v);
// The tree's loader worker churn (profiler/worker_churn.h), as input.json and report.json hold it.
nlohmann::ordered_json worker_churn_json(const std::optional<WorkerChurn>& churn);
// ProcessTreeSummary's main_thread_waits (sampler/thread_wait.h's looks), null where none.
nlohmann::ordered_json main_thread_waits_json(const std::optional<MainThreadWaits>& w);

// report.json's `samples` and the recordings' alike.
nlohmann::ordered_json samples_json(const SampleCosts& c);
SampleCosts samples_from(const JsonIn& j);

nlohmann::ordered_json diagnosis_input_json(const DiagnosisInput& in);  // gpu_trace left out
DiagnosisInput diagnosis_input_from(const JsonIn& j);
nlohmann::ordered_json watch_input_json(const WatchDiagnosisInput& in);  // gpu_trace left out
WatchDiagnosisInput watch_input_from(const JsonIn& j);

nlohmann::ordered_json gpu_trace_json(const GpuTraceSummary& g);
GpuTraceSummary gpu_trace_from(const JsonIn& j);

// Every field but the straggler (a job's, which a recording of one process has not).
nlohmann::ordered_json diagnosis_json(const Diagnosis& d);
Diagnosis diagnosis_from(const JsonIn& j);

}  // namespace feedscope::detail
