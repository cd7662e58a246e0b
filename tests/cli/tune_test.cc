#include "cli/tune.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace feedscope {
namespace {

// A planted pipeline: the loader delivers `per_worker` samples/s per worker (the training thread
// alone when num_workers is 0), the step `step_rate`; host_to_device halves the step's rate when
// pin_memory is off; a launch-bound step gains with the batch. The diagnosis names the limit and
// recommends as the real one does.
struct Planted {
  double per_worker = 1000;
  double step_rate = 3500;
  bool pageable_penalty = false;
  bool launch_bound = false;
  int runs = 0;

  Report operator()(const RunConfig& c) {
    ++runs;
    const double loader = per_worker * static_cast<double>(std::max<std::int64_t>(1, c.num_workers)) *
                          (c.num_workers == 0 ? 0.8 : 1.0);
    double step = step_rate;
    if (pageable_penalty && !c.pin_memory) step /= 2;
    if (launch_bound) step *= static_cast<double>(c.batch_size) / 64.0;
    Report r;
    r.environment.device = "cuda:0";
    r.throughput.samples_per_s = std::min(loader, step);
    Recommendation rec;
    if (loader < step) {
      r.diagnosis.bottleneck = "cpu_preprocess";
      rec.setting = "num_workers=" + std::to_string(c.num_workers + 1);
      rec.predicted_speedup = std::min(step, loader + per_worker) / loader;
      rec.action = "raise num_workers";
      r.diagnosis.recommendations.push_back(rec);
    } else if (pageable_penalty && !c.pin_memory) {
      r.diagnosis.bottleneck = "host_to_device";
      rec.setting = "pin_memory=on";
      rec.predicted_speedup = 2;
      rec.action = "pin the slabs";
      r.diagnosis.recommendations.push_back(rec);
    } else if (launch_bound) {
      r.diagnosis.bottleneck = "launch_overhead";
    } else {
      r.diagnosis.bottleneck = "gpu_compute";
    }
    return r;
  }
};

TuneOptions options(int max_workers) {
  TuneOptions o;
  o.max_workers = max_workers;
  o.time_budget_s = 3600;
  return o;
}

TEST(TuneTest, StartsMinimalAndAddsWorkersUntilTheStepIsTheLimit) {
  Planted planted;
  RunConfig base;
  base.batch_size = 64;
  const TuneResult r = run_tune(base, options(8), std::ref(planted));
  ASSERT_FALSE(r.moves.empty());
  EXPECT_EQ(r.moves.front().knob, "start");
  EXPECT_EQ(r.moves.front().to, "num_workers=0 batch_size=64 prefetch=1 pin_memory=off");
  // 0 -> 1 -> 2 -> 3 -> 4 workers; at 4 the loader (4000/s) outruns the step (3500/s).
  EXPECT_EQ(r.best.num_workers, 4);
  EXPECT_DOUBLE_EQ(r.best_samples_per_s, 3500);
  EXPECT_EQ(r.best_bottleneck, "gpu_compute");
  for (std::size_t i = 1; i < r.moves.size(); ++i) {
    if (!r.moves[i].kept) continue;
    EXPECT_EQ(r.moves[i].knob, "num_workers");
    EXPECT_GT(r.moves[i].predicted_speedup, 1) << "kept moves came from the diagnosis' predictions";
  }
  EXPECT_NE(r.stop_reason.find("gpu_compute"), std::string::npos) << r.stop_reason;
  EXPECT_EQ(r.runs, planted.runs);
  EXPECT_LT(r.runs, 12) << "a climb, not a grid";
}

TEST(TuneTest, NeverGoesPastTheCores) {
  Planted planted;
  RunConfig base;
  const TuneResult r = run_tune(base, options(2), std::ref(planted));
  EXPECT_EQ(r.best.num_workers, 2);
  for (const TuneMove& m : r.moves)
    if (m.knob == "num_workers") {
      EXPECT_LE(std::stoi(m.to), 2);
    }
}

TEST(TuneTest, PageableCopiesGetPinnedMemory) {
  Planted planted;
  planted.per_worker = 10000;  // the loader is never the limit
  planted.pageable_penalty = true;
  RunConfig base;
  const TuneResult r = run_tune(base, options(2), std::ref(planted));
  EXPECT_TRUE(r.best.pin_memory);
  const auto pin = std::find_if(r.moves.begin(), r.moves.end(),
                                [](const TuneMove& m) { return m.knob == "pin_memory"; });
  ASSERT_NE(pin, r.moves.end());
  EXPECT_TRUE(pin->kept);
  EXPECT_EQ(pin->from, "off");
  EXPECT_EQ(pin->to, "on");
}

TEST(TuneTest, LaunchBoundStepDoublesTheBatchOnlyWhenAllowed) {
  Planted planted;
  planted.per_worker = 1e9;
  planted.launch_bound = true;
  RunConfig base;
  base.batch_size = 64;
  TuneOptions o = options(2);
  TuneResult fixed = run_tune(base, o, std::ref(planted));
  EXPECT_EQ(fixed.best.batch_size, 64) << "the batch size changes the training: fixed by default";
  o.max_batch_size = 512;
  const TuneResult r = run_tune(base, o, std::ref(planted));
  EXPECT_EQ(r.best.batch_size, 512);
}

TEST(TuneTest, RamBudgetBoundsTheSlabs) {
  Planted planted;
  RunConfig base;
  TuneOptions o = options(8);
  o.slab_bytes = [](std::int64_t) { return std::uint64_t{1} << 20; };
  o.ram_budget_bytes = 5u << 20;  // (workers x prefetch + 2) slabs of 1 MiB: at most 3 workers
  const TuneResult r = run_tune(base, o, std::ref(planted));
  EXPECT_EQ(r.best.num_workers, 3);
}

TEST(TuneTest, TimeBudgetAndInterruptionStopIt) {
  Planted planted;
  RunConfig base;
  TuneOptions o = options(8);
  int polls = 0;
  o.stop_requested = [&] { return ++polls > 2; };
  const TuneResult r = run_tune(base, o, std::ref(planted));
  EXPECT_EQ(r.interrupted, "SIGINT");
  EXPECT_EQ(r.runs, 2);
  EXPECT_THROW(run_tune(base, [] { TuneOptions t; t.time_budget_s = 0; return t; }(), std::ref(planted)),
               ConfigError);
}

TEST(TuneTest, NoiseBelowTheMarginIsReverted) {
  RunConfig base;
  int calls = 0;
  // Every configuration measures within 1 % of the first: nothing is worth keeping.
  const TuneResult r = run_tune(base, options(4), [&](const RunConfig&) {
    Report rep;
    rep.throughput.samples_per_s = 1000 + (calls++ % 2) * 9;
    rep.diagnosis.bottleneck = "cpu_preprocess";
    return rep;
  });
  EXPECT_EQ(r.best.num_workers, 0);
  for (std::size_t i = 1; i < r.moves.size(); ++i) EXPECT_FALSE(r.moves[i].kept);
  const auto j = nlohmann::json::parse(tune_json(r));
  EXPECT_EQ(j["best"]["num_workers"], 0);
  EXPECT_EQ(j["moves"].size(), r.moves.size());
}

// A program that fails at the starting point gives tune nothing to climb from: it stops there,
// and names no best.
TEST(TuneTest, AStartThatMeasuresNoRateStopsWithoutABest) {
  RunConfig base;
  int calls = 0;
  const TuneResult r = run_tune(base, options(4), [&](const RunConfig&) {
    ++calls;
    Report rep;
    rep.diagnosis.bottleneck = "failed (exited with 3)";
    return rep;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r.runs, 1);
  EXPECT_NE(r.stop_reason.find("measured no rate (failed (exited with 3))"), std::string::npos)
      << r.stop_reason;
  EXPECT_TRUE(nlohmann::json::parse(tune_json(r))["best"].is_null());
}

// A command that fixes `-b 16` and receives only {num_workers} and {prefetch}: tune moves those
// two, leaves the rest as they are, and names only them.
TEST(TuneTest, MovesAndNamesOnlyTheKnobsTheCommandReceives) {
  Planted planted;
  planted.per_worker = 1e9;
  planted.launch_bound = true;  // a bigger batch would gain, were the batch tune's to change
  planted.pageable_penalty = true;  // and so would pinned memory
  RunConfig base;
  base.batch_size = 64;
  base.pin_memory = false;
  TuneOptions o = options(2);
  o.max_batch_size = 512;
  o.knobs = {"num_workers", "prefetch"};
  const TuneResult r = run_tune(base, o, std::ref(planted));
  EXPECT_EQ(r.moves.front().to, "num_workers=0 prefetch=1");
  EXPECT_EQ(r.moves.front().reason, "minimal parallelism: num_workers=0 prefetch=1");
  EXPECT_EQ(r.best.batch_size, 64);
  EXPECT_FALSE(r.best.pin_memory);
  for (const TuneMove& m : r.moves)
    EXPECT_TRUE(m.knob == "start" || m.knob == "num_workers" || m.knob == "prefetch") << m.knob;
  const auto j = nlohmann::json::parse(tune_json(r));
  EXPECT_EQ(j["knobs"], nlohmann::json::array({"num_workers", "prefetch"}));
  EXPECT_FALSE(j["best"].contains("batch_size")) << "no best batch_size for a command that fixes its own";
  EXPECT_FALSE(j["best"].contains("pin_memory"));
  EXPECT_TRUE(j["best"].contains("samples_per_s"));
}

// A CPU step on torch's threads: from one thread (minimal parallelism), doubled while it gains,
// never past the cores.
TEST(TuneTest, AComputeBoundStepOnACommandThatTakesItsThreadCountGetsMoreThreads) {
  int runs = 0;
  const auto planted = [&runs](const RunConfig& c) {
    ++runs;
    Report r;
    r.environment.device = "cpu";
    r.throughput.samples_per_s = 100.0 * static_cast<double>(std::max<std::int64_t>(1, c.cpu_threads));
    r.diagnosis.bottleneck = "cpu_compute";
    return r;
  };
  RunConfig base;
  TuneOptions o = options(4);
  o.max_threads = 4;
  o.knobs = {"cpu_threads"};
  const TuneResult r = run_tune(base, o, planted);
  EXPECT_EQ(r.moves.front().to, "cpu_threads=1");
  EXPECT_EQ(r.best.cpu_threads, 4) << "1, 2, 4: never past the cores";
  const auto j = nlohmann::json::parse(tune_json(r));
  EXPECT_EQ(j["best"]["cpu_threads"], 4);
  EXPECT_FALSE(j["best"].contains("num_workers"));
}

TEST(TuneTest, ClimbsOnIterationsWhereThatIsWhatThePointsCount) {
  RunConfig base;
  TuneOptions o = options(2);
  o.knobs = {"num_workers"};
  o.by_iterations = true;
  const TuneResult r = run_tune(base, o, [](const RunConfig& c) {
    Report rep;
    rep.throughput.batches_per_s = 10.0 * static_cast<double>(c.num_workers + 1);
    rep.diagnosis.bottleneck = "cpu_preprocess";
    return rep;
  });
  EXPECT_EQ(r.best.num_workers, 2);
  EXPECT_DOUBLE_EQ(r.best_samples_per_s, 30);
  EXPECT_EQ(r.unit, "it/s");
  const auto j = nlohmann::json::parse(tune_json(r));
  EXPECT_DOUBLE_EQ(j["best"]["iterations_per_s"].get<double>(), 30);
}

}  // namespace
}  // namespace feedscope
