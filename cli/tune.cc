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

using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, bool, std::int64_t>;
Key key_of(const RunConfig& c) {
  return {c.num_workers, c.batch_size, c.prefetch, c.pin_memory, c.cpu_threads};
}

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
    if (c.cpu_threads < 0 || c.cpu_threads > o_.max_threads) return false;
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
      if (knob == "cpu_threads") c.config.cpu_threads = std::max<std::int64_t>(2, c.config.cpu_threads * 2);
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
      if (b == "cpu_compute")
        step("cpu_threads", "cpu_compute: more of torch's threads share the step (OMP_NUM_THREADS)");
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

}  // namespace

// Minimal parallelism in the knobs it moves: load in the training thread, no prefetch, pageable
// memory.
RunConfig starting_point(const RunConfig& base, const KnobList& knobs) {
  RunConfig c = base;
  if (has_knob(knobs, "num_workers")) c.num_workers = 0;
  if (has_knob(knobs, "prefetch")) c.prefetch = 1;
  if (has_knob(knobs, "pin_memory")) c.pin_memory = false;
  if (has_knob(knobs, "cpu_threads")) c.cpu_threads = 1;
  return c;
}

namespace {

void check_tune_options(const TuneOptions& options) {
  if (options.max_workers < 0)
    throw ConfigError("max_workers", "max_workers: " + std::to_string(options.max_workers) +
                                         " is negative; allowed: 0 or more");
  if (options.time_budget_s <= 0)
    throw ConfigError("budget", "budget: " + std::to_string(options.time_budget_s) +
                                    " s leaves no time to run; allowed: more than 0");
}

// How a round of moves from the current point ended.
enum class Round { moved, none_kept, out_of_time, interrupted };

// One climb: the point it stands on, the runs it measured, and the result it fills in.
class Tuning {
 public:
  Tuning(const RunConfig& base, const TuneOptions& options, const PointRunner& run)
      : base_(base), o_(options), run_(run), climber_(options) {
    climber_.set_base(base);
    start_ = std::chrono::steady_clock::now();
    result_.knobs = options.knobs;
    result_.unit = options.by_iterations ? "it/s" : "samples/s";
    current_ = starting_point(base, options.knobs);
  }

  // Measures the starting point and files it as the first move; false where there is nothing
  // to climb from (the stop reason says why).
  bool start() {
    if (!measure(current_, current_report_)) {
      result_.stop_reason = "interrupted before the first run ended";
      return false;
    }
    current_sps_ = rate_of(current_report_);
    if (current_sps_ <= 0) {  // a failing run (or one that counted nothing) is nothing to climb from
      result_.stop_reason = "the starting point measured no rate (" +
                            current_report_.diagnosis.bottleneck +
                            "): tune climbs from a run that works; see its output";
      result_.best = current_;
      result_.best_bottleneck = current_report_.diagnosis.bottleneck;
      return false;
    }
    file(first_move());
    return true;
  }

  // One round of moves from the current point; false once the climb stops (the stop reason
  // says why).
  bool climb() {
    const std::vector<Candidate> moves = climber_.candidates(current_, current_report_);
    const std::string& b = current_report_.diagnosis.bottleneck;
    if (moves.empty()) {
      result_.stop_reason =
          b == "cpu_compute" || b == "gpu_compute"
              ? "the step itself is the limit (" + b + "): no loader setting within the bounds "
                "can raise throughput further"
              : "no move left within the bounds (cores, RAM budget, batch size)";
      return false;
    }
    switch (try_moves(moves)) {
      case Round::moved:
        return true;
      case Round::interrupted:
        result_.stop_reason = "interrupted";
        return false;
      case Round::out_of_time:
        result_.stop_reason =
            "time budget of " + std::to_string(static_cast<int>(o_.time_budget_s)) + " s reached";
        return false;
      case Round::none_kept:
        break;
    }
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "no move gains more than %.0f %% over the current point, limited by %s",
                  100 * o_.min_gain, current_report_.diagnosis.bottleneck.c_str());
    result_.stop_reason = buf;
    return false;
  }

  // The result where the climb stopped at its start.
  TuneResult stopped() {
    result_.wall_s = seconds_since(start_);
    return std::move(result_);
  }

  // The result where the climb ran: the point it ended on.
  TuneResult best() {
    result_.best = current_;
    result_.best_samples_per_s = current_sps_;
    result_.best_bottleneck = current_report_.diagnosis.bottleneck;
    return stopped();
  }

 private:
  double rate_of(const Report& r) const {
    return o_.by_iterations ? r.throughput.batches_per_s : r.throughput.samples_per_s;
  }

  // Runs `config` into `report`; false where the run, or the user, stopped the tuning.
  bool measure(const RunConfig& config, Report& report) {
    if (o_.stop_requested && o_.stop_requested()) {
      result_.interrupted = "SIGINT";
      return false;
    }
    const auto t0 = std::chrono::steady_clock::now();
    report = run_(config);
    last_run_s_ = seconds_since(t0);
    if (!report.interrupted.empty()) {
      result_.interrupted = report.interrupted;
      return false;
    }
    ++result_.runs;
    climber_.measured_[key_of(config)] = rate_of(report);
    return true;
  }

  TuneMove first_move() const {
    TuneMove first;
    first.run = result_.runs;
    first.knob = "start";
    first.to = knobs_label(current_, o_.knobs);
    first.reason = "minimal parallelism: " + knobs_label(starting_point(base_, o_.knobs), [&] {
      KnobList moved = o_.knobs;  // the batch size is the training's, not parallelism
      std::erase(moved, "batch_size");
      return moved;
    }());
    first.samples_per_s = current_sps_;
    first.kept = true;
    first.bottleneck = current_report_.diagnosis.bottleneck;
    return first;
  }

  // Measures the moves in turn until one gains enough, and moves there.
  Round try_moves(const std::vector<Candidate>& moves) {
    for (const Candidate& c : moves) {
      if (seconds_since(start_) + last_run_s_ > o_.time_budget_s) return Round::out_of_time;
      Report report;
      if (!measure(c.config, report)) return Round::interrupted;
      const TuneMove move = measured_move(c, report);
      file(move);
      if (move.kept) {
        current_ = c.config;
        current_sps_ = move.samples_per_s;
        current_report_ = std::move(report);
        return Round::moved;
      }
    }
    return Round::none_kept;
  }

  TuneMove measured_move(const Candidate& c, const Report& report) const {
    TuneMove move;
    move.run = result_.runs;
    move.knob = c.knob;
    move.from = c.from;
    move.to = c.to;
    move.reason = c.reason;
    move.predicted_speedup = c.predicted_speedup;
    move.samples_per_s = rate_of(report);
    move.gain = current_sps_ > 0 ? move.samples_per_s / current_sps_ - 1 : 0;
    move.kept = move.samples_per_s > current_sps_ * (1 + o_.min_gain);
    move.bottleneck = report.diagnosis.bottleneck;
    return move;
  }

  void file(const TuneMove& move) {
    result_.moves.push_back(move);
    if (o_.on_move) o_.on_move(move);
  }

  const RunConfig& base_;
  const TuneOptions& o_;
  const PointRunner& run_;
  Climber climber_;
  std::chrono::steady_clock::time_point start_;
  TuneResult result_;
  RunConfig current_;
  double current_sps_ = 0;
  Report current_report_;
  double last_run_s_ = 0;
};

}  // namespace

TuneResult run_tune(const RunConfig& base, const TuneOptions& options, const PointRunner& run) {
  check_tune_options(options);
  Tuning tuning(base, options, run);
  if (!tuning.start()) return tuning.stopped();
  while (tuning.climb()) {
  }
  return tuning.best();
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
  if (has_knob(result.knobs, "cpu_threads"))
    best["cpu_threads"] = b.cpu_threads > 0 ? nlohmann::ordered_json(b.cpu_threads) : nlohmann::ordered_json(nullptr);
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
