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

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string on_off(bool value) { return value ? "on" : "off"; }

}  // namespace

SweepGrid parse_grid(const std::map<std::string, std::string>& lists) {
  SweepGrid grid;
  for (const auto& [key, text] : lists) {
    const std::string source = "--" + std::string(key == "num_workers"  ? "num-workers"
                                                  : key == "batch_size" ? "batch-size"
                                                  : key == "pin_memory" ? "pin-memory"
                                                                        : key);
    bool known = false;
    for (const char* k : kGridKeys) known = known || key == k;
    if (!known)
      throw ConfigError(key, key + ": not a sweep dimension; allowed: num_workers, batch_size, "
                                   "prefetch, pin_memory");
    for (const std::string& value : split_list(text)) {
      if (value.empty())
        throw ConfigError(key, key + ": '" + text + "' (from " + source +
                                   ") has an empty item; write values separated by commas, e.g. 0,1,2");
      RunConfig probe;  // the config's own check names the key, the value and what is allowed
      set_config_value(probe, key, value, source);
      if (key == "num_workers") push_unique(grid.num_workers, probe.num_workers);
      if (key == "batch_size") push_unique(grid.batch_size, probe.batch_size);
      if (key == "prefetch") push_unique(grid.prefetch, probe.prefetch);
      if (key == "pin_memory") push_unique(grid.pin_memory, probe.pin_memory);
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
        for (const bool pin : or_base(grid.pin_memory, base.pin_memory)) {
          RunConfig c = base;
          c.num_workers = nw;
          c.batch_size = bs;
          c.prefetch = pf;
          c.pin_memory = pin;
          points.push_back(c);
        }
  return points;
}

std::string SweepPoint::label() const {
  return "num_workers=" + std::to_string(num_workers) + " batch_size=" +
         std::to_string(batch_size) + " prefetch=" + std::to_string(prefetch) +
         " pin_memory=" + on_off(pin_memory);
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::uint64_t loader_host_bytes(const RunConfig& config, std::uint64_t slab_bytes) {
  LoaderOptions o;  // the run's loader: these two knobs and the default spare slabs
  o.num_workers = static_cast<int>(config.num_workers);
  o.prefetch = static_cast<int>(config.prefetch);
  return slab_bytes * static_cast<std::uint64_t>(slab_count(o));
}

void choose_best(SweepResult& result, double tolerance) {
  result.best = result.economical = -1;
  for (std::size_t i = 0; i < result.points.size(); ++i)
    if (result.best < 0 || result.points[i].median_samples_per_s >
                               result.points[static_cast<std::size_t>(result.best)].median_samples_per_s)
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

SweepResult run_sweep(const RunConfig& base, const SweepGrid& grid, const SweepOptions& options,
                      const PointRunner& run) {
  if (options.repeats < 1)
    throw ConfigError("repeats", "repeats: " + std::to_string(options.repeats) +
                                     " is not allowed; allowed: 1 or more");
  const std::vector<RunConfig> configs = grid_points(base, grid);
  SweepResult result;
  result.planned = configs.size();
  const auto start = std::chrono::steady_clock::now();
  SweepProgress progress;
  progress.runs_total = configs.size() * static_cast<std::size_t>(options.repeats);

  for (const RunConfig& config : configs) {
    SweepPoint point;
    point.num_workers = config.num_workers;
    point.batch_size = config.batch_size;
    point.prefetch = config.prefetch;
    point.pin_memory = config.pin_memory;
    if (options.slab_bytes)
      point.host_bytes = loader_host_bytes(config, options.slab_bytes(config.batch_size));
    std::vector<Report> reports;
    for (int r = 0; r < options.repeats; ++r) {
      if (options.stop_requested && options.stop_requested()) {
        result.interrupted = "SIGINT";
        break;
      }
      progress.running = point.label() + (options.repeats > 1 ? " (repeat " + std::to_string(r + 1) +
                                                                    "/" + std::to_string(options.repeats) + ")"
                                                              : "");
      progress.finished = nullptr;
      if (options.on_progress) options.on_progress(progress);
      Report report = run(config);
      if (!report.interrupted.empty()) {  // a partial run measures nothing comparable
        result.interrupted = report.interrupted;
        break;
      }
      point.pinned = config.pin_memory && report.environment.device.rfind("cuda", 0) == 0;
      point.samples_per_s.push_back(report.throughput.samples_per_s);
      reports.push_back(std::move(report));
      ++progress.runs_done;
      progress.elapsed_s = seconds_since(start);
      progress.eta_s = progress.elapsed_s / static_cast<double>(progress.runs_done) *
                       static_cast<double>(progress.runs_total - progress.runs_done);
    }
    if (!result.interrupted.empty()) break;
    point.median_samples_per_s = median(point.samples_per_s);
    std::size_t nearest = 0;
    for (std::size_t i = 1; i < reports.size(); ++i)
      if (std::abs(point.samples_per_s[i] - point.median_samples_per_s) <
          std::abs(point.samples_per_s[nearest] - point.median_samples_per_s))
        nearest = i;
    point.bottleneck = reports[nearest].diagnosis.bottleneck;
    point.data_stall_ratio = reports[nearest].diagnosis.data_stall_ratio;
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
  std::string out =
      "num_workers,batch_size,prefetch,pin_memory,median_samples_per_s,repeats,samples_per_s,"
      "bottleneck,data_stall_ratio,host_bytes,pinned\n";
  char buf[128];
  for (const SweepPoint& p : result.points) {
    std::string repeats;
    for (const double v : p.samples_per_s) {
      std::snprintf(buf, sizeof buf, "%s%.2f", repeats.empty() ? "" : ";", v);
      repeats += buf;
    }
    std::snprintf(buf, sizeof buf, "%.2f", p.median_samples_per_s);
    out += std::to_string(p.num_workers) + "," + std::to_string(p.batch_size) + "," +
           std::to_string(p.prefetch) + "," + on_off(p.pin_memory) + "," + buf + "," +
           std::to_string(p.samples_per_s.size()) + "," + repeats + "," + p.bottleneck + ",";
    std::snprintf(buf, sizeof buf, "%.4f", p.data_stall_ratio);
    out += std::string(buf) + "," + std::to_string(p.host_bytes) + "," + (p.pinned ? "1" : "0") +
           "\n";
  }
  return out;
}

std::string sweep_json(const SweepResult& result, const RunConfig& base) {
  nlohmann::ordered_json j;
  j["schema"] = "feedscope.sweep/1";
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  for (const auto& [key, value] : config_entries(base))
    std::visit([&](const auto& v) { config[key] = v; }, value);
  j["base_config"] = config;
  j["planned_points"] = result.planned;
  j["completed_points"] = result.points.size();
  j["interrupted"] = result.interrupted.empty() ? nlohmann::ordered_json(nullptr)
                                                : nlohmann::ordered_json(result.interrupted);
  j["wall_s"] = result.wall_s;
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const SweepPoint& p : result.points) {
    nlohmann::ordered_json q;
    q["num_workers"] = p.num_workers;
    q["batch_size"] = p.batch_size;
    q["prefetch"] = p.prefetch;
    q["pin_memory"] = p.pin_memory;
    q["median_samples_per_s"] = p.median_samples_per_s;
    q["samples_per_s"] = p.samples_per_s;
    q["bottleneck"] = p.bottleneck;
    q["data_stall_ratio"] = p.data_stall_ratio;
    q["host_bytes"] = p.host_bytes;
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
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %7s %6s %8s %4s %12s %8s %-16s %10s\n", "workers", "batch",
                "prefetch", "pin", "samples/s", "stall", "bottleneck", "host MiB");
  out += buf;
  for (std::size_t i = 0; i < result.points.size(); ++i) {
    const SweepPoint& p = result.points[i];
    const char* mark = static_cast<int>(i) == result.best         ? " <- best"
                       : static_cast<int>(i) == result.economical ? " <- economical"
                                                                  : "";
    std::snprintf(buf, sizeof buf, "  %7lld %6lld %8lld %4s %12.1f %7.1f%% %-16s %10.1f%s\n",
                  static_cast<long long>(p.num_workers), static_cast<long long>(p.batch_size),
                  static_cast<long long>(p.prefetch), p.pin_memory ? "on" : "off",
                  p.median_samples_per_s, 100 * p.data_stall_ratio, p.bottleneck.c_str(),
                  static_cast<double>(p.host_bytes) / (1 << 20), mark);
    out += buf;
  }
  return out;
}

std::string yaml_snippet(const SweepPoint& point) {
  return "num_workers: " + std::to_string(point.num_workers) +
         "\nbatch_size: " + std::to_string(point.batch_size) +
         "\nprefetch: " + std::to_string(point.prefetch) + "\npin_memory: " +
         (point.pin_memory ? "true" : "false") + "\n";
}

}  // namespace feedscope
