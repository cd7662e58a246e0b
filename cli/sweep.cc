#include "cli/sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "loader/batch_loader.h"

namespace feedscope {

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    const auto b = item.find_first_not_of(" \t");
    const auto e = item.find_last_not_of(" \t");
    items.push_back(b == std::string::npos ? "" : item.substr(b, e - b + 1));
  }
  if (!text.empty() && text.back() == ',') items.push_back("");
  return items;
}

template <typename T>
void push_unique(std::vector<T>& values, T value) {
  if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
}

std::string on_off(bool value) { return value ? "on" : "off"; }

std::string knob_text(const RunConfig& c, const std::string& knob) {
  if (knob == "num_workers") return std::to_string(c.num_workers);
  if (knob == "batch_size") return std::to_string(c.batch_size);
  if (knob == "prefetch") return std::to_string(c.prefetch);
  if (knob == "cpu_threads") return c.cpu_threads > 0 ? std::to_string(c.cpu_threads) : "default";
  return on_off(c.pin_memory);
}

SweepPoint point_at(const RunConfig& config, const SweepOptions& options) {
  SweepPoint point;
  point.num_workers = config.num_workers;
  point.batch_size = config.batch_size;
  point.prefetch = config.prefetch;
  point.pin_memory = config.pin_memory;
  point.cpu_threads = config.cpu_threads;
  if (options.slab_bytes)
    point.host_bytes = loader_host_bytes(config, options.slab_bytes(config.batch_size));
  return point;
}

double rate_of(const Report& report, const SweepOptions& options) {
  return options.by_iterations ? report.throughput.batches_per_s : report.throughput.samples_per_s;
}

// The median of the repeats, with the bottleneck and data stall of the repeat nearest it.
void settle(SweepPoint& point, const std::vector<Report>& reports) {
  point.median_samples_per_s = median(point.samples_per_s);
  std::size_t nearest = 0;
  for (std::size_t i = 1; i < reports.size(); ++i)
    if (std::abs(point.samples_per_s[i] - point.median_samples_per_s) <
        std::abs(point.samples_per_s[nearest] - point.median_samples_per_s))
      nearest = i;
  const Diagnosis& d = reports[nearest].diagnosis;
  point.bottleneck = d.bottleneck;
  point.data_stall_ratio = d.data_stall_source.empty() ? std::nullopt : std::optional(d.data_stall_ratio);
}

// The time left at the mean time per run so far.
void update_eta(SweepProgress& p, std::chrono::steady_clock::time_point start) {
  p.elapsed_s = seconds_since(start);
  p.eta_s = p.elapsed_s / static_cast<double>(p.runs_done) * static_cast<double>(p.runs_total - p.runs_done);
}

// Without the spaces at its end: a padded last column leaves them.
std::string trim_end(std::string text) {
  text.erase(text.find_last_not_of(' ') + 1);
  return text;
}

// The name of the points' figures in sweep.csv and sweep.json.
std::string rate_key(const SweepResult& result) {
  return result.unit == "it/s" ? "iterations_per_s" : "samples_per_s";
}

// The progress line's "(repeat 2 of at most 3)".
std::string repeat_text(int r, int repeats) {
  if (repeats < 2) return "";
  return " (repeat " + std::to_string(r + 1) + " of at most " + std::to_string(repeats) + ")";
}

}  // namespace

SweepGrid parse_grid(const std::map<std::string, std::string>& lists) {
  SweepGrid grid;
  for (const auto& [key, text] : lists) {
    const std::string source = "--" + std::string(key == "num_workers"  ? "num-workers"
                                                  : key == "batch_size" ? "batch-size"
                                                  : key == "pin_memory" ? "pin-memory"
                                                  : key == "cpu_threads" ? "cpu-threads"
                                                                        : key);
    bool known = false;
    for (const char* k : kGridKeys) known = known || key == k;
    if (!known)
      throw ConfigError(key, key + ": not a sweep dimension; allowed: num_workers, batch_size, "
                                   "prefetch, pin_memory, cpu_threads");
    for (const std::string& value : split_list(text)) {
      if (value.empty())
        throw ConfigError(key, key + ": '" + text + "' (from " + source +
                                   ") has an empty item; write values separated by commas, e.g. 0,1,2");
      RunConfig probe;  // the config's own check names the key, the value and what is allowed
      set_config_value(probe, key, value, source);
      if (value == "auto")
        throw ConfigError(key, key + ": 'auto' (from " + source + ") is not a sweep point: a sweep "
                                     "measures fixed settings; run `feedscope run --" +
                                     (key == "num_workers" ? "num-workers" : key) +
                                     " auto` beside it");
      if (key == "num_workers") push_unique(grid.num_workers, probe.num_workers);
      if (key == "batch_size") push_unique(grid.batch_size, probe.batch_size);
      if (key == "prefetch") push_unique(grid.prefetch, probe.prefetch);
      if (key == "pin_memory") push_unique(grid.pin_memory, probe.pin_memory);
      if (key == "cpu_threads") push_unique(grid.cpu_threads, probe.cpu_threads);
    }
  }
  return grid;
}

std::vector<RunConfig> grid_points(const RunConfig& base, const SweepGrid& grid) {
  const auto or_base = [](const auto& values, auto fallback) {
    using T = decltype(fallback);
    return values.empty() ? std::vector<T>{fallback} : std::vector<T>(values.begin(), values.end());
  };
  std::vector<RunConfig> points;
  for (const std::int64_t nw : or_base(grid.num_workers, base.num_workers))
    for (const std::int64_t bs : or_base(grid.batch_size, base.batch_size))
      for (const std::int64_t pf : or_base(grid.prefetch, base.prefetch))
        for (const bool pin : or_base(grid.pin_memory, base.pin_memory))
          for (const std::int64_t threads : or_base(grid.cpu_threads, base.cpu_threads)) {
            RunConfig c = base;
            c.num_workers = nw;
            c.batch_size = bs;
            c.prefetch = pf;
            c.pin_memory = pin;
            c.cpu_threads = threads;
            points.push_back(c);
          }
  return points;
}

KnobList all_knobs() { return KnobList(std::begin(kGridKeys), std::begin(kGridKeys) + 4); }

bool has_knob(const KnobList& knobs, const std::string& knob) {
  return std::find(knobs.begin(), knobs.end(), knob) != knobs.end();
}

std::string knobs_label(const RunConfig& c, const KnobList& knobs) {
  std::string out;
  for (const std::string& knob : knobs)
    out += (out.empty() ? "" : " ") + knob + "=" + knob_text(c, knob);
  return out;
}

RunConfig SweepPoint::knobs() const {
  RunConfig c;
  c.num_workers = num_workers;
  c.batch_size = batch_size;
  c.prefetch = prefetch;
  c.pin_memory = pin_memory;
  c.cpu_threads = cpu_threads;
  return c;
}

std::string SweepPoint::label(const KnobList& knobs) const { return knobs_label(this->knobs(), knobs); }

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

bool repeats_agree(const std::vector<double>& values, double tolerance) {
  if (values.size() < 2 || tolerance <= 0) return false;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return *hi - *lo <= tolerance * median(values);
}

std::uint64_t loader_host_bytes(const RunConfig& config, std::uint64_t slab_bytes) {
  LoaderOptions o;  // the run's loader: these two knobs and the default spare slabs
  o.num_workers = static_cast<int>(config.num_workers);
  o.prefetch = static_cast<int>(config.prefetch);
  return slab_bytes * static_cast<std::uint64_t>(slab_count(o));
}

void choose_best(SweepResult& result, double tolerance) {
  result.best = result.economical = -1;
  // A point that measured no rate (every run failed, or printed nothing to count) is no choice.
  for (std::size_t i = 0; i < result.points.size(); ++i)
    if (result.points[i].median_samples_per_s > 0 &&
        (result.best < 0 || result.points[i].median_samples_per_s >
                                result.points[static_cast<std::size_t>(result.best)].median_samples_per_s))
      result.best = static_cast<int>(i);
  if (result.best < 0) return;
  const double floor =
      (1 - tolerance) * result.points[static_cast<std::size_t>(result.best)].median_samples_per_s;
  for (std::size_t i = 0; i < result.points.size(); ++i) {
    const SweepPoint& p = result.points[i];
    if (p.median_samples_per_s < floor) continue;
    if (result.economical < 0) {
      result.economical = static_cast<int>(i);
      continue;
    }
    const SweepPoint& e = result.points[static_cast<std::size_t>(result.economical)];
    // Fewer threads first, then less memory (pinned memory is the scarcer kind), then speed.
    const auto key = [](const SweepPoint& q) {
      return std::tuple(q.num_workers, q.pinned ? q.host_bytes : 0, q.host_bytes,
                        -q.median_samples_per_s);
    };
    if (key(p) < key(e)) result.economical = static_cast<int>(i);
  }
}

SweepResult sweep_result_for(const SweepOptions& options) {
  SweepResult result;
  result.knobs = options.knobs;
  result.unit = options.by_iterations ? "it/s" : "samples/s";
  result.host_bytes_known = static_cast<bool>(options.slab_bytes);
  result.command = options.command;
  return result;
}

SweepResult run_sweep(const RunConfig& base, const SweepGrid& grid, const SweepOptions& options,
                      const PointRunner& run) {
  if (options.repeats < 1)
    throw ConfigError("repeats", "repeats: " + std::to_string(options.repeats) +
                                     " is not allowed; allowed: 1 or more");
  const std::vector<RunConfig> configs = grid_points(base, grid);
  SweepResult result = sweep_result_for(options);
  result.planned = configs.size();
  const auto start = std::chrono::steady_clock::now();
  SweepProgress progress;
  progress.runs_total = configs.size() * static_cast<std::size_t>(options.repeats);

  for (const RunConfig& config : configs) {
    SweepPoint point = point_at(config, options);
    std::vector<Report> reports;
    for (int r = 0; r < options.repeats && !repeats_agree(point.samples_per_s, options.agree_within); ++r) {
      if (options.stop_requested && options.stop_requested()) {
        result.interrupted = "SIGINT";
        break;
      }
      progress.running = point.label(options.knobs) + repeat_text(r, options.repeats);
      progress.finished = nullptr;
      if (options.on_progress) options.on_progress(progress);
      Report report = run(config);
      if (!report.interrupted.empty()) {  // a partial run measures nothing comparable
        result.interrupted = report.interrupted;
        break;
      }
      point.pinned = config.pin_memory && report.environment.device.rfind("cuda", 0) == 0;
      point.samples_per_s.push_back(rate_of(report, options));
      reports.push_back(std::move(report));
      ++progress.runs_done;
      update_eta(progress, start);
    }
    if (!result.interrupted.empty()) break;
    // Repeats the agreement saved are not run: the total and the ETA shrink by them.
    progress.runs_total -= static_cast<std::size_t>(options.repeats) - reports.size();
    update_eta(progress, start);
    settle(point, reports);
    result.points.push_back(std::move(point));
    progress.finished = &result.points.back();
    progress.running.clear();
    if (options.on_progress) options.on_progress(progress);
  }
  result.wall_s = seconds_since(start);
  choose_best(result);
  return result;
}

std::string sweep_csv(const SweepResult& result) {
  const std::string rate = rate_key(result);
  std::string out;
  for (const std::string& knob : result.knobs) out += knob + ",";
  out += "median_" + rate + ",repeats," + rate + ",bottleneck,data_stall_ratio," +
         (result.host_bytes_known ? "host_bytes,pinned\n" : "pinned\n");
  char buf[128];
  for (const SweepPoint& p : result.points) {
    for (const std::string& knob : result.knobs) out += knob_text(p.knobs(), knob) + ",";
    std::string repeats;
    for (const double v : p.samples_per_s) {
      std::snprintf(buf, sizeof buf, "%s%.2f", repeats.empty() ? "" : ";", v);
      repeats += buf;
    }
    std::snprintf(buf, sizeof buf, "%.2f", p.median_samples_per_s);
    out += std::string(buf) + "," + std::to_string(p.samples_per_s.size()) + "," + repeats + "," +
           p.bottleneck + ",";
    if (p.data_stall_ratio) {  // empty where nothing measured it
      std::snprintf(buf, sizeof buf, "%.4f", *p.data_stall_ratio);
      out += buf;
    }
    if (result.host_bytes_known) out += "," + std::to_string(p.host_bytes);
    out += std::string(",") + (p.pinned ? "1" : "0") + "\n";
  }
  return out;
}

std::string sweep_json(const SweepResult& result, const RunConfig& base) {
  const std::string rate = rate_key(result);
  nlohmann::ordered_json j;
  j["schema"] = "feedscope.sweep/1";
  if (result.command.empty()) {
    nlohmann::ordered_json config = nlohmann::ordered_json::object();
    for (const auto& [key, value] : config_entries(base))
      std::visit([&](const auto& v) { config[key] = v; }, value);
    j["base_config"] = config;
  } else {
    j["command"] = result.command;
  }
  j["knobs"] = result.knobs;
  j["unit"] = result.unit;
  j["planned_points"] = result.planned;
  j["completed_points"] = result.points.size();
  j["interrupted"] = result.interrupted.empty() ? nlohmann::ordered_json(nullptr)
                                                : nlohmann::ordered_json(result.interrupted);
  j["wall_s"] = result.wall_s;
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const SweepPoint& p : result.points) {
    nlohmann::ordered_json q;
    if (has_knob(result.knobs, "num_workers")) q["num_workers"] = p.num_workers;
    if (has_knob(result.knobs, "batch_size")) q["batch_size"] = p.batch_size;
    if (has_knob(result.knobs, "prefetch")) q["prefetch"] = p.prefetch;
    if (has_knob(result.knobs, "pin_memory")) q["pin_memory"] = p.pin_memory;
    if (has_knob(result.knobs, "cpu_threads"))
      q["cpu_threads"] = p.cpu_threads > 0 ? nlohmann::ordered_json(p.cpu_threads) : nlohmann::ordered_json(nullptr);
    q["median_" + rate] = p.median_samples_per_s;
    q[rate] = p.samples_per_s;
    q["bottleneck"] = p.bottleneck;
    q["data_stall_ratio"] = p.data_stall_ratio ? nlohmann::ordered_json(*p.data_stall_ratio)
                                               : nlohmann::ordered_json(nullptr);
    q["host_bytes"] = result.host_bytes_known ? nlohmann::ordered_json(p.host_bytes)
                                              : nlohmann::ordered_json(nullptr);
    q["pinned"] = p.pinned;
    points.push_back(q);
  }
  j["points"] = points;
  const auto index = [](int i) { return i < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(i); };
  j["best"] = index(result.best);
  j["economical"] = index(result.economical);
  return j.dump(2) + "\n";
}

std::string sweep_table(const SweepResult& result) {
  // Each knob's column: its heading and width.
  const std::map<std::string, std::pair<const char*, int>> columns = {
      {"num_workers", {"workers", 7}}, {"batch_size", {"batch", 6}},
      {"prefetch", {"prefetch", 8}},   {"pin_memory", {"pin", 4}},
      {"cpu_threads", {"threads", 7}}};
  std::string out = " ";
  char buf[256];
  for (const std::string& knob : result.knobs) {
    const auto& [heading, width] = columns.at(knob);
    std::snprintf(buf, sizeof buf, " %*s", width, heading);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, " %12s %8s %-16s", result.unit.c_str(), "stall", "bottleneck");
  out += buf;
  out += result.host_bytes_known ? "   host MiB" : "";
  out = trim_end(out) + "\n";
  for (std::size_t i = 0; i < result.points.size(); ++i) {
    const SweepPoint& p = result.points[i];
    const char* mark = static_cast<int>(i) == result.best         ? " <- best"
                       : static_cast<int>(i) == result.economical ? " <- economical"
                                                                  : "";
    out += " ";
    for (const std::string& knob : result.knobs) {
      std::snprintf(buf, sizeof buf, " %*s", columns.at(knob).second, knob_text(p.knobs(), knob).c_str());
      out += buf;
    }
    char stall[16] = "       -";  // not measured
    if (p.data_stall_ratio) std::snprintf(stall, sizeof stall, "%7.1f%%", 100 * *p.data_stall_ratio);
    std::snprintf(buf, sizeof buf, " %12.1f %s %-16s", p.median_samples_per_s, stall, p.bottleneck.c_str());
    out += buf;
    if (result.host_bytes_known) {
      std::snprintf(buf, sizeof buf, " %10.1f", static_cast<double>(p.host_bytes) / (1 << 20));
      out += buf;
    }
    out = trim_end(out + mark) + "\n";
  }
  return out;
}

std::string yaml_snippet(const SweepPoint& point, const KnobList& knobs) {
  std::string out;
  for (const std::string& knob : knobs) {
    std::string value = knob_text(point.knobs(), knob);
    if (knob == "pin_memory") value = point.pin_memory ? "true" : "false";
    out += knob + ": " + value + "\n";
  }
  return out;
}

}  // namespace feedscope
