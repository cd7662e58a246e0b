#include "cli/tune.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

namespace feedscope {

namespace {

struct Candidate {
  RunConfig config;
  std::string knob, from, to, reason;
  double predicted_speedup = 0;
};

using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, bool>;
Key key_of(const RunConfig& c) { return {c.num_workers, c.batch_size, c.prefetch, c.pin_memory}; }

std::string text_of(const RunConfig& c, const std::string& knob) {
  return knobs_label(c, {knob}).substr(knob.size() + 1);
}

class Climber {
 public:
  Climber(const TuneOptions& options) : o_(options) {}

  bool in_bounds(const RunConfig& c) const {
    for (const char* knob : kGridKeys)  // a knob the program does not receive stays as it is
      if (!has_knob(o_.knobs, knob) && text_of(c, knob) != text_of(base_, knob)) return false;
    if (c.num_workers < 0 || c.num_workers > o_.max_workers) return false;
    if (c.prefetch < 1 || c.prefetch > o_.max_prefetch) return false;
    if (c.batch_size < 1 || (o_.max_batch_size > 0 && c.batch_size > o_.max_batch_size)) return false;
    if (o_.max_batch_size == 0 && c.batch_size != base_.batch_size) return false;
    if (o_.ram_budget_bytes > 0 && o_.slab_bytes &&
        loader_host_bytes(c, o_.slab_bytes(c.batch_size)) > o_.ram_budget_bytes)
      return false;
    return true;
  }

  // Moves from `current`, the diagnosis's own recommendations first (best predicted gain
  // first), then the moves that answer its bottleneck.
  std::vector<Candidate> candidates(const RunConfig& current, const Report& report) const {
    std::vector<Candidate> out;
    std::set<Key> seen;
    const auto add = [&](Candidate c) {
      if (!in_bounds(c.config) || measured_.count(key_of(c.config)) || !seen.insert(key_of(c.config)).second)
        return;
      c.from = text_of(current, c.knob);
      c.to = text_of(c.config, c.knob);
      out.push_back(std::move(c));
    };
    std::vector<Recommendation> recs = report.diagnosis.recommendations;
    std::stable_sort(recs.begin(), recs.end(), [](const auto& a, const auto& b) {
      return a.predicted_speedup > b.predicted_speedup;
    });
    for (const Recommendation& r : recs) {
      const auto eq = r.setting.find('=');
      if (eq == std::string::npos) continue;
      const std::string knob = r.setting.substr(0, eq);
      if (knob != "num_workers" && knob != "batch_size" && knob != "prefetch" && knob != "pin_memory")
        continue;  // device=cpu and the like are not the tuner's to change
      Candidate c{current, knob, "", "", r.action, r.predicted_speedup.value_or(0)};
      try {
        set_config_value(c.config, knob, r.setting.substr(eq + 1), "the diagnosis");
      } catch (const ConfigError&) {
        continue;
      }
      add(std::move(c));
    }
    const std::string& b = report.diagnosis.bottleneck;
    const auto step = [&](const std::string& knob, const std::string& why) {
      Candidate c{current, knob, "", "", why, 0};
      if (knob == "num_workers") c.config.num_workers += 1;
      if (knob == "prefetch") c.config.prefetch = std::max<std::int64_t>(2, c.config.prefetch * 2);
      if (knob == "batch_size") c.config.batch_size *= 2;
      if (knob == "pin_memory") c.config.pin_memory = true;
      add(std::move(c));
    };
    if (b == "cpu_preprocess") {
      step("num_workers", "cpu_preprocess: another worker shares the decoding and transforms");
      step("prefetch", "cpu_preprocess: deeper prefetch absorbs uneven sample costs");
    } else if (b == "storage_io") {
      step("prefetch", "storage_io: more reads in flight hide storage latency");
      step("num_workers", "storage_io: another worker issues reads in parallel");
    } else if (b == "host_to_device") {
      step("pin_memory", "host_to_device: pinned slabs copy at full bus speed, asynchronously");
      step("prefetch", "host_to_device: a deeper queue overlaps more copies with steps");
    } else if (b == "launch_overhead") {
      step("batch_size", "launch_overhead: a bigger batch does more work per kernel launch");
    } else {  // the step itself limits: a bigger batch, if allowed, amortizes per-step costs
      step("batch_size", b + ": a bigger batch amortizes the per-step overhead");
      step("num_workers", b + ": a worker more in case loading still stalls the step");
    }
    return out;
  }

  void set_base(const RunConfig& base) { base_ = base; }
  std::map<Key, double> measured_;

 private:
  const TuneOptions& o_;
  RunConfig base_;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

// Minimal parallelism in the knobs it moves: load in the training thread, no prefetch, pageable
// memory.
RunConfig starting_point(const RunConfig& base, const KnobList& knobs) {
  RunConfig c = base;
  if (has_knob(knobs, "num_workers")) c.num_workers = 0;
  if (has_knob(knobs, "prefetch")) c.prefetch = 1;
  if (has_knob(knobs, "pin_memory")) c.pin_memory = false;
  return c;
}

TuneResult run_tune(const RunConfig& base, const TuneOptions& options, const PointRunner& run) {
  if (options.max_workers < 0)
    throw ConfigError("max_workers", "max_workers: " + std::to_string(options.max_workers) +
                                         " is negative; allowed: 0 or more");
  if (options.time_budget_s <= 0)
    throw ConfigError("budget", "budget: " + std::to_string(options.time_budget_s) +
                                    " s leaves no time to run; allowed: more than 0");
  Climber climber(options);
  climber.set_base(base);
  const auto start = std::chrono::steady_clock::now();
  TuneResult result;
  result.knobs = options.knobs;
  result.unit = options.by_iterations ? "it/s" : "samples/s";
  const auto rate_of = [&options](const Report& r) {
    return options.by_iterations ? r.throughput.batches_per_s : r.throughput.samples_per_s;
  };

  RunConfig current = starting_point(base, options.knobs);
  double current_sps = 0;
  Report current_report;
  double last_run_s = 0;

  const auto measure = [&](const RunConfig& config, Report& report) -> bool {
    if (options.stop_requested && options.stop_requested()) {
      result.interrupted = "SIGINT";
      return false;
    }
    const auto t0 = std::chrono::steady_clock::now();
    report = run(config);
    last_run_s = seconds_since(t0);
    if (!report.interrupted.empty()) {
      result.interrupted = report.interrupted;
      return false;
    }
    ++result.runs;
    climber.measured_[key_of(config)] = rate_of(report);
    return true;
  };

  if (!measure(current, current_report)) {
    result.stop_reason = "interrupted before the first run ended";
    result.wall_s = seconds_since(start);
    return result;
  }
  current_sps = rate_of(current_report);
  if (current_sps <= 0) {  // a failing run (or one that counted nothing) is nothing to climb from
    result.stop_reason = "the starting point measured no rate (" +
                         current_report.diagnosis.bottleneck +
                         "): tune climbs from a run that works; see its output";
    result.best = current;
    result.best_bottleneck = current_report.diagnosis.bottleneck;
    result.wall_s = seconds_since(start);
    return result;
  }
  TuneMove first;
  first.run = result.runs;
  first.knob = "start";
  first.to = knobs_label(current, options.knobs);
  first.reason = "minimal parallelism: " + knobs_label(starting_point(base, options.knobs), [&] {
    KnobList moved = options.knobs;  // the batch size is the training's, not parallelism
    std::erase(moved, "batch_size");
    return moved;
  }());
  first.samples_per_s = current_sps;
  first.kept = true;
  first.bottleneck = current_report.diagnosis.bottleneck;
  result.moves.push_back(first);
  if (options.on_move) options.on_move(first);

  for (;;) {
    const std::vector<Candidate> moves = climber.candidates(current, current_report);
    if (moves.empty()) {
      const std::string& b = current_report.diagnosis.bottleneck;
      result.stop_reason =
          b == "cpu_compute" || b == "gpu_compute"
              ? "the step itself is the limit (" + b + "): no loader setting within the bounds "
                "can raise throughput further"
              : "no move left within the bounds (cores, RAM budget, batch size)";
      break;
    }
    bool moved = false, out_of_time = false;
    for (const Candidate& c : moves) {
      if (seconds_since(start) + last_run_s > options.time_budget_s) {
        out_of_time = true;
        break;
      }
      Report report;
      if (!measure(c.config, report)) break;
      TuneMove move;
      move.run = result.runs;
      move.knob = c.knob;
      move.from = c.from;
      move.to = c.to;
      move.reason = c.reason;
      move.predicted_speedup = c.predicted_speedup;
      move.samples_per_s = rate_of(report);
      move.gain = current_sps > 0 ? move.samples_per_s / current_sps - 1 : 0;
      move.kept = move.samples_per_s > current_sps * (1 + options.min_gain);
      move.bottleneck = report.diagnosis.bottleneck;
      result.moves.push_back(move);
      if (options.on_move) options.on_move(move);
      if (move.kept) {
        current = c.config;
        current_sps = move.samples_per_s;
        current_report = std::move(report);
        moved = true;
        break;
      }
    }
    if (!result.interrupted.empty()) {
      result.stop_reason = "interrupted";
      break;
    }
    if (out_of_time) {
      result.stop_reason = "time budget of " + std::to_string(static_cast<int>(options.time_budget_s)) +
                           " s reached";
      break;
    }
    if (!moved) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "no move gains more than %.0f %% over the current point, limited by %s",
                    100 * options.min_gain, current_report.diagnosis.bottleneck.c_str());
      result.stop_reason = buf;
      break;
    }
  }
  result.best = current;
  result.best_samples_per_s = current_sps;
  result.best_bottleneck = current_report.diagnosis.bottleneck;
  result.wall_s = seconds_since(start);
  return result;
}

std::string tune_json(const TuneResult& result) {
  nlohmann::ordered_json j;
  j["schema"] = "feedscope.tune/1";
  nlohmann::ordered_json best = nlohmann::ordered_json::object();
  const RunConfig& b = result.best;
  if (has_knob(result.knobs, "num_workers")) best["num_workers"] = b.num_workers;
  if (has_knob(result.knobs, "batch_size")) best["batch_size"] = b.batch_size;
  if (has_knob(result.knobs, "prefetch")) best["prefetch"] = b.prefetch;
  if (has_knob(result.knobs, "pin_memory")) best["pin_memory"] = b.pin_memory;
  const std::string rate = result.unit == "it/s" ? "iterations_per_s" : "samples_per_s";
  best[rate] = result.best_samples_per_s;
  best["bottleneck"] = result.best_bottleneck;
  j["knobs"] = result.knobs;
  j["unit"] = result.unit;
  j["best"] = result.best_samples_per_s > 0 ? best : nlohmann::ordered_json(nullptr);
  j["stop_reason"] = result.stop_reason;
  j["interrupted"] = result.interrupted.empty() ? nlohmann::ordered_json(nullptr)
                                                : nlohmann::ordered_json(result.interrupted);
  j["runs"] = result.runs;
  j["wall_s"] = result.wall_s;
  nlohmann::ordered_json moves = nlohmann::ordered_json::array();
  for (const TuneMove& m : result.moves) {
    nlohmann::ordered_json q;
    q["run"] = m.run;
    q["knob"] = m.knob;
    q["from"] = m.from;
    q["to"] = m.to;
    q["reason"] = m.reason;
    q["predicted_speedup"] = m.predicted_speedup > 0 ? nlohmann::ordered_json(m.predicted_speedup)
                                                     : nlohmann::ordered_json(nullptr);
    q[rate] = m.samples_per_s;
    q["gain"] = m.gain;
    q["kept"] = m.kept;
    q["bottleneck"] = m.bottleneck;
    moves.push_back(q);
  }
  j["moves"] = moves;
  return j.dump(2) + "\n";
}

}  // namespace feedscope
