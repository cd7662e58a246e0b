#include "exporters/job_merge.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "exporters/detail/rank_json.h"
#include "exporters/html_report.h"
#include "exporters/json_report.h"
#include "loader/stage.h"
#include "profiler/rank_digest.h"
#include "sampler/rank_identity.h"

namespace feedscope {

namespace {

namespace fs = std::filesystem;

struct Machine {
  fs::path dir;
  Environment environment;
  JobSummary job;
  std::vector<RankSummary> ranks;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw MergeError(path.string() + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Machine read_machine(const fs::path& dir) {
  const fs::path path = dir / "report.json";
  Machine m;
  m.dir = dir;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_text(path));
    if (j.value("schema", std::string()) != kReportSchema)
      throw MergeError(path.string() + ": not a " + std::string(kReportSchema) + " report");
    const auto job = detail::job_from_json(j.value("job", nlohmann::json()));
    if (!job || !j.contains("ranks"))
      throw MergeError(path.string() + ": not the report of a torch.distributed job (no ranks: was "
                                       "it `feedscope watch` of torchrun?)");
    m.job = *job;
    m.ranks = detail::ranks_from_json(j.at("ranks"));
    const nlohmann::json& e = j.at("environment");
    m.environment.cpus = e.value("cpus", 0);
    m.environment.memory_total_bytes = e.value("memory_bytes", std::uint64_t{0});
    m.environment.device = e.value("device", std::string());
    m.environment.torch_version = e.value("torch_version", std::string());
    m.environment.cuda_version = e.value("cuda_version", std::string());
    m.environment.feedscope_version = e.value("feedscope_version", std::string());
    m.environment.hostname = e.value("hostname", std::string());
  } catch (const nlohmann::json::exception& e) {
    throw MergeError(path.string() + ": " + e.what());
  } catch (const std::runtime_error& e) {
    if (dynamic_cast<const MergeError*>(&e)) throw;
    throw MergeError(path.string() + ": " + e.what());
  }
  return m;
}

void check_one_job(const std::vector<Machine>& machines, std::vector<std::string>& notes) {
  for (const Machine& m : machines)
    if (job_key(m.job.id) != job_key(machines.front().job.id)) {
      std::string out = "the reports are not of one job:";
      for (const Machine& x : machines) out += "\n  " + x.dir.string() + ": job " + x.job.id;
      throw MergeError(out);
    }
  std::map<int, fs::path> seen;
  for (const Machine& m : machines)
    for (const RankSummary& r : m.ranks) {
      if (!r.rank) continue;
      const auto [it, fresh] = seen.emplace(*r.rank, m.dir);
      if (!fresh)
        throw MergeError("rank " + std::to_string(*r.rank) + " is in both " + it->second.string() +
                         " and " + m.dir.string() + ": the same machine's report twice?");
    }
  // Each machine's watch must overlap the others' in time; one that overlaps in part is said.
  for (const Machine& m : machines) {
    if (!m.job.begin_unix_s || !m.job.end_unix_s) continue;
    for (const Machine& o : machines) {
      if (&o == &m || !o.job.begin_unix_s || !o.job.end_unix_s) continue;
      const double overlap = std::min(*m.job.end_unix_s, *o.job.end_unix_s) -
                             std::max(*m.job.begin_unix_s, *o.job.begin_unix_s);
      const double shorter = std::min(*m.job.end_unix_s - *m.job.begin_unix_s,
                                      *o.job.end_unix_s - *o.job.begin_unix_s);
      if (overlap <= 0)
        throw MergeError(m.dir.string() + " and " + o.dir.string() +
                         " do not overlap in time: not one run of the job");
      if (&m < &o && overlap < 0.5 * shorter)
        notes.push_back(m.dir.string() + " and " + o.dir.string() + " overlap in time only in part (" +
                        std::to_string(static_cast<int>(100 * overlap / shorter)) +
                        " % of the shorter watch)");
    }
  }
  const std::optional<int> world = machines.front().job.world_size;
  if (world) {
    std::string missing;
    for (int r = 0; r < *world; ++r)
      if (!seen.contains(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    if (!missing.empty())
      notes.push_back("ranks " + missing + " of WORLD_SIZE " + std::to_string(*world) +
                      " are in no report given: the job's verdict covers the others");
  }
}

// The job's diagnosis: the straggler's where one holds the others back, else the ranks' most
// common bottleneck. `pattern`: how the ranks relate (JobVerdict::pattern).
Diagnosis job_diagnosis(std::vector<RankSummary>& ranks, std::string& pattern) {
  JobVerdict v = judge_ranks(ranks);
  pattern = v.pattern;
  Diagnosis d;
  std::map<std::string, int> names;
  for (const RankSummary& r : ranks)
    if (!r.bottleneck.empty()) ++names[r.bottleneck];
  const RankSummary* judged = nullptr;
  for (const RankSummary& r : ranks)
    if (v.straggler ? r.pid == v.straggler->pid && r.host == v.straggler->host
                    : !names.empty() && r.bottleneck ==
                          std::max_element(names.begin(), names.end(), [](auto& a, auto& b) {
                            return a.second < b.second;
                          })->first)
      judged = judged ? judged : &r;
  if (judged) {
    d.bottleneck = judged->bottleneck;
    if (judged->data_stall_ratio) {
      d.data_stall_ratio = *judged->data_stall_ratio;
      d.data_stall_source = "wait spans of " + rank_name(*judged);
    }
    d.verdict = (v.verdict.empty() ? "" : v.verdict + ". ") + rank_name(*judged) + ": " + judged->verdict;
    if (!v.straggler && judged->advice) d.recommendations.push_back(*judged->advice);
  } else {
    d.verdict = v.verdict;
  }
  d.input_bound = d.data_stall_source.empty() ? "unknown" : input_bound_class(d.data_stall_ratio);
  d.evidence = v.evidence;
  for (const RankSummary& r : ranks)
    d.evidence.push_back(rank_name(r) + " on " + r.host + ": " + (r.verdict.empty() ? "no verdict" : r.verdict));
  if (v.recommendation) d.recommendations.insert(d.recommendations.begin(), *v.recommendation);
  d.straggler = std::move(v.straggler);
  d.rules = {v.rule};  // each rank's own rules are in its report
  return d;
}

// The rank folders of `dir` (rank-N, N a number), in rank order.
std::vector<std::pair<int, fs::path>> rank_folders(const fs::path& dir) {
  std::vector<std::pair<int, fs::path>> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory(ec) || !name.starts_with("rank-") || name.size() == 5 ||
        name.find_first_not_of("0123456789", 5) != std::string::npos)
      continue;
    out.emplace_back(std::stoi(name.substr(5)), e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<fs::path> report_dirs_of(const std::vector<fs::path>& given, std::vector<std::string>& notes) {
  std::vector<fs::path> out;
  for (const fs::path& dir : given) {
    const auto ranks = rank_folders(dir);
    if (ranks.empty()) {
      std::error_code ec;
      if (!fs::exists(dir / "report.json", ec))
        throw MergeError(dir.string() + ": no report.json, and no rank-N folder (a task's) in it");
      out.push_back(dir);  // a machine's report directory
      continue;
    }
    for (const auto& [rank, folder] : ranks) {
      std::error_code ec;
      if (fs::exists(folder / "report.json", ec))
        out.push_back(folder);
      else
        notes.push_back(folder.string() + " has no report.json: rank " + std::to_string(rank) +
                        "'s watch did not write one (it was stopped, or has not ended yet)");
    }
  }
  if (out.empty())
    throw MergeError("merge: no report.json in the folders given (nor in their rank-N folders)");
  return out;
}

Report merge_job_reports(const std::vector<fs::path>& dirs, const std::vector<std::string>& notes) {
  if (dirs.empty()) throw MergeError("merge: give the report directories of the job's machines");
  std::vector<Machine> machines;
  for (const fs::path& d : dirs) machines.push_back(read_machine(d));
  Report out;
  JobSummary job;
  job.notes = notes;
  check_one_job(machines, job.notes);
  job.id = machines.front().job.id;
  job.world_size = machines.front().job.world_size;
  std::vector<std::string> reports;
  for (const Machine& m : machines) {
    // The tasks of one machine (srun's, mpirun's) each wrote a report: one host, said once.
    if (std::find(job.hosts.begin(), job.hosts.end(), m.environment.hostname) == job.hosts.end())
      job.hosts.push_back(m.environment.hostname);
    for (const std::string& n : m.job.notes)
      // The machine's or the task's own view of the others: merged here.
      if (!n.starts_with("WORLD_SIZE is") && !n.starts_with("this watch is one task of the job"))
        job.notes.push_back(m.environment.hostname + ": " + n);
    if (m.job.begin_unix_s)
      job.begin_unix_s = std::min(job.begin_unix_s.value_or(*m.job.begin_unix_s), *m.job.begin_unix_s);
    if (m.job.end_unix_s) job.end_unix_s = std::max(job.end_unix_s.value_or(*m.job.end_unix_s), *m.job.end_unix_s);
    out.ranks.insert(out.ranks.end(), m.ranks.begin(), m.ranks.end());
    reports.push_back(m.dir.string());
  }
  std::stable_sort(out.ranks.begin(), out.ranks.end(), [](const RankSummary& a, const RankSummary& b) {
    return a.rank.value_or(1 << 30) < b.rank.value_or(1 << 30);
  });
  out.environment = machines.front().environment;
  out.environment.hostname.clear();
  for (const std::string& h : job.hosts) out.environment.hostname += (out.environment.hostname.empty() ? "" : ",") + h;
  std::string joined;
  for (const std::string& r : reports) joined += (joined.empty() ? "" : " ") + r;
  out.config = {{"mode", std::string("merge")}, {"reports", joined}};
  if (job.begin_unix_s && job.end_unix_s) out.throughput.wall_s = *job.end_unix_s - *job.begin_unix_s;
  for (const std::string_view name : kStageNames)
    out.stages.push_back(StageStats{std::string(name)});
  out.training.model = "the job's own";
  out.diagnosis = job_diagnosis(out.ranks, job.pattern);
  out.job = std::move(job);
  return out;
}

namespace {

// A rank's track: its life as one span, and its timeline as counters, one a bucket, from its
// machine's watch start (`shift_us` on the job's clock): its loader workers' cores, its main
// thread's busy share and, where its Session measured it, its data stall.
void add_rank_track(nlohmann::json& events, const RankSummary& r, int pid, double shift_us) {
  events.push_back({{"ph", "M"}, {"pid", pid}, {"tid", 0}, {"name", "process_name"},
                    {"args", {{"name", rank_name(r) + " (" + r.host + ", pid " + std::to_string(r.pid) + ")"}}}});
  events.push_back({{"ph", "X"}, {"pid", pid}, {"tid", 0}, {"name", r.bottleneck.empty() ? "rank" : r.bottleneck},
                    {"cat", "rank"}, {"ts", shift_us + 1e6 * r.first_seen_s},
                    {"dur", 1e6 * std::max(0.0, r.last_seen_s - r.first_seen_s)},
                    {"args", {{"collective_wait_ratio", r.collective_wait_ratio ? nlohmann::json(*r.collective_wait_ratio) : nlohmann::json(nullptr)},
                              {"data_stall_ratio", r.data_stall_ratio ? nlohmann::json(*r.data_stall_ratio) : nlohmann::json(nullptr)},
                              {"ended", r.ended}}}});
  const std::size_t buckets = std::max({r.timeline_workers_cores.size(), r.timeline_main_thread_busy.size(),
                                        r.timeline_data_stall.size()});
  for (std::size_t b = 0; b < buckets; ++b) {
    const double ts = shift_us + 1e6 * r.timeline_bucket_s * static_cast<double>(b);
    nlohmann::json cpu = nlohmann::json::object();
    if (b < r.timeline_workers_cores.size()) cpu["loader_workers_cores"] = r.timeline_workers_cores[b];
    if (b < r.timeline_main_thread_busy.size()) cpu["main_thread_busy"] = r.timeline_main_thread_busy[b];
    events.push_back({{"ph", "C"}, {"pid", pid}, {"tid", 0}, {"name", "cpu"}, {"ts", ts}, {"args", cpu}});
    // A bucket no window ended in has no point: the counter holds the last one, as Perfetto draws it.
    if (b < r.timeline_data_stall.size() && r.timeline_data_stall[b])
      events.push_back({{"ph", "C"}, {"pid", pid}, {"tid", 0}, {"name", "data_stall"}, {"ts", ts},
                        {"args", {{"data_stall", *r.timeline_data_stall[b]}}}});
  }
}

// Where a report's time 0 is in Unix nanoseconds: its trace's baseTimeNanoseconds, else its
// watch's start. Each machine's own wall clock: the tracks line up as far as the machines' clocks
// agree (NTP: within milliseconds).
std::optional<std::int64_t> base_ns_of(const nlohmann::json& report, const nlohmann::json& trace) {
  if (trace.is_object() && trace.contains("baseTimeNanoseconds") && trace["baseTimeNanoseconds"].is_number_integer())
    return trace["baseTimeNanoseconds"].get<std::int64_t>();
  const nlohmann::json job = report.value("job", nlohmann::json::object());
  const nlohmann::json begin = job.is_object() ? job.value("begin_unix_s", nlohmann::json()) : nlohmann::json();
  if (!begin.is_number()) return std::nullopt;
  return static_cast<std::int64_t>(begin.get<double>() * 1e9);
}

struct MachineTrace {
  std::string host;
  nlohmann::json report, trace;
  std::optional<std::int64_t> base_ns;
};

// Each report's trace.json shifted onto the job's clock (time 0: the earliest report's), its
// processes renumbered by report and named by host; then a track per rank (add_rank_track),
// shifted as its report.
void write_trace(std::ostream& out, const Report& job, const std::vector<fs::path>& dirs) {
  std::vector<MachineTrace> machines(dirs.size());
  std::optional<std::int64_t> origin_ns;
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    MachineTrace& m = machines[i];
    try {
      m.report = nlohmann::json::parse(read_text(dirs[i] / "report.json"));
      m.trace = nlohmann::json::parse(read_text(dirs[i] / "trace.json"));
    } catch (const std::exception&) {
      continue;  // a machine without its trace.json still has its ranks below
    }
    m.host = m.report["environment"].value("hostname", std::string());
    m.base_ns = base_ns_of(m.report, m.trace);
    if (m.base_ns) origin_ns = std::min(origin_ns.value_or(*m.base_ns), *m.base_ns);
  }
  if (!origin_ns && job.job && job.job->begin_unix_s)
    origin_ns = static_cast<std::int64_t>(*job.job->begin_unix_s * 1e9);
  nlohmann::json events = nlohmann::json::array();
  std::map<std::pair<std::string, int>, double> rank_offset_us;  // by (host, pid)
  for (std::size_t i = 0; i < machines.size(); ++i) {
    const MachineTrace& m = machines[i];
    if (m.trace.is_null()) continue;
    const double offset_us = m.base_ns && origin_ns ? static_cast<double>(*m.base_ns - *origin_ns) / 1e3 : 0;
    if (m.report.contains("ranks") && m.report["ranks"].is_array())
      for (const nlohmann::json& r : m.report["ranks"]) rank_offset_us[{m.host, r.value("pid", 0)}] = offset_us;
    const nlohmann::json& list = m.trace.is_object() ? m.trace.value("traceEvents", nlohmann::json::array()) : m.trace;
    for (nlohmann::json e : list) {
      if (e.contains("pid") && e["pid"].is_number()) e["pid"] = static_cast<int>(1000 * (i + 1)) + e["pid"].get<int>();
      if (e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() + offset_us;
      if (e.value("name", std::string()) == "process_name" && e.contains("args"))
        e["args"]["name"] = m.host + ": " + e["args"].value("name", std::string());
      events.push_back(std::move(e));
    }
  }
  for (const RankSummary& r : job.ranks) {
    const auto shift = rank_offset_us.find({r.host, r.pid});
    add_rank_track(events, r, 100000 + r.rank.value_or(r.pid), shift == rank_offset_us.end() ? 0 : shift->second);
  }
  nlohmann::json trace = {{"displayTimeUnit", "ms"}};
  if (origin_ns) trace["baseTimeNanoseconds"] = *origin_ns;
  trace["traceEvents"] = std::move(events);
  out << trace.dump() << "\n";
}

}  // namespace

void write_merged_job(const fs::path& out, const Report& job, const std::vector<fs::path>& dirs) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw std::runtime_error("cannot create report directory '" + out.string() + "': " + ec.message());
  write_file_atomically((out / "report.json").string(), report_to_json(job));
  write_file_atomically((out / "report.html").string(), report_to_html(job, {}, 0));
  std::ostringstream trace;
  write_trace(trace, job, dirs);
  write_file_atomically((out / "trace.json").string(), trace.str());
}

}  // namespace feedscope
