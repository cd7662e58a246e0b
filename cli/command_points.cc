#include "cli/command_points.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "cli/output_scanner.h"
#include "cli/watch.h"

namespace feedscope {

namespace {

std::map<std::string, std::string> knob_values(const RunConfig& p) {
  return {{"num_workers", std::to_string(p.num_workers)},
          {"batch_size", std::to_string(p.batch_size)},
          {"prefetch", std::to_string(p.prefetch)},
          {"pin_memory", p.pin_memory ? "1" : "0"},
          {"cpu_threads", std::to_string(p.cpu_threads)}};
}

// The placeholders that give `knob` to a command: {knob}, and {threads} for cpu_threads.
std::vector<std::string> placeholders(const std::string& knob) {
  if (knob == "cpu_threads") return {"{cpu_threads}", "{threads}"};
  return {"{" + knob + "}"};
}

bool receives(const std::vector<std::string>& command, const std::string& knob) {
  return std::any_of(command.begin(), command.end(), [&](const std::string& a) {
    for (const std::string& p : placeholders(knob))
      if (a.find(p) != std::string::npos) return true;
    return false;
  });
}

}  // namespace

std::vector<std::string> substitute_knobs(const std::vector<std::string>& command,
                                          const RunConfig& point) {
  const auto values = knob_values(point);
  std::vector<std::string> out;
  for (std::string arg : command) {
    for (const auto& [knob, value] : values)
      for (const std::string& placeholder : placeholders(knob))
        for (std::size_t at = arg.find(placeholder); at != std::string::npos;
             at = arg.find(placeholder, at + value.size()))
          arg.replace(at, placeholder.size(), value);
    out.push_back(std::move(arg));
  }
  return out;
}

std::map<std::string, std::string> knob_environment(const RunConfig& point) {
  std::map<std::string, std::string> env;
  for (const auto& [knob, value] : knob_values(point)) {
    std::string name = "FEEDSCOPE_" + knob;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
    env[name] = value;
  }
  // torch's intra-op pool (OpenMP) and MKL's read these as they start: the program needs no
  // placeholder for its thread count. 0 leaves the program's own default.
  if (point.cpu_threads > 0)
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = std::to_string(point.cpu_threads);
  return env;
}

std::vector<std::string> knobs_missing_from(const std::vector<std::string>& command,
                                            const SweepGrid& grid) {
  const std::pair<const char*, std::size_t> varied[] = {{"num_workers", grid.num_workers.size()},
                                                         {"batch_size", grid.batch_size.size()},
                                                         {"prefetch", grid.prefetch.size()},
                                                         {"pin_memory", grid.pin_memory.size()}};
  std::vector<std::string> missing;
  for (const auto& [knob, values] : varied)
    if (values >= 2 && !receives(command, knob)) missing.emplace_back(knob);
  return missing;
}

KnobList knobs_received(const std::vector<std::string>& command) {
  KnobList received;
  for (const char* knob : kGridKeys)
    if (receives(command, knob)) received.emplace_back(knob);
  return received;
}

KnobList sweep_knobs(const std::vector<std::string>& command, const SweepGrid& grid) {
  const KnobList received = knobs_received(command);
  const std::pair<const char*, bool> named[] = {{"num_workers", !grid.num_workers.empty()},
                                                 {"batch_size", !grid.batch_size.empty()},
                                                 {"prefetch", !grid.prefetch.empty()},
                                                 {"pin_memory", !grid.pin_memory.empty()},
                                                 {"cpu_threads", !grid.cpu_threads.empty()}};
  KnobList knobs;
  for (const auto& [knob, set] : named)
    if (set || has_knob(received, knob)) knobs.emplace_back(knob);
  return knobs;
}

KnobList tune_knobs(const std::vector<std::string>& command) {
  const KnobList received = knobs_received(command);
  return received.empty() ? all_knobs() : received;
}

bool counts_iterations(const ProgramPoints& program) {
  if (program.throughput_pattern.empty() || has_knob(program.knobs, "batch_size")) return false;
  const ThroughputUnit unit = program.throughput_unit.empty()
                                  ? infer_throughput_unit(program.throughput_pattern)
                                  : parse_throughput_unit(program.throughput_unit);
  return unit != ThroughputUnit::samples_per_s;
}

namespace {

// What watch runs for one point: the command and environment with the point's knobs, quietly, in
// a report directory of its own, its output kept (and read) in output.log.
WatchOptions point_watch(const RunConfig& base, const ProgramPoints& program, const RunConfig& point) {
  WatchOptions o;
  o.command = substitute_knobs(program.command, point);
  o.env = knob_environment(point);
  // Python buffers a pipe's output until exit: unbuffered, its first line tells when work began.
  if (std::getenv("PYTHONUNBUFFERED") == nullptr) o.env["PYTHONUNBUFFERED"] = "1";
  o.throughput_pattern = program.throughput_pattern;
  o.throughput_unit = program.throughput_unit;
  o.batch_size = has_knob(program.knobs, "batch_size") ? point.batch_size : 0;
  o.sample_hz = program.sample_hz;
  o.duration_s = base.duration;
  std::string dir = knobs_label(point, program.knobs.empty() ? all_knobs() : program.knobs);
  std::replace(dir.begin(), dir.end(), ' ', '_');
  o.report_dir = (std::filesystem::path(base.report_dir) / "points" / dir).string();
  o.print = false;
  o.keep_output = true;
  return o;
}

// A fixed workload over the time from the program's first sign of work to its end: start-up
// (imports, data set indexing, the CUDA context) is no part of the pipeline a point varies.
double workload_rate(const ProgramPoints& program, const WatchOutcome& outcome, ProgramSummary& p) {
  const double samples = program.workload_samples > 0 ? static_cast<double>(program.workload_samples) : 1.0;
  const double began_s = outcome.work_began_s.value_or(0);
  const double work_s = p.wall_s - began_s;
  char buf[300];
  std::snprintf(buf, sizeof buf, "throughput: %.0f %s over %.2f s, from %s (%.2f s into the run) to its end",
                samples, program.workload_samples > 0 ? "samples (--workload-samples)" : "run",
                work_s, outcome.work_began_s ? outcome.work_began_at.c_str() : "its start", began_s);
  p.notes.push_back(buf);
  return work_s > 0 ? samples / work_s : 0;
}

}  // namespace

PointRunner program_point_runner(const RunConfig& base, const ProgramPoints& program) {
  if (program.command.empty())
    throw ConfigError("command", "no program after --: feedscope sweep|tune [options] -- COMMAND "
                                 "... {num_workers} ... {batch_size}");
  if (!program.throughput_pattern.empty()) check_throughput_pattern(program.throughput_pattern);
  if (!program.throughput_unit.empty()) parse_throughput_unit(program.throughput_unit);
  const bool iterations = counts_iterations(program);
  return [base, program, iterations](const RunConfig& point) {
    std::ostringstream quiet;
    WatchOutcome outcome = watch_program(point_watch(base, program, point), quiet);
    Report& r = outcome.report;
    ProgramSummary& p = *r.program;
    double& rate = iterations ? r.throughput.batches_per_s : r.throughput.samples_per_s;
    if (p.ended == "failed" || p.ended == "crashed") {
      rate = 0;
      r.diagnosis.bottleneck = "failed (" + p.exit + ")";
    } else if (p.spans.empty() && !(rate > 0)) {
      rate = workload_rate(program, outcome, p);
    }
    return r;
  };
}

}  // namespace feedscope
