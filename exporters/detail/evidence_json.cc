#include "exporters/detail/evidence_json.h"

#include <cmath>
#include <limits>

namespace feedscope::detail {

namespace {

using ojson = nlohmann::ordered_json;

template <typename T, typename Fn>
ojson optional_of(const std::optional<T>& v, Fn&& to_json) {
  return v ? ojson(to_json(*v)) : ojson(nullptr);
}

template <typename T>
ojson optional_plain(const std::optional<T>& v) {
  return v ? ojson(*v) : ojson(nullptr);
}

std::optional<double> opt_number(const JsonIn& j) {
  return j.is_null() ? std::nullopt : std::optional<double>(j.number());
}
std::optional<int> opt_int(const JsonIn& j) {
  return j.is_null() ? std::nullopt : std::optional<int>(static_cast<int>(j.integer()));
}

std::vector<std::string> texts_from(const JsonIn& j) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < j.size(); ++i) out.push_back(j.at(i).text());
  return out;
}

std::vector<double> numbers_from(const JsonIn& j) {
  std::vector<double> out;
  for (std::size_t i = 0; i < j.size(); ++i) out.push_back(j.at(i).number());
  return out;
}

ojson numbers_json(const std::vector<double>& v) {
  ojson out = ojson::array();
  for (double x : v) out.push_back(number_json(x));
  return out;
}

// --- the loop's spans ---------------------------------------------------------------------------

ojson stage_json(const StageStats& s) {
  return {{"name", s.name},        {"count", s.count},
          {"busy_s", number_json(s.busy_s)},   {"mean_ms", number_json(s.mean_ms)},
          {"p50_ms", number_json(s.p50_ms)},   {"p95_ms", number_json(s.p95_ms)},
          {"share", number_json(s.share)},     {"lanes", s.lanes}};
}

StageStats stage_from(const JsonIn& j) {
  StageStats s;
  s.name = j.at("name").text();
  s.count = j.at("count").integer();
  s.busy_s = j.at("busy_s").number();
  s.mean_ms = j.at("mean_ms").number();
  s.p50_ms = j.at("p50_ms").number();
  s.p95_ms = j.at("p95_ms").number();
  s.share = j.at("share").number();
  s.lanes = static_cast<int>(j.at("lanes").integer());
  return s;
}

ojson utilization_json(const Utilization& u) {
  ojson series = ojson::object();
  for (const auto& [name, st] : u.series)
    series[name] = {{"mean", number_json(st.mean)}, {"p95", number_json(st.p95)}, {"max", number_json(st.max)}};
  ojson threads = ojson::object();
  for (const auto& [name, busy] : u.threads) threads[name] = number_json(busy);
  return {{"cpu_process_ratio", number_json(u.cpu_process_ratio)},
          {"cpu_system_ratio", number_json(u.cpu_system_ratio)},
          {"cpu_child_processes_cores", optional_json(u.cpu_child_processes_cores)},
          {"storage_read_bytes_per_s", optional_json(u.storage_read_bytes_per_s)},
          {"rss_bytes_peak", u.rss_bytes_peak},
          {"disk_read_bytes_per_s", optional_json(u.disk_read_bytes_per_s)},
          {"io_pressure_ratio", optional_json(u.io_pressure_ratio)},
          {"gpu_util_ratio", optional_json(u.gpu_util_ratio)},
          {"samples", u.samples},
          {"series", series},
          {"threads", threads},
          {"unavailable", u.unavailable}};
}

Utilization utilization_from(const JsonIn& j) {
  Utilization u;
  u.cpu_process_ratio = j.at("cpu_process_ratio").number();
  u.cpu_system_ratio = j.at("cpu_system_ratio").number();
  u.cpu_child_processes_cores = opt_number(j.at("cpu_child_processes_cores"));
  u.storage_read_bytes_per_s = opt_number(j.at("storage_read_bytes_per_s"));
  u.rss_bytes_peak = j.at("rss_bytes_peak").unsigned_integer();
  u.disk_read_bytes_per_s = opt_number(j.at("disk_read_bytes_per_s"));
  u.io_pressure_ratio = opt_number(j.at("io_pressure_ratio"));
  u.gpu_util_ratio = opt_number(j.at("gpu_util_ratio"));
  u.samples = j.at("samples").unsigned_integer();
  const JsonIn series = j.at("series");
  if (!series.json().is_object()) series.fail("not an object");
  for (const auto& [name, value] : series.json().items()) {
    const JsonIn s = series.at(name);
    u.series[name] = SeriesStats{s.at("mean").number(), s.at("p95").number(), s.at("max").number()};
  }
  const JsonIn threads = j.at("threads");
  if (!threads.json().is_object()) threads.fail("not an object");
  for (const auto& [name, value] : threads.json().items()) u.threads[name] = threads.at(name).number();
  const JsonIn unavailable = j.at("unavailable");
  if (!unavailable.json().is_object()) unavailable.fail("not an object");
  for (const auto& [name, value] : unavailable.json().items()) u.unavailable[name] = unavailable.at(name).text();
  return u;
}

ojson trials_json(const WhatIfTrials& t) {
  return {{"bigger_batch", t.bigger_batch},
          {"bigger_batch_step_s", optional_json(t.bigger_batch_step_s)},
          {"run_batch_step_s", optional_json(t.run_batch_step_s)},
          {"cpu_step_s", optional_json(t.cpu_step_s)},
          {"cpu_threads", t.cpu_threads},
          {"pinned_h2d_gbps", optional_json(t.pinned_h2d_gbps)},
          {"not_run", t.not_run}};
}

WhatIfTrials trials_from(const JsonIn& j) {
  WhatIfTrials t;
  t.bigger_batch = j.at("bigger_batch").integer();
  t.bigger_batch_step_s = opt_number(j.at("bigger_batch_step_s"));
  t.run_batch_step_s = opt_number(j.at("run_batch_step_s"));
  t.cpu_step_s = opt_number(j.at("cpu_step_s"));
  t.cpu_threads = static_cast<int>(j.at("cpu_threads").integer());
  t.pinned_h2d_gbps = opt_number(j.at("pinned_h2d_gbps"));
  t.not_run = texts_from(j.at("not_run"));
  return t;
}

ojson setting_json(const LoaderSetting& s) { return {{"num_workers", s.num_workers}, {"prefetch", s.prefetch}}; }
LoaderSetting setting_from(const JsonIn& j) {
  return {static_cast<int>(j.at("num_workers").integer()), static_cast<int>(j.at("prefetch").integer())};
}
ojson measured_json(const Measured& m) {
  return {{"batches_per_s", number_json(m.batches_per_s)}, {"stall", number_json(m.stall)}};
}
Measured measured_from(const JsonIn& j) { return {j.at("batches_per_s").number(), j.at("stall").number()}; }

ojson autotune_json(const AutotuneSummary& a) {
  ojson moves = ojson::array();
  for (const TunerMove& m : a.moves)
    moves.push_back({{"t_s", number_json(m.t_s)},
                     {"from", setting_json(m.from)},
                     {"to", setting_json(m.to)},
                     {"why", m.why},
                     {"before", measured_json(m.before)},
                     {"after", optional_of(m.after, measured_json)},
                     {"kept", m.kept}});
  return {{"moves", moves},
          {"final", setting_json(a.final)},
          {"most", setting_json(a.most)},
          {"ram_budget_bytes", a.ram_budget_bytes},
          {"tunes_workers", a.tunes_workers},
          {"tunes_prefetch", a.tunes_prefetch}};
}

AutotuneSummary autotune_from(const JsonIn& j) {
  AutotuneSummary a;
  const JsonIn moves = j.at("moves");
  for (std::size_t i = 0; i < moves.size(); ++i) {
    const JsonIn m = moves.at(i);
    TunerMove move;
    move.t_s = m.at("t_s").number();
    move.from = setting_from(m.at("from"));
    move.to = setting_from(m.at("to"));
    move.why = m.at("why").text();
    move.before = measured_from(m.at("before"));
    if (const JsonIn after = m.at("after"); !after.is_null()) move.after = measured_from(after);
    move.kept = m.at("kept").boolean();
    a.moves.push_back(std::move(move));
  }
  a.final = setting_from(j.at("final"));
  a.most = setting_from(j.at("most"));
  a.ram_budget_bytes = j.at("ram_budget_bytes").unsigned_integer();
  a.tunes_workers = j.at("tunes_workers").boolean();
  a.tunes_prefetch = j.at("tunes_prefetch").boolean();
  return a;
}

// --- the process tree ---------------------------------------------------------------------------

ProcessRole role_from(const JsonIn& j) {
  const std::string name = j.text();
  for (ProcessRole r : {ProcessRole::trainer, ProcessRole::loader_worker, ProcessRole::launcher,
                        ProcessRole::rank, ProcessRole::other})
    if (name == to_string(r)) return r;
  j.fail("unknown process role '" + name + "'");
}

std::optional<MainThreadWaits> main_thread_waits_from(const JsonIn& j) {
  if (j.is_null()) return std::nullopt;
  MainThreadWaits w;
  w.looks = j.at("looks").unsigned_integer();
  w.running = j.at("running").unsigned_integer();
  w.loader_queue = j.at("loader_queue").unsigned_integer();
  w.loader_thread = j.at("loader_thread").unsigned_integer();
  if (j.json().contains("loading")) w.loading = j.at("loading").unsigned_integer();
  w.other_wait = j.at("other_wait").unsigned_integer();
  if (j.json().contains("children")) w.children = j.at("children").unsigned_integer();
  if (j.json().contains("stack_looks")) w.stack_looks = j.at("stack_looks").unsigned_integer();
  return w;
}

ojson memory_trend_json(const std::optional<MemoryTrend>& m) {
  if (!m) return nullptr;
  return {{"private_bytes", m->private_bytes},
          {"shared_bytes", m->shared_bytes},
          {"pss_bytes", m->pss_bytes},
          {"private_peak_bytes", m->private_peak_bytes},
          {"readings", m->readings},
          {"window_s", number_json(m->window_s)},
          {"private_bytes_per_s", optional_json(m->private_bytes_per_s)},
          {"shared_bytes_per_s", optional_json(m->shared_bytes_per_s)},
          {"steady", m->steady},
          {"watched_s", number_json(m->watched_s)},
          {"levels_off", m->levels_off},
          {"rise_s", number_json(m->rise_s)},
          {"rise_bytes", number_json(m->rise_bytes)}};
}

std::optional<MemoryTrend> memory_trend_from(const JsonIn& j) {
  if (j.is_null()) return std::nullopt;
  MemoryTrend m;
  m.private_bytes = j.at("private_bytes").unsigned_integer();
  m.shared_bytes = j.at("shared_bytes").unsigned_integer();
  m.pss_bytes = j.at("pss_bytes").unsigned_integer();
  m.private_peak_bytes = j.at("private_peak_bytes").unsigned_integer();
  m.readings = j.at("readings").unsigned_integer();
  m.window_s = j.at("window_s").number();
  m.private_bytes_per_s = opt_number(j.at("private_bytes_per_s"));
  m.shared_bytes_per_s = opt_number(j.at("shared_bytes_per_s"));
  m.steady = j.at("steady").boolean();
  // Recordings made before the growth's shape was read have none of it.
  if (j.json().contains("watched_s")) m.watched_s = j.at("watched_s").number();
  if (j.json().contains("levels_off")) {
    m.levels_off = j.at("levels_off").boolean();
    m.rise_s = j.at("rise_s").number();
    m.rise_bytes = j.at("rise_bytes").number();
  }
  return m;
}

std::optional<WorkerChurn> worker_churn_from(const JsonIn& j) {
  if (j.is_null()) return std::nullopt;
  WorkerChurn c;
  c.generations = static_cast<int>(j.at("generations").integer());
  c.workers_started = static_cast<int>(j.at("workers_started").integer());
  c.first_start_s = j.at("first_start_s").number();
  c.span_s = j.at("span_s").number();
  c.first_startup_s = opt_number(j.at("first_startup_s"));
  c.restart_wait_s = j.at("restart_wait_s").number();
  c.restarts_measured = static_cast<int>(j.at("restarts_measured").integer());
  if (j.json().contains("steady_wait_share")) c.steady_wait_share = opt_number(j.at("steady_wait_share"));
  c.wait_s = j.at("wait_s").number();
  c.looks = j.at("looks").unsigned_integer();
  return c;
}

ojson tree_memory_json(const std::optional<TreeMemory>& m) {
  if (!m) return nullptr;
  return {{"rollup_period_s", number_json(m->rollup_period_s)},
          {"rollup_readings", m->rollup_readings},
          {"available_last_bytes", m->available_last_bytes},
          {"available_min_bytes", m->available_min_bytes},
          {"workers_private_peak_bytes", m->workers_private_peak_bytes},
          {"bucket_s", number_json(m->bucket_s)},
          {"trainer_private_bytes", numbers_json(m->trainer_private_bytes)},
          {"workers_private_bytes", numbers_json(m->workers_private_bytes)},
          {"workers_shared_bytes", numbers_json(m->workers_shared_bytes)},
          {"other_private_bytes", numbers_json(m->other_private_bytes)},
          {"available_bytes", numbers_json(m->available_bytes)}};
}

std::optional<TreeMemory> tree_memory_from(const JsonIn& j) {
  if (j.is_null()) return std::nullopt;
  TreeMemory m;
  m.rollup_period_s = j.at("rollup_period_s").number();
  m.rollup_readings = j.at("rollup_readings").unsigned_integer();
  m.available_last_bytes = j.at("available_last_bytes").unsigned_integer();
  m.available_min_bytes = j.at("available_min_bytes").unsigned_integer();
  m.workers_private_peak_bytes = j.at("workers_private_peak_bytes").unsigned_integer();
  m.bucket_s = j.at("bucket_s").number();
  m.trainer_private_bytes = numbers_from(j.at("trainer_private_bytes"));
  m.workers_private_bytes = numbers_from(j.at("workers_private_bytes"));
  m.workers_shared_bytes = numbers_from(j.at("workers_shared_bytes"));
  m.other_private_bytes = numbers_from(j.at("other_private_bytes"));
  m.available_bytes = numbers_from(j.at("available_bytes"));
  return m;
}

ojson process_json(const WatchedProcess& p) {
  return {{"pid", p.pid},
          {"ppid", p.ppid},
          {"name", p.name},
          {"role", to_string(p.role)},
          {"samples", p.samples},
          {"cpu_cores_mean", number_json(p.cpu_cores_mean)},
          {"cpu_core_seconds", number_json(p.cpu_core_seconds)},
          {"io_wait_share", number_json(p.io_wait_share)},
          {"rss_peak_bytes", p.rss_peak_bytes},
          {"read_bytes", p.read_bytes},
          {"run_wait_share", optional_json(p.run_wait_share)},
          {"rank", optional_plain(p.rank)},
          {"local_rank", optional_plain(p.local_rank)},
          {"node_rank", optional_plain(p.node_rank)},
          {"main_thread_busy", optional_json(p.main_thread_busy)},
          {"first_seen_s", number_json(p.first_seen_s)},
          {"last_seen_s", number_json(p.last_seen_s)},
          {"gpu_memory_peak_bytes", p.gpu_memory_peak_bytes},
          {"gpu_sm_util", optional_json(p.gpu_sm_util)},
          {"memory", memory_trend_json(p.memory)}};
}

WatchedProcess process_from(const JsonIn& j) {
  WatchedProcess p;
  p.pid = static_cast<int>(j.at("pid").integer());
  p.ppid = static_cast<int>(j.at("ppid").integer());
  p.name = j.at("name").text();
  p.role = role_from(j.at("role"));
  p.samples = j.at("samples").unsigned_integer();
  p.cpu_cores_mean = j.at("cpu_cores_mean").number();
  p.cpu_core_seconds = j.at("cpu_core_seconds").number();
  p.io_wait_share = j.at("io_wait_share").number();
  p.rss_peak_bytes = j.at("rss_peak_bytes").unsigned_integer();
  p.read_bytes = j.at("read_bytes").unsigned_integer();
  p.run_wait_share = opt_number(j.at("run_wait_share"));
  p.rank = opt_int(j.at("rank"));
  p.local_rank = opt_int(j.at("local_rank"));
  p.node_rank = opt_int(j.at("node_rank"));
  p.main_thread_busy = opt_number(j.at("main_thread_busy"));
  p.first_seen_s = j.at("first_seen_s").number();
  p.last_seen_s = j.at("last_seen_s").number();
  p.gpu_memory_peak_bytes = j.at("gpu_memory_peak_bytes").unsigned_integer();
  p.gpu_sm_util = opt_number(j.at("gpu_sm_util"));
  if (j.json().contains("memory")) p.memory = memory_trend_from(j.at("memory"));
  return p;
}

ojson tree_json(const ProcessTreeSummary& t) {
  ojson stall = ojson::array();
  for (const std::optional<double>& v : t.timeline_data_stall) stall.push_back(optional_json(v));
  ojson processes = ojson::array();
  for (const WatchedProcess& p : t.processes) processes.push_back(process_json(p));
  return {{"trainer_pid", t.trainer_pid},
          {"trainer_name", t.trainer_name},
          {"samples", t.samples},
          {"sampled_s", number_json(t.sampled_s)},
          {"main_thread_busy", number_json(t.main_thread_busy)},
          {"main_thread_io_wait", number_json(t.main_thread_io_wait)},
          {"main_thread_run_wait", optional_json(t.main_thread_run_wait)},
          {"main_thread_waits", main_thread_waits_json(t.main_thread_waits)},
          {"other_threads_cores", number_json(t.other_threads_cores)},
          {"yielding_threads_cores", number_json(t.yielding_threads_cores)},
          {"busiest_thread", t.busiest_thread},
          {"busiest_thread_busy", number_json(t.busiest_thread_busy)},
          {"trainer_cores", number_json(t.trainer_cores)},
          {"workers", t.workers},
          {"workers_cores", number_json(t.workers_cores)},
          {"worker_busy", number_json(t.worker_busy)},
          {"worker_busy_max", number_json(t.worker_busy_max)},
          {"workers_io_wait", number_json(t.workers_io_wait)},
          {"worker_run_wait", optional_json(t.worker_run_wait)},
          {"other_processes_cores", number_json(t.other_processes_cores)},
          {"on_gpu", t.on_gpu},
          {"gpu_memory_peak_bytes", t.gpu_memory_peak_bytes},
          {"gpu_share_unmeasured", t.gpu_share_unmeasured},
          {"trainer_gpu_sm_util", optional_json(t.trainer_gpu_sm_util)},
          {"storage_read_bytes_per_s", optional_json(t.storage_read_bytes_per_s)},
          {"trainers", t.trainers},
          {"ranks", t.ranks},
          {"trainer_rank", optional_plain(t.trainer_rank)},
          {"world_size", optional_plain(t.world_size)},
          {"timeline_bucket_s", number_json(t.timeline_bucket_s)},
          {"timeline_workers_cores", numbers_json(t.timeline_workers_cores)},
          {"timeline_main_busy", numbers_json(t.timeline_main_busy)},
          {"timeline_data_stall", stall},
          {"job", t.job},
          {"memory", tree_memory_json(t.memory)},
          {"worker_churn", worker_churn_json(t.worker_churn)},
          {"processes", processes}};
}

ProcessTreeSummary tree_from(const JsonIn& j) {
  ProcessTreeSummary t;
  t.trainer_pid = static_cast<int>(j.at("trainer_pid").integer());
  t.trainer_name = j.at("trainer_name").text();
  t.samples = j.at("samples").unsigned_integer();
  t.sampled_s = j.at("sampled_s").number();
  t.main_thread_busy = j.at("main_thread_busy").number();
  t.main_thread_io_wait = j.at("main_thread_io_wait").number();
  t.main_thread_run_wait = opt_number(j.at("main_thread_run_wait"));
  if (j.json().contains("main_thread_waits"))  // since 2026-11-27
    t.main_thread_waits = main_thread_waits_from(j.at("main_thread_waits"));
  t.other_threads_cores = j.at("other_threads_cores").number();
  if (j.json().contains("yielding_threads_cores"))  // since 2026-11-27
    t.yielding_threads_cores = j.at("yielding_threads_cores").number();
  t.busiest_thread = j.at("busiest_thread").text();
  t.busiest_thread_busy = j.at("busiest_thread_busy").number();
  t.trainer_cores = j.at("trainer_cores").number();
  t.workers = static_cast<int>(j.at("workers").integer());
  t.workers_cores = j.at("workers_cores").number();
  t.worker_busy = j.at("worker_busy").number();
  t.worker_busy_max = j.at("worker_busy_max").number();
  t.workers_io_wait = j.at("workers_io_wait").number();
  t.worker_run_wait = opt_number(j.at("worker_run_wait"));
  t.other_processes_cores = j.at("other_processes_cores").number();
  t.on_gpu = j.at("on_gpu").boolean();
  t.gpu_memory_peak_bytes = j.at("gpu_memory_peak_bytes").unsigned_integer();
  if (j.json().contains("gpu_share_unmeasured"))  // since 2026-11-27
    t.gpu_share_unmeasured = j.at("gpu_share_unmeasured").text();
  t.trainer_gpu_sm_util = opt_number(j.at("trainer_gpu_sm_util"));
  t.storage_read_bytes_per_s = opt_number(j.at("storage_read_bytes_per_s"));
  if (j.json().contains("trainers"))  // since 2026-11-27
    t.trainers = static_cast<int>(j.at("trainers").integer());
  t.ranks = static_cast<int>(j.at("ranks").integer());
  t.trainer_rank = opt_int(j.at("trainer_rank"));
  t.world_size = opt_int(j.at("world_size"));
  t.timeline_bucket_s = j.at("timeline_bucket_s").number();
  t.timeline_workers_cores = numbers_from(j.at("timeline_workers_cores"));
  t.timeline_main_busy = numbers_from(j.at("timeline_main_busy"));
  const JsonIn stall = j.at("timeline_data_stall");
  for (std::size_t i = 0; i < stall.size(); ++i) t.timeline_data_stall.push_back(opt_number(stall.at(i)));
  t.job = j.at("job").text();
  if (j.json().contains("memory")) t.memory = tree_memory_from(j.at("memory"));  // since #40
  if (j.json().contains("worker_churn")) t.worker_churn = worker_churn_from(j.at("worker_churn"));  // since #54
  const JsonIn processes = j.at("processes");
  for (std::size_t i = 0; i < processes.size(); ++i) t.processes.push_back(process_from(processes.at(i)));
  return t;
}

ojson recommendation_json(const Recommendation& r) {
  return {{"action", r.action},
          {"setting", r.setting},
          {"predicted_samples_per_s", optional_json(r.predicted_samples_per_s)},
          {"predicted_speedup", optional_json(r.predicted_speedup)},
          {"basis", r.basis}};
}

Recommendation recommendation_from(const JsonIn& j) {
  Recommendation r;
  r.action = j.at("action").text();
  r.setting = j.at("setting").text();
  r.predicted_samples_per_s = opt_number(j.at("predicted_samples_per_s"));
  r.predicted_speedup = opt_number(j.at("predicted_speedup"));
  r.basis = j.at("basis").text();
  return r;
}

}  // namespace

ojson worker_churn_json(const std::optional<WorkerChurn>& c) {
  if (!c) return nullptr;
  return {{"generations", c->generations},
          {"workers_started", c->workers_started},
          {"first_start_s", number_json(c->first_start_s)},
          {"span_s", number_json(c->span_s)},
          {"first_startup_s", optional_json(c->first_startup_s)},
          {"restart_wait_s", number_json(c->restart_wait_s)},
          {"restarts_measured", c->restarts_measured},
          {"steady_wait_share", optional_json(c->steady_wait_share)},
          {"wait_s", number_json(c->wait_s)},
          {"looks", c->looks}};
}

JsonIn JsonIn::at(const std::string& key) const {
  // The file's name alone at the top ("input.json"), then the keys' path ("input.json: run.wall_s").
  const std::string path = where_ + (where_.find(": ") == std::string::npos ? ": " : ".") + key;
  if (!j_.is_object()) fail("not an object");
  const auto it = j_.find(key);
  if (it == j_.end()) throw JsonKeyError(path + ": missing");
  return JsonIn(*it, path);
}

JsonIn JsonIn::at(std::size_t i) const {
  if (!j_.is_array() || i >= j_.size()) fail("no element " + std::to_string(i));
  return JsonIn(j_[i], where_ + "[" + std::to_string(i) + "]");
}

std::size_t JsonIn::size() const {
  if (!j_.is_array()) fail("not an array");
  return j_.size();
}

void JsonIn::fail(const std::string& what) const { throw JsonKeyError(where_ + ": " + what); }

double JsonIn::number() const {
  if (j_.is_number()) return j_.get<double>();
  if (j_.is_string()) {
    const std::string s = j_.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  fail("not a number");
}

std::int64_t JsonIn::integer() const {
  if (!j_.is_number_integer()) fail("not an integer");
  return j_.get<std::int64_t>();
}

std::uint64_t JsonIn::unsigned_integer() const {
  if (!j_.is_number_unsigned() && !(j_.is_number_integer() && j_.get<std::int64_t>() >= 0))
    fail("not an integer of 0 or more");
  return j_.get<std::uint64_t>();
}

bool JsonIn::boolean() const {
  if (!j_.is_boolean()) fail("not true or false");
  return j_.get<bool>();
}

std::string JsonIn::text() const {
  if (!j_.is_string()) fail("not a string");
  return j_.get<std::string>();
}

ojson number_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

ojson optional_json(const std::optional<double>& v) { return v ? number_json(*v) : ojson(nullptr); }

ojson samples_json(const SampleCosts& c) {
  ojson slowest = ojson::array();
  for (const SlowSample& s : c.slowest) {
    std::optional<std::uint64_t> pixels;
    if (s.width && s.height) pixels = static_cast<std::uint64_t>(*s.width) * static_cast<std::uint64_t>(*s.height);
    slowest.push_back({{"file", s.file},
                       {"ms", number_json(s.ms)},
                       {"bytes", optional_plain(s.bytes)},
                       {"width", optional_plain(s.width)},
                       {"height", optional_plain(s.height)},
                       {"pixels", optional_plain(pixels)},
                       {"format", s.format.empty() ? ojson(nullptr) : ojson(s.format)}});
  }
  std::optional<double> wait_share;
  if (c.wait_s && c.wait_on_slowest_s && *c.wait_s > 0) wait_share = *c.wait_on_slowest_s / *c.wait_s;
  return {{"measured_by", c.measured_by},
          {"count", c.count},
          {"total_s", number_json(c.total_s)},
          {"load_ms", {{"mean", number_json(c.mean_ms)},
                       {"p50", number_json(c.p50_ms)},
                       {"p90", number_json(c.p90_ms)},
                       {"p99", number_json(c.p99_ms)},
                       {"max", number_json(c.max_ms)},
                       {"slowest_1pct_share", number_json(c.slowest_1pct_share)},
                       {"slowest_5pct_share", number_json(c.slowest_5pct_share)}}},
          {"slow", {{"threshold_ms", number_json(c.slow_threshold_ms)},
                    {"count", c.slow_count},
                    {"excess_s", number_json(c.slow_excess_s)}}},
          {"slowest", slowest},
          {"wait_s", optional_json(c.wait_s)},
          {"wait_on_slowest_s", optional_json(c.wait_on_slowest_s)},
          {"wait_on_slowest_share", optional_json(wait_share)},
          {"image_size", c.image_size}};
}

ojson main_thread_waits_json(const std::optional<MainThreadWaits>& w) {
  if (!w) return nullptr;
  return {{"looks", w->looks},
          {"running", w->running},
          {"loader_queue", w->loader_queue},
          {"loader_thread", w->loader_thread},
          {"loading", w->loading},
          {"other_wait", w->other_wait},
          {"children", w->children},
          {"stack_looks", w->stack_looks}};
}

SampleCosts samples_from(const JsonIn& j) {
  SampleCosts c;
  c.measured_by = j.at("measured_by").text();
  c.count = j.at("count").unsigned_integer();
  c.total_s = j.at("total_s").number();
  const JsonIn ms = j.at("load_ms");
  c.mean_ms = ms.at("mean").number();
  c.p50_ms = ms.at("p50").number();
  c.p90_ms = ms.at("p90").number();
  c.p99_ms = ms.at("p99").number();
  c.max_ms = ms.at("max").number();
  c.slowest_1pct_share = ms.at("slowest_1pct_share").number();
  c.slowest_5pct_share = ms.at("slowest_5pct_share").number();
  const JsonIn slow = j.at("slow");
  c.slow_threshold_ms = slow.at("threshold_ms").number();
  c.slow_count = slow.at("count").unsigned_integer();
  c.slow_excess_s = slow.at("excess_s").number();
  const JsonIn slowest = j.at("slowest");
  for (std::size_t i = 0; i < slowest.size(); ++i) {
    const JsonIn s = slowest.at(i);
    SlowSample out{s.at("file").text(), s.at("ms").number(), {}, opt_int(s.at("width")), opt_int(s.at("height")), {}};
    if (const JsonIn b = s.at("bytes"); !b.is_null()) out.bytes = b.unsigned_integer();
    if (const JsonIn f = s.at("format"); !f.is_null()) out.format = f.text();
    c.slowest.push_back(std::move(out));
  }
  c.wait_s = opt_number(j.at("wait_s"));
  c.wait_on_slowest_s = opt_number(j.at("wait_on_slowest_s"));
  c.image_size = static_cast<int>(j.at("image_size").integer());
  return c;
}

// A recording made before samples were measured has no key: nothing measured.
static std::optional<SampleCosts> optional_samples_from(const JsonIn& j) {
  if (!j.json().contains("samples") || j.json()["samples"].is_null()) return std::nullopt;
  return samples_from(j.at("samples"));
}

ojson diagnosis_input_json(const DiagnosisInput& in) {
  ojson stages = ojson::array();
  for (const StageStats& s : in.stages) stages.push_back(stage_json(s));
  return {{"stages", stages},
          {"wall_s", number_json(in.wall_s)},
          {"batches", in.batches},
          {"batch_size", in.batch_size},
          {"samples_per_s", number_json(in.samples_per_s)},
          {"num_workers", in.num_workers},
          {"pin_memory", optional_plain(in.pin_memory)},
          {"on_gpu", in.on_gpu},
          {"loader_only", in.loader_only},
          {"model_parameters", in.model_parameters},
          {"h2d_submit_s", number_json(in.h2d_submit_s)},
          {"cpus", in.cpus},
          {"trials", optional_of(in.trials, trials_json)},
          {"utilization", utilization_json(in.utilization)},
          {"autotune", optional_of(in.autotune, autotune_json)},
          {"samples", optional_of(in.samples, samples_json)}};
}

DiagnosisInput diagnosis_input_from(const JsonIn& j) {
  DiagnosisInput in;
  const JsonIn stages = j.at("stages");
  for (std::size_t i = 0; i < stages.size(); ++i) in.stages.push_back(stage_from(stages.at(i)));
  in.wall_s = j.at("wall_s").number();
  in.batches = j.at("batches").integer();
  in.batch_size = j.at("batch_size").integer();
  in.samples_per_s = j.at("samples_per_s").number();
  in.num_workers = static_cast<int>(j.at("num_workers").integer());
  if (const JsonIn pin = j.at("pin_memory"); !pin.is_null()) in.pin_memory = pin.boolean();
  in.on_gpu = j.at("on_gpu").boolean();
  in.loader_only = j.at("loader_only").boolean();
  in.model_parameters = j.at("model_parameters").integer();
  in.h2d_submit_s = j.at("h2d_submit_s").number();
  in.cpus = static_cast<int>(j.at("cpus").integer());
  if (const JsonIn t = j.at("trials"); !t.is_null()) in.trials = trials_from(t);
  in.utilization = utilization_from(j.at("utilization"));
  if (const JsonIn a = j.at("autotune"); !a.is_null()) in.autotune = autotune_from(a);
  in.samples = optional_samples_from(j);
  return in;
}

ojson watch_input_json(const WatchDiagnosisInput& in) {
  ojson printed = nullptr;
  if (in.printed)
    printed = {{"lines", in.printed->lines},
               {"counted", in.printed->counted},
               {"time_s", number_json(in.printed->time_s)},
               {"data_s", number_json(in.printed->data_s)},
               {"share", optional_json(in.printed->share)},
               {"columns", in.printed->columns}};
  ojson torch = nullptr;
  if (in.torch) torch = {{"version", in.torch->version}, {"source", in.torch->source}};
  return {{"tree", tree_json(in.tree)},
          {"cpus", in.cpus},
          {"utilization", utilization_json(in.utilization)},
          {"spans", optional_of(in.spans, diagnosis_input_json)},
          {"torch", torch},
          {"printed", printed},
          {"data_files_seen", in.data_files_seen ? ojson(*in.data_files_seen) : ojson(nullptr)},
          {"data_kind", in.data_kind},
          {"samples", optional_of(in.samples, samples_json)},
          {"ended", in.ended},
          {"exit", in.exit},
          {"wall_s", number_json(in.wall_s)}};
}

WatchDiagnosisInput watch_input_from(const JsonIn& j) {
  WatchDiagnosisInput in;
  in.tree = tree_from(j.at("tree"));
  in.cpus = static_cast<int>(j.at("cpus").integer());
  in.utilization = utilization_from(j.at("utilization"));
  if (const JsonIn s = j.at("spans"); !s.is_null()) in.spans = diagnosis_input_from(s);
  if (const JsonIn t = j.at("torch"); !t.is_null()) in.torch = ProgramTorch{t.at("version").text(), t.at("source").text()};
  if (const JsonIn p = j.at("printed"); !p.is_null()) {
    PrintedDataWait w;
    w.lines = p.at("lines").unsigned_integer();
    w.counted = p.at("counted").unsigned_integer();
    w.time_s = p.at("time_s").number();
    w.data_s = p.at("data_s").number();
    w.share = opt_number(p.at("share"));
    w.columns = p.at("columns").text();
    in.printed = w;
  }
  if (const JsonIn f = j.at("data_files_seen"); !f.is_null()) in.data_files_seen = f.unsigned_integer();
  if (j.json().contains("data_kind")) in.data_kind = j.at("data_kind").text();  // since 2026-11-27
  in.samples = optional_samples_from(j);
  in.ended = j.at("ended").text();
  in.exit = j.at("exit").text();
  in.wall_s = j.at("wall_s").number();
  return in;
}

ojson gpu_trace_json(const GpuTraceSummary& g) {
  return {{"steps", g.steps},
          {"step_wall_s", number_json(g.step_wall_s)},
          {"kernels", g.kernels},
          {"kernels_per_step", number_json(g.kernels_per_step)},
          {"mean_kernel_us", number_json(g.mean_kernel_us)},
          {"p50_kernel_us", number_json(g.p50_kernel_us)},
          {"p95_kernel_us", number_json(g.p95_kernel_us)},
          {"gpu_busy_s", number_json(g.gpu_busy_s)},
          {"gpu_busy_ratio", number_json(g.gpu_busy_ratio)},
          {"device_s_per_step", number_json(g.device_s_per_step)},
          {"launch_gaps", g.launch_gaps},
          {"mean_gap_us", number_json(g.mean_gap_us)},
          {"p95_gap_us", number_json(g.p95_gap_us)},
          {"gap_share", number_json(g.gap_share)},
          {"syncs", g.syncs},
          {"syncs_per_step", number_json(g.syncs_per_step)},
          {"sync_wait_s", number_json(g.sync_wait_s)},
          {"syncs_by_call", g.syncs_by_call},
          {"launch_calls", g.launch_calls},
          {"mean_launch_call_us", number_json(g.mean_launch_call_us)},
          {"h2d_pinned_bytes", g.h2d_pinned_bytes},
          {"h2d_pageable_bytes", g.h2d_pageable_bytes},
          {"h2d_other_bytes", g.h2d_other_bytes},
          {"h2d_pinned_gbps", optional_json(g.h2d_pinned_gbps)},
          {"h2d_pageable_gbps", optional_json(g.h2d_pageable_gbps)},
          {"h2d_share", number_json(g.h2d_share)},
          {"h2d_pageable_s_per_step", number_json(g.h2d_pageable_s_per_step)},
          {"d2h_bytes", g.d2h_bytes},
          {"dropped", g.dropped},
          {"records_bad_timestamps", g.records_bad_timestamps},
          {"buffers_incomplete", g.buffers_incomplete},
          {"records_not_kept", g.records_not_kept},
          {"covered_until_s", optional_json(g.covered_until_s)}};
}

GpuTraceSummary gpu_trace_from(const JsonIn& j) {
  GpuTraceSummary g;
  g.steps = j.at("steps").integer();
  g.step_wall_s = j.at("step_wall_s").number();
  g.kernels = j.at("kernels").integer();
  g.kernels_per_step = j.at("kernels_per_step").number();
  g.mean_kernel_us = j.at("mean_kernel_us").number();
  g.p50_kernel_us = j.at("p50_kernel_us").number();
  g.p95_kernel_us = j.at("p95_kernel_us").number();
  g.gpu_busy_s = j.at("gpu_busy_s").number();
  g.gpu_busy_ratio = j.at("gpu_busy_ratio").number();
  g.device_s_per_step = j.at("device_s_per_step").number();
  g.launch_gaps = j.at("launch_gaps").integer();
  g.mean_gap_us = j.at("mean_gap_us").number();
  g.p95_gap_us = j.at("p95_gap_us").number();
  g.gap_share = j.at("gap_share").number();
  g.syncs = j.at("syncs").integer();
  g.syncs_per_step = j.at("syncs_per_step").number();
  g.sync_wait_s = j.at("sync_wait_s").number();
  const JsonIn by_call = j.at("syncs_by_call");
  if (!by_call.json().is_object()) by_call.fail("not an object");
  for (const auto& [name, value] : by_call.json().items()) g.syncs_by_call[name] = by_call.at(name).integer();
  g.launch_calls = j.at("launch_calls").integer();
  g.mean_launch_call_us = j.at("mean_launch_call_us").number();
  g.h2d_pinned_bytes = j.at("h2d_pinned_bytes").unsigned_integer();
  g.h2d_pageable_bytes = j.at("h2d_pageable_bytes").unsigned_integer();
  g.h2d_other_bytes = j.at("h2d_other_bytes").unsigned_integer();
  g.h2d_pinned_gbps = opt_number(j.at("h2d_pinned_gbps"));
  g.h2d_pageable_gbps = opt_number(j.at("h2d_pageable_gbps"));
  g.h2d_share = j.at("h2d_share").number();
  g.h2d_pageable_s_per_step = j.at("h2d_pageable_s_per_step").number();
  g.d2h_bytes = j.at("d2h_bytes").unsigned_integer();
  g.dropped = j.at("dropped").unsigned_integer();
  g.records_bad_timestamps = j.at("records_bad_timestamps").unsigned_integer();
  g.buffers_incomplete = j.at("buffers_incomplete").unsigned_integer();
  g.records_not_kept = j.at("records_not_kept").unsigned_integer();
  g.covered_until_s = opt_number(j.at("covered_until_s"));
  return g;
}

ojson diagnosis_json(const Diagnosis& d) {
  ojson recs = ojson::array();
  for (const Recommendation& r : d.recommendations) recs.push_back(recommendation_json(r));
  return {{"bottleneck", d.bottleneck},
          {"data_stall_ratio", number_json(d.data_stall_ratio)},
          {"data_stall_source", d.data_stall_source},
          {"input_bound", d.input_bound},
          {"verdict", d.verdict},
          {"rules", d.rules},
          {"recommendations", recs},
          {"evidence", d.evidence}};
}

Diagnosis diagnosis_from(const JsonIn& j) {
  Diagnosis d;
  d.bottleneck = j.at("bottleneck").text();
  d.data_stall_ratio = j.at("data_stall_ratio").number();
  d.data_stall_source = j.at("data_stall_source").text();
  d.input_bound = j.at("input_bound").text();
  d.verdict = j.at("verdict").text();
  d.rules = texts_from(j.at("rules"));
  const JsonIn recs = j.at("recommendations");
  for (std::size_t i = 0; i < recs.size(); ++i) d.recommendations.push_back(recommendation_from(recs.at(i)));
  d.evidence = texts_from(j.at("evidence"));
  return d;
}

}  // namespace feedscope::detail
