#include "loader/autotune.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace feedscope {
namespace tuner_test {

constexpr std::int64_t kSecond = 1'000'000'000;

// A training loop in numbers: each batch costs `load_s` of one core to load and `step_s` of the
// training thread (plus `step_threads` - 1 more threads) to step; `cores` share out the work.
// Storage bursts stall the loop by `burst_stall / prefetch`. Gives what the loader would measure.
struct Plant {
  double cores = 4;
  double load_s = 0.1;
  double step_s = 0.04;
  double step_threads = 1;
  double burst_stall = 0;
  double cpu_share = 1;  // of the workers' loading time, on a CPU (the rest: reads)
  double noise = 0;      // relative spread of the rate, window to window
  std::mt19937 rng{7};

  TunerWindow window(LoaderSetting s, std::int64_t begin, std::int64_t end) {
    const double w = s.num_workers;
    const double rate0 = std::min(w / load_s, 1 / step_s);
    const double demand = std::min(w, rate0 * load_s * cpu_share);
    const double crowd = std::max(1.0, (demand + step_threads) / cores);
    const double step = step_s * crowd;
    double rate = std::min(w / (load_s * crowd), 1 / step) * (1 - burst_stall / s.prefetch);
    if (noise > 0) rate *= 1 + std::normal_distribution<double>(0, noise)(rng);
    TunerWindow out;
    out.begin_ns = begin;
    out.end_ns = end;
    const double seconds = out.seconds();
    out.batches = static_cast<std::int64_t>(rate * seconds);
    out.wait_s = std::max(0.0, 1 - rate * step) * seconds;
    out.worker_busy_s = std::min(w, rate * load_s) * seconds;
    out.worker_cpu_s = out.worker_busy_s * cpu_share;
    out.idle_cores = std::max(0.0, cores - rate * load_s * cpu_share - rate * step * step_threads);
    out.wait_concentration = burst_stall > 0 ? 0.9 : 0.2;
    return out;
  }
};

TunerConfig config(int max_workers, int max_prefetch = 2) {
  TunerConfig c;
  c.max_workers = max_workers;
  c.max_prefetch = max_prefetch;
  return c;
}

// Feeds the tuner the plant's windows for `seconds`; returns the time it ended at.
std::int64_t run(AutoTuner& tuner, Plant& plant, double seconds, std::int64_t from = 0) {
  std::int64_t t = from;
  while (t < from + static_cast<std::int64_t>(seconds * kSecond)) {
    const std::int64_t len = tuner.window_ns();
    tuner.observe(plant.window(tuner.setting(), t, t + len));
    t += len;
  }
  return t;
}

TEST(AutoTuner, DecodeBoundAddsWorkersUntilTheLoopIsFed) {
  Plant plant;  // 10 batches/s per worker, the step takes 25
  AutoTuner tuner(config(4), {1, 2}, 0);
  run(tuner, plant, 20);
  EXPECT_EQ(tuner.setting(), (LoaderSetting{3, 2}));
  ASSERT_GE(tuner.moves().size(), 2u);
  const TunerMove& first = tuner.moves().front();
  EXPECT_EQ(first.from, (LoaderSetting{1, 2}));
  EXPECT_EQ(first.to, (LoaderSetting{2, 2}));
  EXPECT_TRUE(first.kept);
  ASSERT_TRUE(first.after);
  EXPECT_NEAR(first.before.batches_per_s, 10, 1);
  EXPECT_NEAR(first.after->batches_per_s, 20, 1);
  EXPECT_NE(first.why.find("one worker more"), std::string::npos) << first.why;
  // Converged within a few seconds: the first two moves by 5 s.
  EXPECT_LT(tuner.moves()[1].t_s, 5.0);
}

TEST(AutoTuner, SteadyWorkloadSettlesAndNeverOscillates) {
  Plant plant;
  plant.noise = 0.01;
  AutoTuner tuner(config(8, 8), {1, 2}, 0);
  const std::int64_t settled = run(tuner, plant, 60);
  const std::size_t moves = tuner.moves().size();
  const LoaderSetting at = tuner.setting();
  run(tuner, plant, 3600, settled);
  EXPECT_EQ(tuner.moves().size(), moves) << "moved again after settling";
  EXPECT_EQ(tuner.setting(), at);
  EXPECT_LT(moves, 12u);
  // No setting is entered twice by a kept move: the walk never comes back to where it was.
  std::vector<LoaderSetting> entered;
  for (const TunerMove& m : tuner.moves()) {
    if (!m.kept || m.why.rfind("back:", 0) == 0) continue;
    EXPECT_EQ(std::count(entered.begin(), entered.end(), m.to), 0) << m.why;
    entered.push_back(m.to);
  }
}

TEST(AutoTuner, RevertsAMoveThatGainsNothingAndDoesNotRetryIt) {
  AutoTuner tuner(config(4), {1, 2}, 0);
  // Loading is light and the loop waits anyway, 10 % of every window: a hand-off no worker
  // shortens.
  struct Flat : Plant {
    TunerWindow window(LoaderSetting s, std::int64_t b, std::int64_t e) {
      TunerWindow w = Plant::window(s, b, e);
      w.batches = static_cast<std::int64_t>(22.5 * w.seconds());
      w.wait_s = 0.1 * w.seconds();
      return w;
    }
  } flat;
  std::int64_t t = 0;
  while (t < 600 * kSecond) {
    const std::int64_t len = tuner.window_ns();
    tuner.observe(flat.window(tuner.setting(), t, t + len));
    t += len;
  }
  ASSERT_EQ(tuner.moves().size(), 2u);
  EXPECT_FALSE(tuner.moves()[0].kept);
  EXPECT_EQ(tuner.moves()[1].why.rfind("back:", 0), 0u) << tuner.moves()[1].why;
  EXPECT_EQ(tuner.moves()[1].to, (LoaderSetting{1, 2}));
  ASSERT_TRUE(tuner.moves()[1].after);
  EXPECT_EQ(tuner.setting(), (LoaderSetting{1, 2}));
}

TEST(AutoTuner, ComputeBoundKeepsTheFewestWorkersThatFeedTheStep) {
  Plant plant;
  plant.load_s = 0.01;  // a heavy step, light loading
  plant.step_s = 0.1;
  AutoTuner tuner(config(4), {4, 2}, 0);
  run(tuner, plant, 60);
  EXPECT_EQ(tuner.setting().num_workers, 1);
  for (const TunerMove& m : tuner.moves()) {
    EXPECT_TRUE(m.kept) << m.why;
    ASSERT_TRUE(m.after);
    EXPECT_LT(m.after->stall, 0.05);
  }
}

TEST(AutoTuner, BurstyStallsDeepenPrefetch) {
  Plant plant;
  plant.load_s = 0.01;
  plant.burst_stall = 0.3;  // cold shards: 15 % stall at prefetch 2, in bursts
  AutoTuner tuner(config(1, 8), {1, 2}, 0);
  run(tuner, plant, 30);
  EXPECT_EQ(tuner.setting(), (LoaderSetting{1, 8}));
  ASSERT_FALSE(tuner.moves().empty());
  EXPECT_NE(tuner.moves().front().why.find("bursts"), std::string::npos) << tuner.moves().front().why;
}

TEST(AutoTuner, WorkersCrowdingTheStepsCoresAreRemoved) {
  Plant plant;
  plant.cores = 2;
  plant.step_threads = 2;  // the step's threads want both cores
  plant.load_s = 0.05;
  plant.step_s = 0.1;
  AutoTuner tuner(config(2), {2, 2}, 0);
  run(tuner, plant, 30);
  EXPECT_EQ(tuner.setting().num_workers, 1);
  ASSERT_EQ(tuner.moves().size(), 1u);
  EXPECT_TRUE(tuner.moves().front().kept);
}

TEST(AutoTuner, NoIdleCoreAndAFedLoopTriesOneWorkerFewer) {
  Plant plant;
  plant.cores = 2;
  plant.load_s = 0.1;
  plant.step_s = 0.1;
  TunerWindow w = plant.window({2, 2}, 0, kSecond);
  w.wait_s = 0.001;
  w.worker_busy_s = 1.8;  // both workers busy: the load does not fit on one
  w.idle_cores = 0.05;
  const std::optional<TunerProposal> p = propose_move(config(2), {2, 2}, w);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->to, (LoaderSetting{1, 2}));
  EXPECT_FALSE(p->adds);
  EXPECT_NE(p->why.find("leaves the step's threads a core"), std::string::npos) << p->why;
}

TEST(AutoTuner, StaysWithinItsBoundsAndLeavesFixedKnobs) {
  Plant plant;
  plant.load_s = 1.0;  // every worker helps, up to far more than allowed
  plant.burst_stall = 0.2;
  TunerConfig c = config(3);
  c.min_prefetch = c.max_prefetch = 4;  // prefetch fixed by the user
  AutoTuner tuner(c, {1, 4}, 0);
  run(tuner, plant, 120);
  for (const TunerMove& m : tuner.moves()) {
    EXPECT_LE(m.to.num_workers, 3);
    EXPECT_EQ(m.to.prefetch, 4);
  }
  EXPECT_EQ(tuner.setting().num_workers, 3);
}

TEST(AutoTuner, MovesAreRateLimited) {
  Plant plant;
  plant.load_s = 1.0;
  AutoTuner tuner(config(16), {1, 2}, 0);
  run(tuner, plant, 30);
  const TunerConfig& c = tuner.config();
  for (std::size_t i = 1; i < tuner.moves().size(); ++i)
    EXPECT_GE(tuner.moves()[i].t_s - tuner.moves()[i - 1].t_s,
              static_cast<double>(c.settle_ns + c.window_ns) / kSecond - 1e-9);
}

TEST(AutoTuner, NoIdleCoreNoWorkerForAModeratelyStalledLoop) {
  Plant plant;
  TunerWindow w = plant.window({1, 2}, 0, kSecond);
  w.wait_s = 0.1;  // 10 %: moderately input-bound
  w.worker_busy_s = w.worker_cpu_s = 1.0;
  w.idle_cores = 0.1;
  EXPECT_FALSE(propose_move(config(4), {1, 2}, w));
  // Highly input-bound on busy workers: a worker is tried, and kept only on a measured gain.
  w.wait_s = 0.4;
  const std::optional<TunerProposal> p = propose_move(config(4), {1, 2}, w);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->to, (LoaderSetting{2, 2}));
  EXPECT_NE(p->why.find("if it gets the loop a larger share of the cores"), std::string::npos) << p->why;
  // Workers that idle while the loop waits are no case for another.
  w.worker_busy_s = w.worker_cpu_s = 0.3;
  EXPECT_FALSE(propose_move(config(4), {1, 2}, w));
}

TEST(AutoTuner, ASharedCoreGoesBackWhereAWorkerMoreGainsNothing) {
  // The one core is taken: a worker more only shares it, and the rate stays that of one.
  struct Shared : Plant {
    TunerWindow window(LoaderSetting s, std::int64_t b, std::int64_t e) {
      TunerWindow w = Plant::window({1, s.prefetch}, b, e);  // the rate of one worker, whatever runs
      w.worker_busy_s = w.worker_cpu_s = 0.95 * s.num_workers * w.seconds();
      w.idle_cores = 0.0;
      return w;
    }
  } shared;
  AutoTuner tuner(config(4), {1, 2}, 0);
  std::int64_t t = 0;
  while (t < 600 * kSecond) {
    const std::int64_t len = tuner.window_ns();
    tuner.observe(shared.window(tuner.setting(), t, t + len));
    t += len;
  }
  ASSERT_EQ(tuner.moves().size(), 2u);
  EXPECT_FALSE(tuner.moves()[0].kept);
  EXPECT_EQ(tuner.setting(), (LoaderSetting{1, 2}));
}

TEST(AutoTuner, WorkersWaitingOnReadsGetCompanyWithoutIdleCores) {
  Plant plant;
  plant.cores = 1;
  plant.cpu_share = 0.1;  // the workers mostly wait on storage
  plant.load_s = 0.1;
  plant.step_s = 0.08;  // and the step takes what the core has
  AutoTuner tuner(config(4), {1, 2}, 0);
  run(tuner, plant, 10);
  ASSERT_FALSE(tuner.moves().empty());
  EXPECT_NE(tuner.moves().front().why.find("waiting on reads"), std::string::npos);
}

TEST(WaitConcentration, SteadyWaitsAreAFifthAndBurstsNearlyAll) {
  EXPECT_DOUBLE_EQ(wait_concentration({}), 0);
  EXPECT_DOUBLE_EQ(wait_concentration({0, 0, 0}), 0);
  EXPECT_NEAR(wait_concentration(std::vector<std::int64_t>(10, 5)), 0.2, 1e-12);
  std::vector<std::int64_t> bursts(10, 1);
  bursts[3] = 100;
  bursts[8] = 100;
  EXPECT_GT(wait_concentration(bursts), 0.95);
}

TEST(ResolveCapacity, AutoStartsSmallAndReachesTheCoresWithinTheBudget) {
  constexpr std::size_t kMiB = 1 << 20;
  AutoTuneOptions o;
  o.ram_budget_bytes = 64 * kMiB;
  LoaderCapacity c = resolve_capacity(kAuto, kAuto, 2, o, kMiB, {4, 0}, false);
  EXPECT_TRUE(c.tuned);
  EXPECT_EQ(c.start, (LoaderSetting{1, 2}));
  EXPECT_EQ(c.most, (LoaderSetting{4, 8}));
  EXPECT_EQ(c.tuner.min_workers, 1);
  EXPECT_EQ(c.tuner.max_workers, 4);
  EXPECT_EQ(c.tuner.max_prefetch, 8);
  // 10 slabs: prefetch gives way first, down to where it starts.
  o.ram_budget_bytes = 10 * kMiB;
  c = resolve_capacity(kAuto, kAuto, 2, o, kMiB, {4, 0}, false);
  EXPECT_EQ(c.most, (LoaderSetting{4, 2}));
  // 6 slabs: then workers.
  o.ram_budget_bytes = 6 * kMiB;
  c = resolve_capacity(kAuto, kAuto, 2, o, kMiB, {4, 0}, false);
  EXPECT_EQ(c.most, (LoaderSetting{2, 2}));
  // Never below where it starts, nor below a knob the user fixed.
  o.ram_budget_bytes = kMiB;
  c = resolve_capacity(kAuto, 4, 2, o, kMiB, {4, 0}, false);
  EXPECT_EQ(c.most, (LoaderSetting{1, 4}));
  EXPECT_EQ(c.tuner.min_prefetch, 4);
  EXPECT_EQ(c.tuner.max_prefetch, 4);
}

TEST(ResolveCapacity, DefaultBudgetIsAQuarterOfAvailableMemory) {
  const LoaderCapacity c = resolve_capacity(kAuto, kAuto, 2, {}, 1 << 20, {2, 400ull << 20}, false);
  EXPECT_EQ(c.ram_budget_bytes, 100ull << 20);
}

TEST(ResolveCapacity, FixedSettingsStayAsTheyAreAndMayGetRoom) {
  LoaderCapacity c = resolve_capacity(3, 2, 2, {}, 1 << 20, {8, 0}, false);
  EXPECT_FALSE(c.tuned);
  EXPECT_EQ(c.start, (LoaderSetting{3, 2}));
  EXPECT_EQ(c.most, (LoaderSetting{3, 2}));
  AutoTuneOptions o;
  o.max_workers = 6;
  c = resolve_capacity(3, 2, 2, o, 1 << 20, {8, 0}, false);
  EXPECT_FALSE(c.tuned);
  EXPECT_EQ(c.most, (LoaderSetting{6, 2}));
}

TEST(ResolveCapacity, StreamDatasetsRunAutoWorkersAtTheMostAndTunePrefetch) {
  AutoTuneOptions o;
  o.max_workers = 3;
  const LoaderCapacity c = resolve_capacity(kAuto, kAuto, 2, o, 1 << 20, {8, 8ull << 30}, true);
  EXPECT_TRUE(c.tuned);
  EXPECT_EQ(c.start, (LoaderSetting{3, 2}));
  EXPECT_EQ(c.tuner.min_workers, 3);
  EXPECT_EQ(c.tuner.max_workers, 3);
  EXPECT_EQ(c.tuner.max_prefetch, 8);
}

TEST(ResolveCapacity, BadBoundsThrow) {
  AutoTuneOptions o;
  o.max_workers = -2;
  EXPECT_THROW(resolve_capacity(kAuto, 2, 2, o, 1, {2, 0}, false), std::invalid_argument);
  o = {};
  o.max_prefetch = 0;
  EXPECT_THROW(resolve_capacity(kAuto, kAuto, 2, o, 1, {2, 0}, false), std::invalid_argument);
}

}  // namespace tuner_test
}  // namespace feedscope
