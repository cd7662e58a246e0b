#include "exporters/json_report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "exporters/detail/evidence_json.h"
#include "exporters/detail/rank_json.h"
#include "profiler/trace_sampling.h"

namespace feedscope {

namespace {

nlohmann::ordered_json config_json(const Report& r) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [key, value] : r.config)
    std::visit([&](const auto& v) { out[key] = v; }, value);
  return out;
}

nlohmann::ordered_json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

// A text, or null where it is empty (not said, not measured).
nlohmann::ordered_json text_or_null(const std::string& text) {
  return text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(text);
}

// DESIGN.md's `gpu_trace`: the summary, or {"unavailable": reason} when there was no trace.
// The pipeline's stages, or the user's own, by name.
nlohmann::ordered_json stages_json(const std::vector<StageStats>& stages) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const StageStats& s : stages) {
    out[s.name] = {{"busy_s", s.busy_s}, {"mean_ms", s.mean_ms}, {"p50_ms", s.p50_ms},
                   {"p95_ms", s.p95_ms}, {"share", s.share},     {"count", s.count},
                   {"lanes", s.lanes}};
  }
  return out;
}

// One object per device where the steps ran on several; empty otherwise.
nlohmann::ordered_json devices_json(const GpuTraceSummary& g) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const GpuTraceSummary::DeviceBusy& d : g.devices)
    out.push_back({{"device", d.device},
                   {"kernels", d.kernels},
                   {"busy_s", d.busy_s},
                   {"busy_ratio", d.busy_ratio}});
  return out;
}

// Which calls CUPTI recorded; null where the source did not say.
nlohmann::ordered_json tracing_json(const std::optional<TracingMode>& t) {
  if (!t) return nullptr;
  return {{"runtime_calls", to_string(t->runtime_calls)},
          {"runtime_callbacks", t->runtime_callbacks},
          {"driver_calls", to_string(t->driver_calls)},
          {"driver_callbacks", t->driver_callbacks},
          {"sync_records", !t->sync_records         ? "none"
                           : t->completed_syncs_only ? "completed only"
                                                     : "all"},
          {"note", text_or_null(t->note)},
          {"sampling", trace_sampling_spec(t->sampling)}};
}

// What a sampled trace read and how its totals were scaled; null under whole tracing.
nlohmann::ordered_json sampled_json(const std::optional<GpuTraceSummary::Sampled>& t) {
  if (!t) return nullptr;
  const auto stratum = [](const GpuTraceSummary::Sampled::Stratum& s) {
    return nlohmann::ordered_json{
        {"read_s", s.read_s}, {"span_s", s.span_s}, {"steps", s.steps}, {"windows", s.windows}};
  };
  return {{"sampling", trace_sampling_spec(t->sampling)},
          {"lead_s", static_cast<double>(t->sampling.lead_ns) / 1e9},
          {"read_s", t->read_s},
          {"span_s", t->span_s},
          {"scale", t->scale},
          {"windows", t->windows},
          {"windows_without_records", t->windows_without_records},
          {"lead", stratum(t->lead)},
          {"later", stratum(t->later)},
          {"lead_in_figures", t->lead_in_figures}};
}

nlohmann::ordered_json gpu_trace_json(const Report& r) {
  if (!r.gpu_trace) {
    const std::string reason = r.gpu_trace_unavailable.empty() ? "not traced" : r.gpu_trace_unavailable;
    return {{"unavailable", reason}};
  }
  const GpuTraceSummary& g = *r.gpu_trace;
  return {{"steps", g.steps},
          {"step_wall_s", g.step_wall_s},
          {"kernels", g.kernels},
          {"kernels_per_step", g.kernels_per_step},
          {"mean_kernel_us", g.mean_kernel_us},
          {"p50_kernel_us", g.p50_kernel_us},
          {"p95_kernel_us", g.p95_kernel_us},
          {"gpu_busy_s", g.gpu_busy_s},
          {"gpu_busy_ratio", g.gpu_busy_ratio},
          {"device_s_per_step", g.device_s_per_step},
          {"launch_gaps",
           {{"count", g.launch_gaps},
            {"mean_us", g.mean_gap_us},
            {"p95_us", g.p95_gap_us},
            {"share", g.gap_share}}},
          {"launch_calls",
           {{"count", g.launch_calls},
            {"mean_us", g.mean_launch_call_us},
            {"without_call", g.launches_without_call}}},
          {"syncs",
           {{"count", g.syncs},
            {"per_step", g.syncs_per_step},
            {"wait_s", g.sync_wait_s},
            {"by_call", g.syncs_by_call},
            {"after_h2d", {{"count", g.syncs_after_h2d}, {"wait_s", g.sync_after_h2d_wait_s}}}}},
          {"graphs",
           {{"kernels", g.graph_kernels},
            {"graphs", g.graphs},
            {"replays", g.graph_replays},
            {"driver_launch_calls", g.driver_launch_calls},
            {"triton_kernels", g.triton_kernels}}},
          {"collectives",
           {{"busy_s", g.collective_s},
            {"share", g.collective_share},
            {"alone_share", g.collective_alone_share}}},
          {"devices", devices_json(g)},
          {"h2d",
           {{"pinned_bytes", g.h2d_pinned_bytes},
            {"pageable_bytes", g.h2d_pageable_bytes},
            {"other_bytes", g.h2d_other_bytes},
            {"pinned_gbps", optional_number(g.h2d_pinned_gbps)},
            {"pageable_gbps", optional_number(g.h2d_pageable_gbps)},
            {"share", g.h2d_share}}},
          {"d2h_bytes", g.d2h_bytes},
          {"dropped", g.dropped},
          {"records_bad_timestamps", g.records_bad_timestamps},
          {"buffers_incomplete", g.buffers_incomplete},
          {"records_not_kept", g.records_not_kept},
          {"covered_until_s", optional_number(g.covered_until_s)},
          {"tracing", tracing_json(g.tracing)},
          {"sampled", sampled_json(g.sampled)}};
}

nlohmann::ordered_json loader_try_json(const LoaderTry& t) {
  return {{"skipped", text_or_null(t.skipped)},
          {"dataset", t.dataset},
          {"files_seen", t.files_seen},
          {"files_from", text_or_null(t.files_from)},
          {"num_workers", t.num_workers},
          {"batch_size", t.batch_size},
          {"image_size", t.image_size},
          {"batch_size_from", t.batch_size_from},
          {"image_size_from", t.image_size_from},
          {"seconds", t.seconds},
          {"samples_per_s", optional_number(t.samples_per_s)},
          {"program_samples_per_s", optional_number(t.program_samples_per_s)},
          {"ratio", optional_number(t.ratio)}};
}

nlohmann::ordered_json optional_rates(const std::vector<std::optional<double>>& rates) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& r : rates) out.push_back(optional_number(r));
  return out;
}

nlohmann::ordered_json change_tries_json(const ChangeTries& t) {
  nlohmann::ordered_json changes = nlohmann::ordered_json::array();
  for (const TriedChange& c : t.changes)
    changes.push_back({{"change", c.change},
                       {"why", c.why},
                       {"command", c.command},
                       {"env", c.env},
                       {"rates", optional_rates(c.rates)},
                       {"speedup", optional_number(c.speedup)},
                       {"outcome", text_or_null(c.outcome)},
                       {"noise", optional_number(c.noise)},
                       {"failed", c.failed}});
  return {{"skipped", text_or_null(t.skipped)},
          {"seconds", t.seconds},
          {"rounds", t.rounds},
          {"unit", t.unit},
          {"auto", t.auto_only},
          {"unchanged_rates", optional_rates(t.unchanged_rates)},
          {"changes", changes}};
}

nlohmann::ordered_json setting_json(const LoaderSetting& s) {
  return {{"num_workers", s.num_workers}, {"prefetch", s.prefetch}};
}

nlohmann::ordered_json measured_json(const Measured& m) {
  return {{"batches_per_s", m.batches_per_s}, {"stall", m.stall}};
}

// null where the loader did not tune itself.
nlohmann::ordered_json autotune_json(const std::optional<AutotuneSummary>& a) {
  if (!a) return nullptr;
  nlohmann::ordered_json moves = nlohmann::ordered_json::array();
  for (const TunerMove& m : a->moves)
    moves.push_back({{"t_s", m.t_s},
                     {"from", setting_json(m.from)},
                     {"to", setting_json(m.to)},
                     {"why", m.why},
                     {"before", measured_json(m.before)},
                     {"after", m.after ? measured_json(*m.after) : nlohmann::ordered_json(nullptr)},
                     {"kept", m.kept}});
  return {{"moves", moves},
          {"final", setting_json(a->final)},
          {"bounds", {{"max_workers", a->most.num_workers},
                      {"max_prefetch", a->most.prefetch},
                      {"ram_budget_mib", static_cast<double>(a->ram_budget_bytes) / (1 << 20)},
                      {"tunes_workers", a->tunes_workers},
                      {"tunes_prefetch", a->tunes_prefetch}}}};
}

nlohmann::ordered_json memory_findings_json(const std::vector<MemoryFinding>& findings) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const MemoryFinding& m : findings)
    out.push_back({{"kind", m.kind},
                   {"role", m.role},
                   {"pids", m.pids},
                   {"summary", m.summary},
                   {"private_bytes_per_s", optional_number(m.private_bytes_per_s)},
                   {"shared_bytes_per_s", optional_number(m.shared_bytes_per_s)},
                   {"headroom_bytes", optional_number(m.headroom_bytes)},
                   {"exhausted_in_s", optional_number(m.exhausted_in_s)},
                   {"watched_s", optional_number(m.watched_s)},
                   {"fix", m.fix}});
  return out;
}

nlohmann::ordered_json memory_trend_json(const std::optional<MemoryTrend>& m) {
  if (!m) return nullptr;
  return {{"private_bytes", m->private_bytes},
          {"shared_bytes", m->shared_bytes},
          {"pss_bytes", m->pss_bytes},
          {"private_peak_bytes", m->private_peak_bytes},
          {"readings", m->readings},
          {"window_s", m->window_s},
          {"private_bytes_per_s", optional_number(m->private_bytes_per_s)},
          {"shared_bytes_per_s", optional_number(m->shared_bytes_per_s)},
          {"steady", m->steady},
          {"watched_s", m->watched_s},
          {"levels_off", m->levels_off}};
}

// The tree's memory by role over time, and the machine's headroom; null where nothing was read.
nlohmann::ordered_json tree_memory_json(const ProcessTreeSummary& t) {
  if (!t.memory) return nullptr;
  const TreeMemory& m = *t.memory;
  nlohmann::ordered_json workers = nlohmann::ordered_json::object();
  for (const WatchedProcess& w : t.processes)
    if (w.role == ProcessRole::loader_worker && w.memory)
      workers[std::to_string(w.pid)] = optional_number(w.memory->private_bytes_per_s);
  return {{"source", "smaps_rollup"},
          {"rollup_period_s", m.rollup_period_s},
          {"rollup_readings", m.rollup_readings},
          {"available_last_bytes", m.available_last_bytes},
          {"available_min_bytes", m.available_min_bytes},
          {"workers_private_peak_bytes", m.workers_private_peak_bytes},
          {"worker_private_bytes_per_s", workers},
          {"timeline", {{"bucket_s", m.bucket_s},
                        {"trainer_private_bytes", m.trainer_private_bytes},
                        {"workers_private_bytes", m.workers_private_bytes},
                        {"workers_shared_bytes", m.workers_shared_bytes},
                        {"other_private_bytes", m.other_private_bytes},
                        {"available_bytes", m.available_bytes}}}};
}

nlohmann::ordered_json program_json(const ProgramSummary& p) {
  const ProcessTreeSummary& t = p.tree;
  nlohmann::ordered_json processes = nlohmann::ordered_json::array();
  for (const WatchedProcess& w : t.processes)
    processes.push_back({{"pid", w.pid},
                         {"ppid", w.ppid},
                         {"name", w.name},
                         {"role", to_string(w.role)},
                         {"samples", w.samples},
                         {"cpu_cores_mean", w.cpu_cores_mean},
                         {"cpu_core_seconds", w.cpu_core_seconds},
                         {"io_wait_share", w.io_wait_share},
                         {"run_wait_share", optional_number(w.run_wait_share)},
                         {"rank", w.rank ? nlohmann::ordered_json(*w.rank) : nlohmann::ordered_json(nullptr)},
                         {"local_rank", w.local_rank ? nlohmann::ordered_json(*w.local_rank) : nlohmann::ordered_json(nullptr)},
                         {"rank_source", text_or_null(w.rank_source)},
                         {"main_thread_busy", optional_number(w.main_thread_busy)},
                         {"rss_peak_bytes", w.rss_peak_bytes},
                         {"read_bytes", w.read_bytes},
                         {"gpu_memory_peak_bytes", w.gpu_memory_peak_bytes},
                         {"gpu_sm_util", optional_number(w.gpu_sm_util)},
                         {"memory", memory_trend_json(w.memory)}});
  return {{"command", p.command},
          {"pid", p.pid},
          {"exit", p.exit},
          {"exit_code", p.exit_code},
          {"ended", p.ended},
          {"attached", p.attached},
          {"unmeasured", p.unmeasured},
          {"wall_s", p.wall_s},
          {"spans", text_or_null(p.spans)},
          {"notes", p.notes},
          {"watcher_cpu_s", p.watcher_cpu_s},
          {"torch", p.torch ? nlohmann::ordered_json{{"version", p.torch->version},
                                                     {"source", p.torch->source}}
                            : nlohmann::ordered_json(nullptr)},
          {"try_loader", p.try_loader ? loader_try_json(*p.try_loader) : nlohmann::ordered_json(nullptr)},
          {"tries", p.tries ? change_tries_json(*p.tries) : nlohmann::ordered_json(nullptr)},
          {"tree",
           {{"trainer_pid", t.trainer_pid},
            {"trainer_name", t.trainer_name},
            {"samples", t.samples},
            {"sampled_s", t.sampled_s},
            {"main_thread_busy", t.main_thread_busy},
            {"main_thread_io_wait", t.main_thread_io_wait},
            {"main_thread_run_wait", optional_number(t.main_thread_run_wait)},
            {"main_thread_waits", detail::main_thread_waits_json(t.main_thread_waits)},
            {"other_threads_cores", t.other_threads_cores},
            {"yielding_threads_cores", t.yielding_threads_cores},
            {"busiest_thread", t.busiest_thread},
            {"busiest_thread_busy", t.busiest_thread_busy},
            {"trainer_cores", t.trainer_cores},
            {"workers", t.workers},
            {"workers_cores", t.workers_cores},
            {"worker_busy", t.worker_busy},
            {"worker_busy_max", t.worker_busy_max},
            {"workers_io_wait", t.workers_io_wait},
            {"worker_run_wait", optional_number(t.worker_run_wait)},
            {"other_processes_cores", t.other_processes_cores},
            {"trainers", t.trainers},
            {"ranks", t.ranks},
            {"trainer_rank", t.trainer_rank ? nlohmann::ordered_json(*t.trainer_rank) : nlohmann::ordered_json(nullptr)},
            {"world_size", t.world_size ? nlohmann::ordered_json(*t.world_size) : nlohmann::ordered_json(nullptr)},
            {"job", t.job},
            {"storage_read_bytes_per_s", optional_number(t.storage_read_bytes_per_s)},
            {"on_gpu", t.on_gpu},
            {"gpu_memory_peak_bytes", t.gpu_memory_peak_bytes},
            {"gpu_share_unmeasured", t.gpu_share_unmeasured.empty()
                                         ? nlohmann::ordered_json(nullptr)
                                         : nlohmann::ordered_json(t.gpu_share_unmeasured)},
            {"trainer_gpu_sm_util", optional_number(t.trainer_gpu_sm_util)},
            {"memory", tree_memory_json(t)},
            {"worker_churn", detail::worker_churn_json(t.worker_churn)},
            {"processes", processes}}}};
}

}  // namespace

std::string report_to_json(const Report& r) {
  nlohmann::ordered_json j;
  j["schema"] = kReportSchema;
  j["config"] = config_json(r);
  const Environment& e = r.environment;
  j["environment"] = {{"cpus", e.cpus},
                      {"memory_bytes", e.memory_total_bytes},
                      {"device", e.device},
                      {"torch_version", e.torch_version},
                      {"cuda_version", e.cuda_version},
                      {"feedscope_version", e.feedscope_version},
                      {"hostname", e.hostname}};
  const Throughput& t = r.throughput;
  // A watched program without spans has figures only where its own lines gave them: the rest
  // were not measured, which is null, not 0.
  const auto rate = [&t](double v) { return t.steps > 0 || v > 0 ? std::optional(v) : std::nullopt; };
  j["throughput"] = {{"samples_per_s", optional_number(rate(t.samples_per_s))},
                     {"batches_per_s", optional_number(rate(t.batches_per_s))},
                     {"steps", t.steps},
                     {"samples", t.samples},
                     {"wall_s", t.wall_s}};
  if (r.program) {
    j["throughput"]["tokens_per_s"] = optional_number(t.tokens_per_s > 0 ? std::optional(t.tokens_per_s) : std::nullopt);
    j["throughput"]["lines_per_s"] =
        optional_number(t.lines_per_s > 0 ? std::optional(t.lines_per_s) : std::nullopt);
    j["throughput"]["source"] = t.source.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(t.source);
  }
  j["stages"] = stages_json(r.stages);
  j["custom_stages"] = stages_json(r.custom_stages);
  const Utilization& u = r.utilization;
  nlohmann::ordered_json series = nlohmann::ordered_json::object();
  for (const auto& [name, st] : u.series)
    series[name] = {{"mean", st.mean}, {"p95", st.p95}, {"max", st.max}};
  j["utilization"] = {{"cpu_process_ratio", u.cpu_process_ratio},
                      {"cpu_system_ratio", u.cpu_system_ratio},
                      {"cpu_child_processes_cores", optional_number(u.cpu_child_processes_cores)},
                      {"storage_read_bytes_per_s", optional_number(u.storage_read_bytes_per_s)},
                      {"rss_bytes_peak", u.rss_bytes_peak},
                      {"disk_read_bytes_per_s", optional_number(u.disk_read_bytes_per_s)},
                      {"io_pressure_ratio", optional_number(u.io_pressure_ratio)},
                      {"gpu_util_ratio", optional_number(u.gpu_util_ratio)},
                      {"samples", u.samples},
                      {"series", series},
                      {"threads", u.threads},
                      {"unavailable", u.unavailable}};
  j["gpu_trace"] = gpu_trace_json(r);
  if (const auto& t = r.trials)
    j["trials"] = {{"bigger_batch", t->bigger_batch > 0 ? nlohmann::ordered_json(t->bigger_batch) : nullptr},
                   {"bigger_batch_step_s", optional_number(t->bigger_batch_step_s)},
                   {"run_batch_step_s", optional_number(t->run_batch_step_s)},
                   {"cpu_step_s", optional_number(t->cpu_step_s)},
                   {"cpu_threads", t->cpu_step_s ? nlohmann::ordered_json(t->cpu_threads) : nullptr},
                   {"pinned_h2d_gbps", optional_number(t->pinned_h2d_gbps)},
                   {"not_run", t->not_run}};
  else
    j["trials"] = nullptr;
  if (r.h2d_submit && r.h2d_submit->count > 0)
    j["h2d_submit"] = {{"count", r.h2d_submit->count},
                       {"busy_s", r.h2d_submit->busy_s},
                       {"mean_ms", 1e3 * r.h2d_submit->busy_s / static_cast<double>(r.h2d_submit->count)},
                       {"share", r.throughput.wall_s > 0 ? r.h2d_submit->busy_s / r.throughput.wall_s : 0.0}};
  else
    j["h2d_submit"] = nullptr;
  j["training"] = {{"model", r.training.model},
                   {"parameters", r.training.parameters},
                   {"first_loss", optional_number(r.training.first_loss)},
                   {"last_loss", optional_number(r.training.last_loss)}};
  const Diagnosis& d = r.diagnosis;
  nlohmann::ordered_json recs = nlohmann::ordered_json::array();
  for (const Recommendation& rec : d.recommendations) {
    recs.push_back({{"action", rec.action},
                    {"setting", rec.setting},
                    {"predicted_samples_per_s", optional_number(rec.predicted_samples_per_s)},
                    {"predicted_speedup", optional_number(rec.predicted_speedup)},
                    {"basis", rec.basis},
                    {"basis_kind", basis_kind(rec)}});
  }
  // No bottleneck (a program that failed before anything was measured): null.
  j["diagnosis"] = {{"bottleneck", text_or_null(d.bottleneck)},
                    {"data_stall_ratio", d.data_stall_source.empty()
                                             ? nlohmann::ordered_json(nullptr)
                                             : nlohmann::ordered_json(d.data_stall_ratio)},
                    {"data_stall_source", d.data_stall_source.empty()
                                              ? nlohmann::ordered_json(nullptr)
                                              : nlohmann::ordered_json(d.data_stall_source)},
                    {"input_bound", d.input_bound},
                    {"verdict", d.verdict},
                    {"evidence", d.evidence},
                    {"recommendations", recs},
                    {"straggler", detail::straggler_to_json(d.straggler)},
                    {"rules", d.rules},
                    {"memory", memory_findings_json(d.memory)}};
  const DataErrorsSummary& de = r.data_errors;
  nlohmann::ordered_json examples = nlohmann::ordered_json::array();
  for (const DataErrorExample& ex : de.examples)
    examples.push_back({{"index", ex.index}, {"file", ex.file}, {"message", ex.message}});
  j["data_errors"] = {{"policy", de.policy},
                      {"max_bad_ratio", de.max_bad_ratio},
                      {"count", de.count},
                      {"attempted", de.attempted},
                      {"ratio", de.ratio},
                      {"examples", examples}};
  j["samples"] = r.samples ? detail::samples_json(*r.samples) : nlohmann::ordered_json(nullptr);
  j["spans_dropped"] = r.spans_dropped;
  const TraceSummary& tr = r.trace;
  j["trace"] = {{"max_spans", tr.max_spans},
                {"spans_total", tr.spans_total},
                {"spans_kept", tr.spans_kept},
                {"spans_not_kept", tr.spans_total - tr.spans_kept},
                {"omitted", tr.omitted_from_s ? nlohmann::ordered_json{{"from_s", *tr.omitted_from_s},
                                                                       {"to_s", *tr.omitted_to_s}}
                                              : nlohmann::ordered_json(nullptr)}};
  j["interrupted"] = r.interrupted.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.interrupted);
  j["stopped_early"] = r.stopped_early.reason.empty()
                           ? nlohmann::ordered_json(nullptr)
                           : nlohmann::ordered_json{{"reason", r.stopped_early.reason},
                                                    {"message", r.stopped_early.message}};
  j["autotune"] = autotune_json(r.autotune);
  if (r.program) j["program"] = program_json(*r.program);
  if (!r.ranks.empty() || r.job) {
    j["ranks"] = detail::ranks_to_json(r.ranks);
    j["job"] = detail::job_to_json(r.job);
  }
  return j.dump(2) + "\n";
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
    out << text;
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
}

std::string samples_to_json(const SampleCosts& samples) {
  return detail::samples_json(samples).dump();
}

std::string autotune_to_json(const std::optional<AutotuneSummary>& autotune) {
  return autotune_json(autotune).dump();
}

}  // namespace feedscope
