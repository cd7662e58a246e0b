#include "exporters/detail/rank_json.h"

namespace feedscope::detail {

namespace {

using ojson = nlohmann::ordered_json;

template <typename T>
ojson or_null(const std::optional<T>& v) {
  return v ? ojson(*v) : ojson(nullptr);
}

template <typename T>
std::optional<T> optional_of(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

// A series with gaps: null where nothing was measured.
ojson optionals_json(const std::vector<std::optional<double>>& values) {
  ojson out = ojson::array();
  for (const std::optional<double>& v : values) out.push_back(or_null(v));
  return out;
}

ojson recommendation_json(const std::optional<Recommendation>& r) {
  if (!r) return nullptr;
  return {{"action", r->action},
          {"setting", r->setting},
          {"predicted_speedup", or_null(r->predicted_speedup)},
          {"basis", r->basis}};
}

std::optional<Recommendation> recommendation_from(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  Recommendation r;
  r.action = j.value("action", std::string());
  r.setting = j.value("setting", std::string());
  r.predicted_speedup = optional_of<double>(j, "predicted_speedup");
  r.basis = j.value("basis", std::string());
  return r;
}

}  // namespace

ojson ranks_to_json(const std::vector<RankSummary>& ranks) {
  ojson out = ojson::array();
  for (const RankSummary& r : ranks)
    out.push_back({{"rank", or_null(r.rank)},
                   {"local_rank", or_null(r.local_rank)},
                   {"node_rank", or_null(r.node_rank)},
                   {"rank_source", r.rank_source.empty() ? ojson(nullptr) : ojson(r.rank_source)},
                   {"host", r.host},
                   {"pid", r.pid},
                   {"device", r.device},
                   {"bottleneck", r.bottleneck.empty() ? ojson(nullptr) : ojson(r.bottleneck)},
                   {"verdict", r.verdict},
                   {"samples_per_s", or_null(r.samples_per_s)},
                   {"data_stall_ratio", or_null(r.data_stall_ratio)},
                   {"step_ms", or_null(r.step_ms)},
                   {"period_ms", or_null(r.period_ms)},
                   {"num_workers", r.num_workers},
                   {"worker_busy", or_null(r.worker_busy)},
                   {"worker_run_wait", or_null(r.worker_run_wait)},
                   {"main_thread_busy", or_null(r.main_thread_busy)},
                   {"cpu_cores", or_null(r.cpu_cores)},
                   {"gpu_busy", or_null(r.gpu_busy)},
                   {"collective_wait_ratio", or_null(r.collective_wait_ratio)},
                   {"collective_wait_source",
                    r.collective_wait_source.empty() ? ojson(nullptr) : ojson(r.collective_wait_source)},
                   {"advice", recommendation_json(r.advice)},
                   {"first_seen_s", r.first_seen_s},
                   {"last_seen_s", r.last_seen_s},
                   {"ended", r.ended.empty() ? ojson(nullptr) : ojson(r.ended)},
                   {"timeline", {{"bucket_s", r.timeline_bucket_s},
                                 {"workers_cores", r.timeline_workers_cores},
                                 {"main_thread_busy", r.timeline_main_thread_busy},
                                 {"data_stall", optionals_json(r.timeline_data_stall)}}}});
  return out;
}

ojson straggler_to_json(const std::optional<Straggler>& s) {
  if (!s) return nullptr;
  return {{"rank", or_null(s->rank)},
          {"host", s->host},
          {"pid", s->pid},
          {"bottleneck", s->bottleneck},
          {"evidence", s->evidence}};
}

ojson job_to_json(const std::optional<JobSummary>& job) {
  if (!job) return nullptr;
  return {{"id", job->id.empty() ? ojson(nullptr) : ojson(job->id)},
          {"world_size", or_null(job->world_size)},
          {"hosts", job->hosts},
          {"begin_unix_s", or_null(job->begin_unix_s)},
          {"end_unix_s", or_null(job->end_unix_s)},
          {"notes", job->notes},
          {"pattern", job->pattern.empty() ? ojson(nullptr) : ojson(job->pattern)}};
}

std::vector<RankSummary> ranks_from_json(const nlohmann::json& ranks) {
  std::vector<RankSummary> out;
  if (!ranks.is_array()) throw std::runtime_error("ranks: not a list");
  for (const nlohmann::json& j : ranks) {
    RankSummary r;
    r.rank = optional_of<int>(j, "rank");
    r.local_rank = optional_of<int>(j, "local_rank");
    r.node_rank = optional_of<int>(j, "node_rank");
    r.rank_source = optional_of<std::string>(j, "rank_source").value_or("");
    r.host = j.value("host", std::string());
    r.pid = j.value("pid", 0);
    r.device = j.value("device", std::string());
    r.bottleneck = optional_of<std::string>(j, "bottleneck").value_or("");
    r.verdict = j.value("verdict", std::string());
    r.samples_per_s = optional_of<double>(j, "samples_per_s");
    r.data_stall_ratio = optional_of<double>(j, "data_stall_ratio");
    r.step_ms = optional_of<double>(j, "step_ms");
    r.period_ms = optional_of<double>(j, "period_ms");
    r.num_workers = j.value("num_workers", 0);
    r.worker_busy = optional_of<double>(j, "worker_busy");
    r.worker_run_wait = optional_of<double>(j, "worker_run_wait");
    r.main_thread_busy = optional_of<double>(j, "main_thread_busy");
    r.cpu_cores = optional_of<double>(j, "cpu_cores");
    r.gpu_busy = optional_of<double>(j, "gpu_busy");
    r.advice = recommendation_from(j.value("advice", nlohmann::json()));
    r.first_seen_s = j.value("first_seen_s", 0.0);
    r.last_seen_s = j.value("last_seen_s", 0.0);
    r.ended = optional_of<std::string>(j, "ended").value_or("");
    if (const auto t = j.find("timeline"); t != j.end() && t->is_object()) {
      r.timeline_bucket_s = t->value("bucket_s", 0.0);
      r.timeline_workers_cores = t->value("workers_cores", std::vector<double>{});
      r.timeline_main_thread_busy = t->value("main_thread_busy", std::vector<double>{});
      if (const auto d = t->find("data_stall"); d != t->end() && d->is_array())
        for (const nlohmann::json& v : *d)
          r.timeline_data_stall.push_back(v.is_number() ? std::optional(v.get<double>()) : std::nullopt);
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<JobSummary> job_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  JobSummary job;
  job.id = optional_of<std::string>(j, "id").value_or("");
  job.world_size = optional_of<int>(j, "world_size");
  job.hosts = j.value("hosts", std::vector<std::string>{});
  job.begin_unix_s = optional_of<double>(j, "begin_unix_s");
  job.end_unix_s = optional_of<double>(j, "end_unix_s");
  job.notes = j.value("notes", std::vector<std::string>{});
  job.pattern = optional_of<std::string>(j, "pattern").value_or("");
  return job;
}

}  // namespace feedscope::detail
