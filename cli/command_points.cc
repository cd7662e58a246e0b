#include "cli/command_points.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "cli/tune.h"
#include "cli/watch.h"

namespace feedscope {

namespace {

std::map<std::string, std::string> knob_values(const RunConfig& p) {
  return {{"num_workers", std::to_string(p.num_workers)},
          {"batch_size", std::to_string(p.batch_size)},
          {"prefetch", std::to_string(p.prefetch)},
          {"pin_memory", p.pin_memory ? "1" : "0"}};
}

}  // namespace

std::vector<std::string> substitute_knobs(const std::vector<std::string>& command,
                                          const RunConfig& point) {
  const auto values = knob_values(point);
  std::vector<std::string> out;
  for (std::string arg : command) {
    for (const auto& [knob, value] : values) {
      const std::string placeholder = "{" + knob + "}";
      for (std::size_t at = arg.find(placeholder); at != std::string::npos;
           at = arg.find(placeholder, at + value.size()))
        arg.replace(at, placeholder.size(), value);
    }
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
  return env;
}

std::vector<std::string> knobs_missing_from(const std::vector<std::string>& command,
                                            const SweepGrid& grid) {
  const std::pair<const char*, std::size_t> varied[] = {{"num_workers", grid.num_workers.size()},
                                                         {"batch_size", grid.batch_size.size()},
                                                         {"prefetch", grid.prefetch.size()},
                                                         {"pin_memory", grid.pin_memory.size()}};
  std::vector<std::string> missing;
  for (const auto& [knob, values] : varied) {
    if (values < 2) continue;
    const std::string placeholder = "{" + std::string(knob) + "}";
    const bool used = std::any_of(command.begin(), command.end(), [&](const std::string& a) {
      return a.find(placeholder) != std::string::npos;
    });
    if (!used) missing.emplace_back(knob);
  }
  return missing;
}

PointRunner program_point_runner(const RunConfig& base, const ProgramPoints& program) {
  if (program.command.empty())
    throw ConfigError("command", "no program after --: feedscope sweep|tune [options] -- COMMAND "
                                 "... {num_workers} ... {batch_size}");
  WatchOptions check;
  check.command = program.command;
  check.throughput_pattern = program.throughput_pattern;
  check.sample_hz = program.sample_hz;
  check.duration_s = base.duration;
  return [base, program, check](const RunConfig& point) {
    WatchOptions o = check;
    o.command = substitute_knobs(program.command, point);
    o.env = knob_environment(point);
    std::string dir = knobs_label(point);
    std::replace(dir.begin(), dir.end(), ' ', '_');
    o.report_dir = (std::filesystem::path(base.report_dir) / "points" / dir).string();
    o.print = false;
    o.keep_output = true;
    std::ostringstream quiet;
    WatchOutcome outcome = watch_program(o, quiet);
    Report& r = outcome.report;
    const ProgramSummary& p = *r.program;
    if (p.ended == "failed" || p.ended == "crashed") {
      r.throughput.samples_per_s = 0;
      r.diagnosis.bottleneck = "failed (" + p.exit + ")";
    } else if (p.spans.empty() && !(r.throughput.samples_per_s > 0)) {
      const double samples = program.workload_samples > 0 ? static_cast<double>(program.workload_samples) : 1.0;
      r.throughput.samples_per_s = p.wall_s > 0 ? samples / p.wall_s : 0;
    }
    return r;
  };
}

}  // namespace feedscope
