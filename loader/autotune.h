#pragma once
// num_workers=auto: the decision engine that moves a running loader's worker count and prefetch
// depth. It is fed one measured window at a time (how long the training thread waited, how many
// batches it got, how busy the workers were, how many cores sat idle) and answers with the setting
// to run at next. It keeps a move only when the next window measures a gain beyond the noise,
// otherwise it goes back; a setting it left or refused is not tried again until the workload
// changes, so a steady workload settles. Pure: no threads, no clock, no /proc (the loader measures,
// loader/detail/autotune_probe.h).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace feedscope {

// LoaderOptions::num_workers / prefetch: tuned while the loader runs.
inline constexpr int kAuto = -1;

struct LoaderSetting {
  int num_workers = 1;
  int prefetch = 2;  // batches in flight per worker
  bool operator==(const LoaderSetting&) const = default;
};

// The bounds of a loader that may change its setting while running (LoaderOptions::autotune).
// Plain numbers, so a C ABI passes them as they are.
struct AutoTuneOptions {
  // The most workers: 0 means the cores this process may run on when num_workers is kAuto, and
  // num_workers itself otherwise (BatchLoader::set_setting may then lower it, not raise it).
  int max_workers = 0;
  // The deepest prefetch kAuto may reach; lowered to what ram_budget_bytes allows.
  int max_prefetch = 8;
  // Slab memory the loader may hold; 0: a quarter of the available memory. Never cuts below a
  // knob the user fixed, nor below one worker at prefetch 1.
  std::uint64_t ram_budget_bytes = 0;
  double window_s = 1.0;  // one measurement of the tuner
  // The machine's idle cores since the last call; unset: read from /proc/stat. Called on the
  // consumer thread at the end of each window; nullopt: not known.
  std::function<std::optional<double>()> idle_cores;
  // The consumer's clock for the windows (tests jump it); null: the steady clock.
  std::int64_t (*clock)() noexcept = nullptr;
};

// The tuner's bounds and thresholds, resolved by the loader.
struct TunerConfig {
  int min_workers = 1;
  int max_workers = 1;
  int min_prefetch = 2;  // equal to max_prefetch: prefetch is not tuned
  int max_prefetch = 2;
  std::int64_t window_ns = 1'000'000'000;
  std::int64_t settle_ns = 500'000'000;  // after a move, before it is measured
  std::int64_t min_batches = 8;          // a measurement holds at least this many batches
  // After a refused move, the same move waits at least this long (doubling each refusal), and
  // until the rate moved by more than kWorkloadChange x noise.
  std::int64_t backoff_ns = 10'000'000'000;
  double min_noise = 0.03;    // a gain must beat the windows' own spread, and at least this
  double stall_target = 0.05; // TensorFlow profiler's input-bound threshold
  double highly_stalled = 0.2;  // its highly input-bound one: a worker is tried without an idle core
  double burst_share = 0.6;   // share of the wait in the longest fifth of waits: bursts
  double idle_core = 0.3;     // idle cores that make room for another worker
};

// Where a loader starts and how far its setting may move: its arena's workers and its pool's slabs
// are sized for `most` at construction.
struct LoaderCapacity {
  LoaderSetting start;
  LoaderSetting most;
  bool tuned = false;  // a knob is kAuto: the AutoTuner moves it within `tuner`'s bounds
  std::uint64_t ram_budget_bytes = 0;  // the slab memory `most` was fitted in (tuned only)
  TunerConfig tuner;
};
struct MachineShape {
  int cores = 1;                    // this process may run on
  std::uint64_t available_bytes = 0;  // MemAvailable; 0: not known (1 GiB assumed)
};
// LoaderOptions' num_workers and prefetch (kAuto or a number), spare slabs and bounds, for slabs
// of `slab_bytes`. kAuto workers start at 1 and may reach the cores (max_workers); kAuto prefetch
// starts at 2 and may reach max_prefetch; slab memory (most.num_workers x most.prefetch + spare
// slabs) stays within the RAM budget, prefetch giving way first, never below the start. A stream
// dataset's worker count is its stream count, fixed for an epoch: kAuto runs there at the most
// workers and tunes prefetch only. Throws std::invalid_argument for a bound below 1.
LoaderCapacity resolve_capacity(int num_workers, int prefetch, int spare_slabs,
                                const AutoTuneOptions& options, std::size_t slab_bytes,
                                MachineShape machine, bool stream_mode);

// What the loader measured over one window, at the tuner's current setting.
struct TunerWindow {
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t batches = 0;     // delivered to the training thread
  double wait_s = 0;            // the training thread blocked waiting for them
  double worker_busy_s = 0;     // the workers' wall time loading
  double worker_cpu_s = 0;      // their CPU time loading
  double worker_queued_s = 0;   // their time ready to load but waiting for a core
  std::optional<double> idle_cores;
  double wait_concentration = 0;  // share of the wait in the longest fifth of the waits
  double seconds() const { return static_cast<double>(end_ns - begin_ns) / 1e9; }
};

// A window's rate and stall: what a move is judged by.
struct Measured {
  double batches_per_s = 0;
  double stall = 0;  // wait / wall, 0..1
};
Measured measured(const TunerWindow& w);

// The share of the total in the largest fifth of `waits` (at least one): 0.2 when every batch
// waits alike, near 1 when a few long waits make up the stall. 0 without any wait.
double wait_concentration(std::vector<std::int64_t> waits);

struct TunerMove {
  double t_s = 0;  // since the tuner started
  LoaderSetting from;
  LoaderSetting to;
  std::string why;
  Measured before;
  std::optional<Measured> after;  // the first window measured at `to`; unset until then
  // A trial: kept once its window beat `before`; a move back (why starts "back:") is kept.
  bool kept = false;
};

// A move the signals of one window call for, before the tuner judges whether to try it.
struct TunerProposal {
  LoaderSetting to;
  std::string why;
  bool adds = false;  // more workers or deeper prefetch: kept only on a measured gain
};
std::optional<TunerProposal> propose_move(const TunerConfig& config, LoaderSetting at,
                                          const TunerWindow& w);

// Not thread-safe: one thread (the loader's consumer) feeds it. Time comes in with the windows.
class AutoTuner {
 public:
  // The first window after `start_ns` is start-up, not measured.
  AutoTuner(TunerConfig config, LoaderSetting start, std::int64_t start_ns);

  // How long the next window should be, and how many batches it needs at least.
  std::int64_t window_ns() const;
  std::int64_t min_batches() const;
  // One window measured at setting(); returns the setting to run at from now on.
  LoaderSetting observe(const TunerWindow& w);

  LoaderSetting setting() const { return setting_; }
  std::int64_t start_ns() const { return start_ns_; }  // where the moves' t_s count from
  const TunerConfig& config() const { return config_; }
  const std::vector<TunerMove>& moves() const { return moves_; }
  // The windows' relative rate spread at the current setting (at least min_noise). A move is
  // judged against their mean, the `before` of its TunerMove.
  double noise() const;

 private:
  enum class Phase { settle, measure, judge };
  struct Tabu {
    LoaderSetting to;
    double rate_ref = 0;       // the rate it was judged against
    std::int64_t until_ns = 0;
    int refusals = 0;
  };
  void judge(const TunerWindow& w, const Measured& m);
  void try_move(const TunerWindow& w);
  bool blocked(LoaderSetting to, double rate, std::int64_t now_ns) const;
  void remember(LoaderSetting to, double rate_ref, std::int64_t until_ns, bool refused);
  void move(LoaderSetting to, std::string why, const Measured& before, std::int64_t now_ns,
            bool trial);

  TunerConfig config_;
  LoaderSetting setting_;
  std::int64_t start_ns_;
  Phase phase_ = Phase::settle;
  std::vector<TunerMove> moves_;
  std::optional<std::size_t> trial_;     // the move being judged
  std::optional<std::size_t> unmeasured_;  // a move back whose `after` is the next window
  bool trial_adds_ = false;
  double trial_noise_ = 0;
  Measured baseline() const;    // the mean of steady_
  std::vector<Measured> steady_;  // the last windows at the current setting
  std::vector<Tabu> tabu_;
};

}  // namespace feedscope
