// Loader workers started again at every epoch (profiler/worker_churn.h), read from a watched
// program's tree: the sets started, and the training thread's wait for each one's first batch; and
// the rule that advises persistent_workers=True where that wait is most of the loop's.
#include "profiler/worker_churn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "profiler/process_tree.h"
#include "profiler/watch_diagnosis.h"

namespace feedscope {
namespace {

constexpr int kChurnTrainer = 100;

// A reading at `t_ms` of a trainer whose `workers` (pids) are alive, half idle, with 5 looks at
// its training thread since the previous reading, all on the loader's queue where `waiting`.
UtilizationSample churn_reading(std::int64_t t_ms, const std::vector<int>& workers, bool waiting) {
  UtilizationSample s;
  s.time_ns = t_ms * 1'000'000;
  s.cpu_core_ratio = {0.3, 0.3, 0.3, 0.3};
  s.cpu_system_ratio = 0.3;
  s.cpu_process_ratio = 0.5 / 4;
  ThreadCpu main;
  main.tid = kChurnTrainer;
  main.name = "python3";
  main.ratio = waiting ? 0.05 : 0.9;
  s.threads.push_back(main);
  for (const int pid : workers) {
    ProcessCpu w;
    w.pid = pid;
    w.ppid = kChurnTrainer;
    w.name = "python3";
    w.cmdline = "python3 train.py";
    w.cores = 0.3;
    w.state = 'S';
    s.children.push_back(w);
  }
  MainThreadWaits looks;
  looks.looks = 5;
  (waiting ? looks.loader_queue : looks.running) = 5;
  s.main_thread_waits = looks;
  s.rss_bytes = 1 << 20;
  return s;
}

// 6 s of 1.2-s epochs with 4 workers: each epoch's first 0.4 s the training thread waits for its
// first batch. `persistent`: the same 4 workers all along, and a new epoch's first batch a tenth
// of a second's wait.
ProcessTreeSummary short_epochs_program(bool persistent) {
  ProcessTreeDigest tree(kChurnTrainer, 1);
  tree.add(churn_reading(0, {}, false));
  for (int i = 1; i <= 60; ++i) {
    const int epoch = (i - 1) / 12, in_epoch = (i - 1) % 12;
    std::vector<int> workers;
    if (persistent || in_epoch < 11)
      for (int k = 0; k < 4; ++k) workers.push_back(1000 + (persistent ? 0 : 4 * epoch) + k);
    const bool waiting = persistent && epoch > 0 ? in_epoch == 0 : in_epoch < 4;
    tree.add(churn_reading(i * 100, workers, waiting));
  }
  return tree.summary();
}

TEST(WorkerChurnTest, EachEpochsNewWorkersAndTheWaitForTheirFirstBatchAreCounted) {
  const ProcessTreeSummary t = short_epochs_program(false);
  ASSERT_TRUE(t.worker_churn);
  const WorkerChurn& c = *t.worker_churn;
  EXPECT_EQ(c.generations, 5);
  EXPECT_EQ(c.workers_started, 20);
  EXPECT_EQ(c.restarts_measured, 4);
  ASSERT_TRUE(c.first_startup_s);
  EXPECT_NEAR(*c.first_startup_s, 0.4, 1e-9);
  EXPECT_NEAR(c.restart_wait_s, 1.6, 1e-9);
  EXPECT_NEAR(c.wait_s, 2.0, 1e-9);
  EXPECT_NEAR(c.first_start_s, 0.05, 1e-9);
  EXPECT_NEAR(c.span_s, 5.95, 1e-9);

  const ProcessTreeSummary p = short_epochs_program(true);
  ASSERT_TRUE(p.worker_churn);
  EXPECT_EQ(p.worker_churn->generations, 1);
  EXPECT_EQ(p.worker_churn->restarts_measured, 0);
}

WatchDiagnosisInput churn_watched(ProcessTreeSummary tree) {
  WatchDiagnosisInput in;
  in.cpus = 4;
  in.tree = std::move(tree);
  in.utilization.series["cpu_system_ratio"] = SeriesStats{0.3, 0.3, 0.3};
  return in;
}

bool churn_fired(const Diagnosis& d, const char* rule) {
  return std::find(d.rules.begin(), d.rules.end(), rule) != d.rules.end();
}

// The wait for each new set of workers is 80 % of the loop's: persistent_workers=True, predicted
// from that wait alone. With persistent workers there is nothing to advise of the kind.
// The tree is walked at most twice a second: a set of workers may be seen over two readings 0.6 s
// apart, its first batch come between them (python3 short_epochs.py under watch did so). Workers
// that come while the set's others are alive are that set's.
TEST(WorkerChurnTest, ASetSeenOverTwoWalksOfTheTreeIsOneSet) {
  WorkerChurnTracker t;
  MainThreadWaits waiting, working;
  waiting.looks = waiting.loader_queue = 5;
  working.looks = working.running = 5;
  double at = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int reading = 0; reading < 8; ++reading)  // 2 workers seen, the batch, 2 more 0.6 s later
      t.add(at += 0.1, 0.1, reading < 6 ? 2 : 4, reading == 0 || reading == 6 ? 2 : 0,
            reading < 4 ? &waiting : &working);
    for (int reading = 0; reading < 10; ++reading) t.add(at += 0.1, 0.1, 4, 0, &working);
    t.add(at += 0.1, 0.1, 0, 0, &working);  // the epoch's end: its workers joined
  }
  const std::optional<WorkerChurn> c = t.summary();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->generations, 3);
  EXPECT_EQ(c->workers_started, 12);
  EXPECT_EQ(c->restarts_measured, 2);
  EXPECT_NEAR(c->restart_wait_s, 2 * 0.4, 1e-9);
}

TEST(WorkerChurnTest, WorkersStartedEveryEpochThatExplainTheWaitAreToldToPersist) {
  const Diagnosis d = diagnose_watched(churn_watched(short_epochs_program(false)));
  EXPECT_TRUE(churn_fired(d, "tree_worker_churn")) << ::testing::PrintToString(d.rules);
  EXPECT_EQ(d.bottleneck, "cpu_preprocess");
  EXPECT_NE(d.verdict.find("starts its loader workers again at every epoch (5 sets"), std::string::npos)
      << d.verdict;
  ASSERT_FALSE(d.recommendations.empty());
  const Recommendation& r = d.recommendations.front();
  EXPECT_EQ(r.setting, "persistent_workers=True");
  ASSERT_TRUE(r.predicted_speedup);
  EXPECT_NEAR(*r.predicted_speedup, 5.95 / (5.95 - 1.6), 1e-9);

  EXPECT_FALSE(churn_fired(diagnose_watched(churn_watched(short_epochs_program(true))), "tree_worker_churn"));
}

// A loop its one worker cannot keep up with (tests/corpus's imagefolder-j1: 1000x750 JPEGs on one
// worker, 2-s epochs) waits at 4 looks of 5 all along, and at 5 of 5 only while a new set forks:
// that restart costs it a tenth of a second beyond its steady wait, not the epoch's whole wait,
// and persistent_workers=True is not advised (it measured 1.00x there, 2026-11-29).
TEST(WorkerChurnTest, ALoopThatWaitsAllAlongIsChargedOnlyTheWaitBeyondItsSteadyOne) {
  WorkerChurnTracker t;
  MainThreadWaits blocked, mostly;
  blocked.looks = blocked.loader_queue = 5;
  mostly.looks = 5;
  mostly.loader_queue = 4;
  mostly.running = 1;
  double at = 0;
  for (int epoch = 0; epoch < 4; ++epoch) {
    t.add(at += 0.5, 0.5, 1, 1, &blocked);  // the new worker forks, loads its first batch
    for (int reading = 0; reading < 3; ++reading) t.add(at += 0.5, 0.5, 1, 0, &mostly);
  }
  const std::optional<WorkerChurn> c = t.summary();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->generations, 4);
  EXPECT_EQ(c->restarts_measured, 3);
  ASSERT_TRUE(c->steady_wait_share);
  EXPECT_NEAR(*c->steady_wait_share, 0.8, 1e-9);
  EXPECT_NEAR(c->restart_wait_s, 3 * 0.5 * (1 - 0.8), 1e-9);  // not 3 x 2 s of waiting
  EXPECT_NEAR(c->wait_s, 4 * (0.5 + 3 * 0.5 * 0.8), 1e-9);

  WatchDiagnosisInput in = churn_watched(short_epochs_program(false));
  in.tree.worker_churn = c;
  in.tree.worker_churn->looks = 400;
  EXPECT_FALSE(churn_fired(diagnose_watched(in), "tree_worker_churn"));
}

// A loop seen only while its workers started (every reading blocked) has no steady wait to tell a
// restart's from: not measured, nothing advised.
TEST(WorkerChurnTest, ALoopNeverSeenPastAStartUpHasItsRestartsUnmeasured) {
  WorkerChurnTracker t;
  MainThreadWaits blocked;
  blocked.looks = blocked.loader_queue = 5;
  double at = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    t.add(at += 0.5, 0.5, 2, 2, &blocked);
    t.add(at += 0.5, 0.5, 0, 0, &blocked);  // ended before its thread was seen working
  }
  const std::optional<WorkerChurn> c = t.summary();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->generations, 3);
  EXPECT_EQ(c->restarts_measured, 0);
  EXPECT_FALSE(c->first_startup_s);
  EXPECT_FALSE(c->steady_wait_share);
}

// A Hogwild script's training processes, started as a set and seen as loader workers until the
// script is known to wait for them (python.test_watch read 5 sets of 0.05 s each, over 92 looks):
// no start-up of 0.1 s, too few looks, and the sets forgotten once they are known for trainers.
TEST(WorkerChurnTest, SetsOfAFewHundredthsOfASecondOrTooFewLooksAreNoChurn) {
  WatchDiagnosisInput in = churn_watched(short_epochs_program(false));
  WorkerChurn& c = *in.tree.worker_churn;
  c.restart_wait_s = 4 * 0.05;
  c.wait_s = 0.3;
  EXPECT_FALSE(churn_fired(diagnose_watched(in), "tree_worker_churn"));
  in = churn_watched(short_epochs_program(false));
  in.tree.worker_churn->looks = 92;
  EXPECT_FALSE(churn_fired(diagnose_watched(in), "tree_worker_churn"));
}

}  // namespace
}  // namespace feedscope
