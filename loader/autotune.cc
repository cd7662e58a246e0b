#include "loader/autotune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>

namespace feedscope {

namespace {

// A setting left or refused is tried again only once the rate moved by this many noises: the
// workload changed, and what was measured of it no longer holds.
constexpr double kWorkloadChange = 3.0;
constexpr std::size_t kSteadyWindows = 3;

std::string fmt(const char* format, auto... args) {
  char text[256];
  std::snprintf(text, sizeof text, format, args...);
  return text;
}

std::string percent(double ratio) { return fmt("%.1f%%", 100 * ratio); }

struct Signals {
  double stall = 0;
  double busy = 0;       // workers' loading time / their wall time, 0..1
  double read_share = 0;  // of the loading time, off a CPU and not queued for one: reads
  std::optional<double> idle;
  double concentration = 0;
};

Signals signals_of(const TunerWindow& w, LoaderSetting at) {
  Signals s;
  const double wall = std::max(w.seconds(), 1e-9);
  s.stall = std::clamp(w.wait_s / wall, 0.0, 1.0);
  s.busy = w.worker_busy_s / (wall * std::max(1, at.num_workers));
  if (w.worker_busy_s > 0)
    s.read_share = std::clamp((w.worker_busy_s - w.worker_cpu_s - w.worker_queued_s) / w.worker_busy_s,
                              0.0, 1.0);
  s.idle = w.idle_cores;
  s.concentration = w.wait_concentration;
  return s;
}

std::string idle_text(const std::optional<double>& idle) {
  return idle ? fmt("%.1f core(s) idle", *idle) : std::string("idle cores not known");
}

// The loop waits: another worker, or a deeper queue where the waits come in bursts.
std::optional<TunerProposal> when_waiting(const TunerConfig& c, LoaderSetting at, const Signals& s) {
  const bool can_add = at.num_workers < c.max_workers;
  const bool can_deepen = at.prefetch < c.max_prefetch;
  LoaderSetting deeper = at;
  deeper.prefetch = std::min(c.max_prefetch, at.prefetch * 2);
  LoaderSetting wider = at;
  wider.num_workers = at.num_workers + 1;
  const std::string waited = "the loop waited " + percent(s.stall) + " of the time";
  if (can_deepen && s.concentration >= c.burst_share)
    return TunerProposal{deeper,
                         waited + ", in bursts (" + percent(s.concentration) +
                             " of the wait in the longest fifth of waits): deeper prefetch",
                         true};
  if (can_add && (!s.idle || *s.idle >= c.idle_core))
    return TunerProposal{wider,
                         waited + ", workers busy " + percent(s.busy) + ", " + idle_text(s.idle) +
                             ": one worker more",
                         true};
  if (s.read_share > 0.5 && (can_add || can_deepen))
    return TunerProposal{can_add ? wider : deeper,
                         waited + ", workers waiting on reads " + percent(s.read_share) +
                             " of their loading time: " +
                             (can_add ? "one worker more" : "deeper prefetch"),
                         true};
  // No core idle, but the loop is highly input-bound on busy workers: the cores are shared with
  // other work, and a worker more may still get the loop a larger share of them. The trial keeps
  // it only if it measures so.
  if (can_add && s.stall >= c.highly_stalled && s.busy >= 0.8)
    return TunerProposal{wider,
                         waited + ", workers busy " + percent(s.busy) + ", " + idle_text(s.idle) +
                             ": one worker more, if it gets the loop a larger share of the cores",
                         true};
  return std::nullopt;
}

// The loop hardly waits: a worker fewer, if the others can carry its load or the step wants its core.
std::optional<TunerProposal> when_fed(const TunerConfig& c, LoaderSetting at, const Signals& s) {
  if (at.num_workers <= c.min_workers) return std::nullopt;
  LoaderSetting fewer = at;
  fewer.num_workers = at.num_workers - 1;
  const std::string waited = "the loop waited " + percent(s.stall) + " of the time";
  // The load of n workers fits on n - 1 with a fifth to spare.
  if (s.busy * at.num_workers <= 0.8 * (at.num_workers - 1))
    return TunerProposal{fewer,
                         waited + ", workers busy " + percent(s.busy) +
                             ": the load fits on one worker fewer",
                         false};
  if (s.idle && *s.idle < c.idle_core / 2)
    return TunerProposal{fewer,
                         waited + " with " + idle_text(s.idle) +
                             ": one worker fewer leaves the step's threads a core",
                         false};
  return std::nullopt;
}

bool improved(const Measured& before, const Measured& after, double noise) {
  if (after.batches_per_s > before.batches_per_s * (1 + noise)) return true;
  // A stall gone with the rate where it was: the step slowed by as much (a worker took its core).
  const bool stall_halved = after.stall < 0.5 * before.stall && before.stall - after.stall > 0.02;
  return stall_halved && after.batches_per_s >= before.batches_per_s;
}

bool held(const Measured& before, const Measured& after, double noise, double stall_target) {
  return after.batches_per_s >= before.batches_per_s * (1 - noise) && after.stall < stall_target;
}

}  // namespace

Measured measured(const TunerWindow& w) {
  const double wall = std::max(w.seconds(), 1e-9);
  return {static_cast<double>(w.batches) / wall, std::clamp(w.wait_s / wall, 0.0, 1.0)};
}

double wait_concentration(std::vector<std::int64_t> waits) {
  if (waits.empty()) return 0;
  const std::size_t top = std::max<std::size_t>(1, (waits.size() + 4) / 5);
  std::partial_sort(waits.begin(), waits.begin() + static_cast<std::ptrdiff_t>(top), waits.end(),
                    std::greater<>());
  double total = 0, longest = 0;
  for (std::size_t i = 0; i < waits.size(); ++i) {
    const double w = static_cast<double>(std::max<std::int64_t>(0, waits[i]));
    total += w;
    if (i < top) longest += w;
  }
  return total > 0 ? longest / total : 0;
}

std::optional<TunerProposal> propose_move(const TunerConfig& config, LoaderSetting at,
                                          const TunerWindow& w) {
  const Signals s = signals_of(w, at);
  if (s.stall >= config.stall_target) return when_waiting(config, at, s);
  // Between half the target and the target nothing moves: the band keeps a setting from
  // flipping on a window's noise.
  if (s.stall < config.stall_target / 2) return when_fed(config, at, s);
  return std::nullopt;
}

namespace {

void check_bounds(const AutoTuneOptions& o) {
  if (o.max_workers < 0)
    throw std::invalid_argument("max_workers: " + std::to_string(o.max_workers) +
                                " is negative; allowed: 0 (the cores) or more");
  if (o.max_prefetch < 1)
    throw std::invalid_argument("max_prefetch: " + std::to_string(o.max_prefetch) +
                                " is not allowed; allowed: 1 or more");
  if (!(o.window_s > 0))
    throw std::invalid_argument("window_s: " + std::to_string(o.window_s) +
                                " is not allowed; allowed: more than 0");
}

// Lowers the most prefetch, then the most workers, until their slabs fit the budget.
void fit_budget(LoaderCapacity& c, int spare_slabs, std::size_t slab_bytes, bool tune_workers,
                bool tune_prefetch) {
  const std::uint64_t fit = c.ram_budget_bytes / std::max<std::size_t>(slab_bytes, 1);
  const auto slabs = [&] {
    return static_cast<std::uint64_t>(c.most.num_workers) * static_cast<std::uint64_t>(c.most.prefetch) +
           static_cast<std::uint64_t>(std::max(1, spare_slabs));
  };
  while (slabs() > fit) {
    if (tune_prefetch && c.most.prefetch > c.start.prefetch)
      --c.most.prefetch;
    else if (tune_workers && c.most.num_workers > c.start.num_workers)
      --c.most.num_workers;
    else
      break;
  }
}

}  // namespace

LoaderCapacity resolve_capacity(int num_workers, int prefetch, int spare_slabs,
                                const AutoTuneOptions& o, std::size_t slab_bytes,
                                MachineShape machine, bool stream_mode) {
  check_bounds(o);
  const bool auto_workers = num_workers == kAuto;
  const bool tune_workers = auto_workers && !stream_mode;
  const bool tune_prefetch = prefetch == kAuto && num_workers != 0;
  const int cores = std::max(1, machine.cores);
  LoaderCapacity c;
  const int most_workers = o.max_workers > 0 ? o.max_workers : cores;
  c.start.num_workers = !auto_workers ? num_workers : stream_mode ? most_workers : 1;
  c.most.num_workers = auto_workers ? most_workers : std::max(num_workers, o.max_workers);
  c.start.prefetch = prefetch == kAuto ? std::min(2, o.max_prefetch) : prefetch;
  c.most.prefetch = prefetch == kAuto ? o.max_prefetch : prefetch;
  c.tuned = auto_workers || tune_prefetch;
  if (c.tuned) {
    const std::uint64_t available = machine.available_bytes ? machine.available_bytes : 1ull << 30;
    c.ram_budget_bytes = o.ram_budget_bytes ? o.ram_budget_bytes : available / 4;
    fit_budget(c, spare_slabs, slab_bytes, tune_workers, tune_prefetch);
  }
  TunerConfig& t = c.tuner;
  t.min_workers = tune_workers ? 1 : c.start.num_workers;
  t.max_workers = tune_workers ? c.most.num_workers : c.start.num_workers;
  t.min_prefetch = c.start.prefetch;
  t.max_prefetch = tune_prefetch ? c.most.prefetch : c.start.prefetch;
  t.window_ns = static_cast<std::int64_t>(o.window_s * 1e9);
  t.settle_ns = t.window_ns / 2;
  return c;
}

AutoTuner::AutoTuner(TunerConfig config, LoaderSetting start, std::int64_t start_ns)
    : config_(config), setting_(start), start_ns_(start_ns) {}

std::int64_t AutoTuner::window_ns() const {
  return phase_ == Phase::settle ? config_.settle_ns : config_.window_ns;
}

std::int64_t AutoTuner::min_batches() const {
  return phase_ == Phase::settle ? 1 : config_.min_batches;
}

double AutoTuner::noise() const {
  if (steady_.size() < 2) return config_.min_noise;
  const auto rate = [](const Measured& a, const Measured& b) { return a.batches_per_s < b.batches_per_s; };
  const auto [lo, hi] = std::minmax_element(steady_.begin(), steady_.end(), rate);
  const double mid = (lo->batches_per_s + hi->batches_per_s) / 2;
  return std::max(config_.min_noise, mid > 0 ? (hi->batches_per_s - lo->batches_per_s) / mid : 0.0);
}

Measured AutoTuner::baseline() const {
  Measured mean;
  for (const Measured& m : steady_) {
    mean.batches_per_s += m.batches_per_s / static_cast<double>(steady_.size());
    mean.stall += m.stall / static_cast<double>(steady_.size());
  }
  return mean;
}

LoaderSetting AutoTuner::observe(const TunerWindow& w) {
  if (phase_ == Phase::settle) {
    phase_ = trial_ ? Phase::judge : Phase::measure;
    return setting_;
  }
  const Measured m = measured(w);
  if (phase_ == Phase::judge) {
    judge(w, m);
    return setting_;
  }
  if (unmeasured_) {
    moves_[*unmeasured_].after = m;
    unmeasured_.reset();
  }
  steady_.push_back(m);
  if (steady_.size() > kSteadyWindows) steady_.erase(steady_.begin());
  try_move(w);
  return setting_;
}

// What the latest window calls for, measured against the mean of the windows at this setting.
void AutoTuner::try_move(const TunerWindow& w) {
  const std::optional<TunerProposal> p = propose_move(config_, setting_, w);
  const Measured before = baseline();
  if (!p || p->to == setting_ || blocked(p->to, before.batches_per_s, w.end_ns)) return;
  trial_adds_ = p->adds;
  trial_noise_ = noise();
  move(p->to, p->why, before, w.end_ns, true);
}

void AutoTuner::judge(const TunerWindow& w, const Measured& m) {
  TunerMove& trial = moves_[*trial_];
  trial_.reset();
  trial.after = m;
  // The noise of the windows before the move: the trial's one window has no spread of its own.
  const double noise = trial_noise_;
  trial.kept = trial_adds_ ? improved(trial.before, m, noise)
                           : held(trial.before, m, noise, config_.stall_target);
  if (trial.kept) {
    // Left for one measured at least as good: going back waits for the workload to change.
    remember(trial.from, m.batches_per_s, w.end_ns, false);
    steady_ = {m};
    phase_ = Phase::measure;
    return;
  }
  remember(trial.to, trial.before.batches_per_s, w.end_ns, true);
  const std::string why =
      fmt("back: %.1f -> %.1f batches/s, stall %s -> %s: ", trial.before.batches_per_s,
          m.batches_per_s, percent(trial.before.stall).c_str(), percent(m.stall).c_str()) +
      (trial_adds_ ? fmt("no gain beyond the noise (%.1f%%)", 100 * noise)
                   : std::string("the fewer workers did not keep up"));
  const LoaderSetting back = trial.from;
  move(back, why, m, w.end_ns, false);
  moves_.back().kept = true;
  unmeasured_ = moves_.size() - 1;
}

void AutoTuner::move(LoaderSetting to, std::string why, const Measured& before,
                     std::int64_t now_ns, bool trial) {
  TunerMove mv;
  mv.t_s = static_cast<double>(now_ns - start_ns_) / 1e9;
  mv.from = setting_;
  mv.to = to;
  mv.why = std::move(why);
  mv.before = before;
  moves_.push_back(std::move(mv));
  if (trial) trial_ = moves_.size() - 1;
  setting_ = to;
  steady_.clear();
  phase_ = Phase::settle;
}

bool AutoTuner::blocked(LoaderSetting to, double rate, std::int64_t now_ns) const {
  for (const Tabu& t : tabu_) {
    if (!(t.to == to)) continue;
    if (now_ns < t.until_ns) return true;
    const double change = std::abs(rate - t.rate_ref) / std::max(t.rate_ref, 1e-9);
    return change <= kWorkloadChange * noise();
  }
  return false;
}

void AutoTuner::remember(LoaderSetting to, double rate_ref, std::int64_t now_ns, bool refused) {
  auto it = std::find_if(tabu_.begin(), tabu_.end(), [&](const Tabu& t) { return t.to == to; });
  if (it == tabu_.end()) it = tabu_.insert(tabu_.end(), Tabu{to});
  it->rate_ref = rate_ref;
  if (!refused) {
    it->until_ns = now_ns;
    return;
  }
  ++it->refusals;
  it->until_ns = now_ns + (config_.backoff_ns << std::min(it->refusals - 1, 16));
}

}  // namespace feedscope
