// The watcher's process tree by role, and the diagnosis from it, on fabricated samples: torch
// 1.13's unnamed forked workers, torch 2.x's pt_data_worker, spawned workers and
// multiprocessing's helpers; an input-bound, a compute-bound, a storage-bound and a launch-bound
// program.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>

#include "profiler/gpu_trace.h"
#include "profiler/process_tree.h"
#include "sampler/proc_fs.h"
#include "profiler/watch_diagnosis.h"
#include "tests/support/diagnosis_scenarios.h"

namespace feedscope {
namespace {

constexpr int kTrainer = 100;

ProcessCpu child(int pid, std::string name, std::string cmdline, double cores, char state = 'R',
                 int ppid = kTrainer) {
  ProcessCpu p;
  p.pid = pid;
  p.ppid = ppid;
  p.name = std::move(name);
  p.cmdline = std::move(cmdline);
  p.cores = cores;
  p.state = state;
  return p;
}

TEST(ProcessTreeTest, WorkersAreToldApartByNameParentageAndCommandLine) {
  const std::string trainer = "python3";
  EXPECT_EQ(classify_descendant(child(1, "python3", "python3 train.py", 1), kTrainer, trainer),
            ProcessRole::loader_worker)
      << "torch 1.13 under fork: a copy of the trainer";
  EXPECT_EQ(classify_descendant(child(2, "pt_data_worker", "python3 train.py", 1), kTrainer, trainer),
            ProcessRole::loader_worker);
  EXPECT_EQ(classify_descendant(
                child(3, "python3",
                      "python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5) "
                      "--multiprocessing-fork",
                      1, 'R', 7),
                kTrainer, trainer),
            ProcessRole::loader_worker)
      << "spawn: its parent may be a forkserver";
  EXPECT_EQ(classify_descendant(
                child(4, "python3", "python3 -c from multiprocessing.resource_tracker import main;main(5)", 0),
                kTrainer, trainer),
            ProcessRole::other);
  EXPECT_EQ(classify_descendant(child(5, "nvidia-smi", "nvidia-smi -L", 0), kTrainer, trainer),
            ProcessRole::other);
  EXPECT_EQ(classify_descendant(child(6, "python3", "python3 train.py", 1, 'R', 5), kTrainer, trainer),
            ProcessRole::other)
      << "a grandchild that is no spawned worker";
}

UtilizationSample sample(std::int64_t t_ms, double main_busy, std::vector<ProcessCpu> children,
                         double other_thread = 0, char main_state = 'R') {
  UtilizationSample s;
  s.time_ns = t_ms * 1'000'000;
  s.cpu_core_ratio = {0.5, 0.5, 0.5, 0.5};  // 4 cores
  s.cpu_system_ratio = 0.5;
  s.cpu_process_ratio = (main_busy + other_thread) / 4;
  ThreadCpu main;
  main.tid = kTrainer;
  main.name = "python3";
  main.ratio = main_busy;
  main.state = main_state;
  s.threads.push_back(main);
  ThreadCpu pool;
  pool.tid = kTrainer + 1;
  pool.name = "python3";
  pool.ratio = other_thread;
  s.threads.push_back(pool);
  s.children = std::move(children);
  s.rss_bytes = 1 << 20;
  return s;
}

// pytorch/examples' mnist_hogwild (found by bench/corpus_public.json): the script's copies read as
// loader workers until it is seen to wait for them, so at that reading its only other child was
// multiprocessing's resource tracker, which was followed as "the training process" for the rest of
// the run (main thread busy 0 %, "No clear limit", 3 trainers). A multiprocessing server is never
// followed; the next reading follows the busiest training process.
TEST(ProcessTreeTest, AScriptWaitingForItsTrainingProcessesIsFollowedIntoOneNotIntoTheResourceTracker) {
  ProcessTreeDigest tree(kTrainer, 1);
  const auto waiting_script = [](std::int64_t t_ms) {
    const std::string tracker = "python3 -c from multiprocessing.resource_tracker import main;main(5)";
    UtilizationSample s = sample(t_ms, 0.02, {child(4, "python3", tracker, 0.05),
                                              child(201, "python3", "python3 main.py", 0.85),
                                              child(202, "python3", "python3 main.py", 0.9)});
    MainThreadWaits w;
    w.looks = 30;
    w.children = 30;  // in join() at every look
    s.main_thread_waits = w;
    return s;
  };
  EXPECT_EQ(tree.add(waiting_script(0)), 0) << "its copies still read as loader workers: nothing to follow yet";
  EXPECT_EQ(tree.add(waiting_script(100)), 202) << "the busiest of its training processes";
}

TEST(ProcessTreeTest, TheSummaryAveragesEachRoleOverTheReadingsItWasIn) {
  ProcessTreeDigest tree(kTrainer, 1);
  tree.add(sample(0, 0.3, {}));
  for (int i = 1; i <= 10; ++i) {
    ProcessCpu w1 = child(201, "python3", "python3 train.py", 0.9, i % 2 ? 'R' : 'D');
    w1.read_bytes_total = static_cast<std::uint64_t>(i) * 10'000'000;
    tree.add(sample(i * 100, 0.3, {w1, child(202, "python3", "python3 train.py", 0.7),
                                   child(300, "python3", "python3 -c from multiprocessing.resource_tracker import main", 0)},
                    0.2));
  }
  const ProcessTreeSummary s = tree.summary();
  EXPECT_EQ(s.trainer_name, "python3");
  EXPECT_EQ(s.workers, 2);
  EXPECT_NEAR(s.workers_cores, 1.6, 1e-9) << "while workers were alive only";
  EXPECT_NEAR(s.worker_busy, 0.8, 1e-9);
  EXPECT_NEAR(s.worker_busy_max, 0.9, 1e-9);
  EXPECT_NEAR(s.workers_io_wait, 0.25, 1e-9) << "5 of 20 worker readings in D";
  EXPECT_NEAR(s.main_thread_busy, 0.3, 1e-9);
  EXPECT_NEAR(s.other_threads_cores, 10 * 0.2 / 11, 1e-9);
  EXPECT_EQ(s.yielding_threads_cores, 0) << "no thread gave its core away";
  ASSERT_TRUE(s.storage_read_bytes_per_s);
  EXPECT_NEAR(*s.storage_read_bytes_per_s, 90e6 / 1.0, 1e-3);
  ASSERT_EQ(s.processes.size(), 4u);
  EXPECT_EQ(s.processes[0].role, ProcessRole::trainer);
  EXPECT_EQ(s.processes[0].ppid, 1);
}

// The readings where a thread gave its core away (sched_yield) count apart, over every reading.
TEST(ProcessTreeTest, YieldingThreadsCoresAreAveragedOverTheTrainersReadings) {
  ProcessTreeDigest tree(kTrainer, 1);
  tree.add(sample(0, 0.9, {}, 0.8));
  for (int i = 1; i <= 4; ++i) {
    UtilizationSample s = sample(i * 100, 0.9, {}, 0.8);
    s.threads[1].yielding = i % 2 == 0;
    tree.add(s);
  }
  const ProcessTreeSummary s = tree.summary();
  EXPECT_NEAR(s.other_threads_cores, 0.8, 1e-9);
  EXPECT_NEAR(s.yielding_threads_cores, 2 * 0.8 / 5, 1e-9);
}

// A DataLoader without persistent_workers forks its workers anew every epoch: with short epochs
// each is seen in one reading, and they still count.
TEST(ProcessTreeTest, WorkersOfOneReadingEachStillShowHowBusyWorkersAre) {
  ProcessTreeDigest tree(kTrainer, 1);
  tree.add(sample(0, 0.3, {}));
  for (int epoch = 1; epoch <= 5; ++epoch)
    tree.add(sample(epoch * 100, 0.3, {child(200 + epoch, "python3", "python3 train.py", 0.95)}));
  const ProcessTreeSummary s = tree.summary();
  EXPECT_EQ(s.workers, 1);
  EXPECT_NEAR(s.worker_busy, 0.95, 1e-9);
  EXPECT_EQ(s.processes.size(), 6u);
}

// `feedscope watch -- bash train.sh`, where train.sh runs `nvidia-smi` and then python without
// exec: the digest follows bash to each command in turn and keeps python, which worked, as the
// trainer; bash is the launcher.
TEST(ProcessTreeTest, ALauncherIsFollowedToItsProgramAndTheBusiestProgramIsTheTrainer) {
  constexpr int kBash = 50, kSmi = 60, kPython = kTrainer;
  ProcessTreeDigest tree(kBash, 1);
  const auto launcher_reading = [&](std::int64_t t_ms, ProcessCpu child_process) {
    UtilizationSample s;
    s.time_ns = t_ms * 1'000'000;
    s.cpu_core_ratio = {0.5, 0.5, 0.5, 0.5};
    s.cpu_system_ratio = 0.5;
    s.cpu_process_ratio = 0;
    ThreadCpu main;
    main.tid = kBash;
    main.name = "bash";
    main.state = 'S';
    s.threads = {main};
    s.children = {std::move(child_process)};
    s.rss_bytes = 1 << 20;
    return s;
  };
  const auto gone = [](std::int64_t t_ms, int pid) {
    UtilizationSample s;
    s.time_ns = t_ms * 1'000'000;
    s.pid = pid;
    s.cpu_system_ratio = 0.5;
    return s;
  };
  EXPECT_EQ(tree.add(launcher_reading(0, child(kSmi, "nvidia-smi", "nvidia-smi", 0.2, 'R', kBash))), kSmi);
  UtilizationSample smi = launcher_reading(100, {});
  smi.pid = kSmi;
  smi.threads[0].tid = kSmi;
  smi.threads[0].name = "nvidia-smi";
  smi.children.clear();
  smi.cpu_process_ratio = 0.2 / 4;
  EXPECT_EQ(tree.add(smi), 0);
  EXPECT_EQ(tree.add(gone(200, kSmi)), kBash) << "its program ended: back to the launcher";
  EXPECT_EQ(tree.add(launcher_reading(300, child(kPython, "python3", "python3 train.py", 1, 'R', kBash))),
            kPython);
  UtilizationSample first = sample(400, 0.9, {});
  first.pid = kPython;
  first.threads.clear();  // a process just followed: no ratios yet
  first.cpu_process_ratio.reset();
  EXPECT_EQ(tree.add(first), 0);
  for (int i = 5; i <= 14; ++i) {
    UtilizationSample s = sample(i * 100, 0.4, {child(201, "python3", "python3 train.py", 0.95)}, 0.1);
    s.pid = kPython;
    EXPECT_EQ(tree.add(s), 0);
  }
  const ProcessTreeSummary s = tree.summary();
  EXPECT_EQ(s.trainer_pid, kPython);
  EXPECT_EQ(s.trainer_name, "python3");
  EXPECT_NEAR(s.main_thread_busy, 0.4, 1e-9) << "python's main thread, not bash's";
  EXPECT_NEAR(s.other_threads_cores, 0.1, 1e-9) << "over python's readings";
  EXPECT_EQ(s.workers, 1);
  EXPECT_NEAR(s.worker_busy, 0.95, 1e-9);
  std::map<int, ProcessRole> roles;
  for (const WatchedProcess& p : s.processes) roles[p.pid] = p.role;
  EXPECT_EQ(s.processes[0].pid, kPython);
  EXPECT_EQ(roles[kPython], ProcessRole::trainer);
  EXPECT_EQ(roles[kBash], ProcessRole::launcher);
  EXPECT_EQ(roles[kSmi], ProcessRole::other);
  EXPECT_EQ(roles[201], ProcessRole::loader_worker);
}

// The run-queue wait of the trainer's main thread and of its workers, averaged over the readings
// that have one (none: not measured, null).
TEST(ProcessTreeTest, RunQueueWaitIsAveragedForTheTrainingThreadAndTheWorkers) {
  ProcessTreeDigest tree(kTrainer, 1);
  EXPECT_FALSE(tree.summary().main_thread_run_wait);
  for (int i = 0; i < 4; ++i) {
    ProcessCpu worker = child(201, "python3", "python3 train.py", 0.7);
    worker.run_wait = 0.1 * i;
    UtilizationSample s = sample(i * 100, 0.5, {worker});
    s.threads[0].run_wait = 0.2;
    tree.add(s);
  }
  const ProcessTreeSummary t = tree.summary();
  ASSERT_TRUE(t.main_thread_run_wait);
  EXPECT_NEAR(*t.main_thread_run_wait, 0.2, 1e-9);
  ASSERT_TRUE(t.worker_run_wait);
  EXPECT_NEAR(*t.worker_run_wait, 0.15, 1e-9);
}

// Issue #25's DDP script: torch.multiprocessing.spawn starts the ranks as fresh interpreters
// (multiprocessing.spawn on their command line, like a spawned DataLoader worker) after setting
// MASTER_ADDR/MASTER_PORT; torchrun's ranks carry RANK and WORLD_SIZE. Neither is a loader worker:
// the process that started them is followed to its busiest rank, whose own workers (forked, with
// its environment) are its workers.
const char* const kSpawned =
    "python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5) --multiprocessing-fork";

// A rank torch.multiprocessing.spawn started after setting MASTER_ADDR/MASTER_PORT.
ProcessCpu spawned_rank(int pid, double cores) {
  ProcessCpu p = child(pid, "python3", kSpawned, cores);
  p.master_env = true;
  p.main_thread_busy = cores / 2;
  return p;
}

TEST(ProcessTreeTest, RanksOfADistributedJobAreNotLoaderWorkersAndTheBusiestIsTheTrainer) {
  const std::string spawned = kSpawned;
  const auto rank_process = spawned_rank;
  ProcessTreeDigest tree(kTrainer, 1);
  EXPECT_EQ(tree.add(sample(0, 0.02, {rank_process(301, 0.9), rank_process(302, 0.95)})), 302)
      << "the busiest rank is followed";
  for (int i = 1; i <= 10; ++i) {
    UtilizationSample s = sample(i * 100, 0.9, {child(401, "python3", spawned, 0.3, 'R', 302)});
    s.pid = 302;
    s.threads[0].tid = 302;
    s.children[0].master_env = true;  // a forked worker inherits the rank's environment
    EXPECT_EQ(tree.add(s), 0);
  }
  const ProcessTreeSummary t = tree.summary();
  EXPECT_EQ(t.trainer_pid, 302);
  EXPECT_EQ(t.ranks, 2);
  EXPECT_EQ(t.workers, 1) << "the rank's worker, not the other rank";
  std::map<int, ProcessRole> roles;
  for (const WatchedProcess& p : t.processes) roles[p.pid] = p.role;
  EXPECT_EQ(roles[kTrainer], ProcessRole::launcher);
  EXPECT_EQ(roles[301], ProcessRole::rank);
  EXPECT_EQ(roles[302], ProcessRole::trainer);
  EXPECT_EQ(roles[401], ProcessRole::loader_worker);

  // torchrun's ranks by RANK; a rank's forked worker has the same RANK and is its worker.
  ProcessCpu ranked = child(501, "python3", "python3 train.py", 1, 'R', 500);
  ranked.rank = 1;
  EXPECT_EQ(classify_descendant(ranked, 500, "torchrun"), ProcessRole::rank);
  ProcessCpu its_worker = child(502, "python3", "python3 train.py", 1, 'R', 501);
  its_worker.rank = 1;
  EXPECT_EQ(classify_descendant(its_worker, 501, "python3", true, 1), ProcessRole::loader_worker);
}

// Each rank's main thread is looked at too: its view carries its own waits, counted while its
// own loader workers were alive, so every rank's data stall is measured from outside.
TEST(ProcessTreeTest, EachRanksViewCarriesTheLooksAtItsOwnMainThread) {
  const std::string spawned = kSpawned;
  const auto rank_process = spawned_rank;
  ProcessTreeDigest tree(kTrainer, 1);
  ASSERT_EQ(tree.add(sample(0, 0.02, {rank_process(301, 0.5), rank_process(302, 0.95)})), 302);
  for (int i = 1; i <= 10; ++i) {
    ProcessCpu worker = child(401, "python3", spawned, 0.3, 'R', 301);  // rank 301's worker
    worker.master_env = true;
    UtilizationSample s = sample(i * 100, 0.9, {rank_process(301, 0.5), worker});
    s.pid = 302;
    s.threads[0].tid = 302;
    MainThreadWaits w;
    w.looks = 10;
    w.loader_queue = i <= 5 ? 6 : 0;  // waiting for its worker in the first half only
    w.running = w.looks - w.loader_queue;
    s.rank_main_thread_waits[301] = w;
    tree.add(s);
  }
  const std::vector<ProcessTreeSummary> views = tree.rank_views();
  const auto view = std::find_if(views.begin(), views.end(),
                                 [](const ProcessTreeSummary& v) { return v.trainer_pid == 301; });
  ASSERT_NE(view, views.end());
  ASSERT_TRUE(view->main_thread_waits);
  EXPECT_EQ(view->main_thread_waits->looks, 100u);
  EXPECT_EQ(view->main_thread_waits->loader_queue, 30u);
  EXPECT_EQ(tree.summary().main_thread_waits, std::nullopt) << "the followed rank was not looked at";
}

TEST(ProcFsDistributedEnvTest, RankNeedsWorldSizeAndMasterIsEitherVariable) {
  using namespace std::string_literals;
  const RankIdentity torchrun = parse_distributed_env("PATH=/bin\0RANK=3\0WORLD_SIZE=8\0LOCAL_RANK=3\0"s);
  EXPECT_EQ(torchrun.rank, 3);
  EXPECT_FALSE(parse_distributed_env("RANK=3\0"s).rank) << "RANK alone is someone else's variable";
  EXPECT_TRUE(parse_distributed_env("MASTER_PORT=29500\0"s).master);
  EXPECT_FALSE(parse_distributed_env("XMASTER_PORT=1\0RANKING=2\0WORLD_SIZE=2\0"s).master);
  EXPECT_FALSE(parse_distributed_env(""s).rank);
}

TEST(ProcessTreeTest, NvmlsPerProcessReadingsCountOnlyTheTreesProcesses) {
  ProcessTreeDigest tree(kTrainer, 1);
  for (int i = 0; i < 4; ++i) {
    UtilizationSample s = sample(i * 100, 0.9, {});
    GpuSample g;
    GpuProcessSample mine, theirs;
    mine.pid = kTrainer;
    mine.memory_used_bytes = (1ull << 30) * (i + 1);
    mine.sm_util_ratio = 0.2 + 0.1 * i;
    theirs.pid = 4242;  // another user's job on the same GPU
    theirs.memory_used_bytes = 40ull << 30;
    theirs.sm_util_ratio = 0.9;
    g.processes = {mine, theirs};
    g.sm_window_begin_us = i * 100'000ull;
    g.sm_window_end_us = (i + 1) * 100'000ull;
    s.gpus = {g};
    tree.add(s);
  }
  const ProcessTreeSummary s = tree.summary();
  EXPECT_TRUE(s.on_gpu);
  EXPECT_EQ(s.gpu_memory_peak_bytes, 4ull << 30);
  ASSERT_TRUE(s.trainer_gpu_sm_util);
  EXPECT_NEAR(*s.trainer_gpu_sm_util, 0.35, 1e-9);
}

// NVML's shares come per window of its clock, of any length (a read that finds no new sample
// leaves the window open), and the sampler repeats its last GPU reading until the next.
TEST(ProcessTreeTest, TheTrainersSmShareIsWeightedByTheNvmlWindowsEachCountedOnce) {
  ProcessTreeDigest tree(kTrainer, 1);
  const auto with_gpu = [](std::int64_t t_ms, std::optional<double> share, std::uint64_t begin_us,
                           std::uint64_t end_us) {
    UtilizationSample s = sample(t_ms, 0.9, {});
    GpuProcessSample trainer;
    trainer.pid = kTrainer;
    trainer.sm_util_ratio = share;
    GpuSample g;
    g.processes = {trainer};
    g.sm_window_begin_us = begin_us;
    g.sm_window_end_us = end_us;
    s.gpus = {g};
    return s;
  };
  tree.add(with_gpu(0, 0.8, 0, 1'000'000));     // busy 80 % for 1 s
  tree.add(with_gpu(50, 0.8, 0, 1'000'000));    // the same reading again
  tree.add(with_gpu(100, std::nullopt, 0, 0));  // no new NVML sample: the window stays open
  tree.add(with_gpu(200, 0, 1'000'000, 4'000'000));  // no sample of the trainer's in 3 s: idle
  const ProcessTreeSummary s = tree.summary();
  ASSERT_TRUE(s.trainer_gpu_sm_util);
  EXPECT_NEAR(*s.trainer_gpu_sm_util, 0.8 / 4, 1e-9) << "0.8 for 1 s, then 0 for 3 s";
}

// feedscope.DataLoader loads in threads of the training process: its session's spans say how many,
// and the evidence must not call that num_workers=0.
TEST(WatchDiagnosisTest, LoaderThreadsSeenInTheSpansAreNotNumWorkersZero) {
  WatchDiagnosisInput in = tree_input(0.9, 0, 0, 0.5);
  DiagnosisInput spans;
  spans.num_workers = 2;
  spans.cpus = 8;
  spans.wall_s = 10;
  in.spans = spans;
  std::string evidence;
  for (const std::string& e : diagnose_watched(in).evidence) evidence += e + "\n";
  EXPECT_NE(evidence.find("by 2 loader thread(s)"), std::string::npos) << evidence;
  EXPECT_EQ(evidence.find("num_workers=0"), std::string::npos) << evidence;
}

TEST(WatchDiagnosisTest, SaturatedWorkersWithIdleCoresGetMoreWorkersAndABoundedPrediction) {
  // 2 workers each at 95 %, trainer 40 % busy, 8 cores 35 % busy: 5.2 cores idle.
  const Diagnosis d = diagnose_watched(tree_input(0.4, 2, 0.95, 0.35));
  EXPECT_EQ(d.bottleneck, "cpu_preprocess");
  ASSERT_FALSE(d.recommendations.empty());
  const Recommendation& r = d.recommendations[0];
  // The training thread caps the gain at 1/0.4 = 2.5x (the cores at (2.3 + 5.2) / 2.3): the
  // workers that reach it are ceil(2 x 2.5).
  EXPECT_EQ(r.setting, "num_workers=5");
  EXPECT_NEAR(r.predicted_speedup.value_or(-1), 2.5, 1e-9);
  EXPECT_NE(r.basis.find("medium"), std::string::npos) << "says how sure it is";
}

// Issue #25, seen on 2 cores: one worker at 99 %, the training thread at 55 %, the machine 74 %
// busy. Half an idle core is worth a second worker: the cores cap the gain at (1.54 + 0.52) /
// 1.54 = 1.34x (a second worker measured 1.30-1.37x), not "no idle core".
TEST(WatchDiagnosisTest, HalfAnIdleCoreIsWorthAWorkerWhileTheTrainingThreadWaits) {
  WatchDiagnosisInput in = tree_input(0.55, 1, 0.99, 0.74);
  in.cpus = 2;
  const Diagnosis d = diagnose_watched(in);
  EXPECT_EQ(d.bottleneck, "cpu_preprocess");
  ASSERT_FALSE(d.recommendations.empty()) << d.verdict;
  const Recommendation& r = d.recommendations[0];
  EXPECT_EQ(r.setting, "num_workers=2");
  EXPECT_NEAR(r.predicted_speedup.value_or(-1), (1.54 + 0.52) / 1.54, 1e-9);
  EXPECT_EQ(d.verdict.find("no idle core"), std::string::npos) << d.verdict;
}

// Seen in the corpus (tests/corpus, imagefolder-j2): two workers on two cores, the machine 88 %
// busy, 0.24 cores idle; yet the training thread waited for a core 13 % of the time and each
// worker 10 %. The idle time came at other moments (each epoch's new workers), so a third worker
// measured 0.92-0.94x, not the 1.11x the idle cores promised: no worker is advised.
TEST(WatchDiagnosisTest, IdleCoresBesideThreadsWaitingForACoreAreNoRoomForAWorker) {
  WatchDiagnosisInput in = tree_input(0.33, 2, 0.87, 0.88);
  in.cpus = 2;
  in.tree.trainer_cores = 0.34;
  in.tree.workers_cores = 1.76;
  in.tree.main_thread_run_wait = 0.13;
  in.tree.worker_run_wait = 0.10;
  const Diagnosis d = diagnose_watched(in);
  EXPECT_EQ(d.bottleneck, "cpu_preprocess");
  for (const Recommendation& r : d.recommendations)
    EXPECT_EQ(r.setting.find("num_workers"), std::string::npos) << r.action;
  EXPECT_NE(d.verdict.find("no idle core"), std::string::npos) << d.verdict;
  bool said = false;
  for (const std::string& e : d.evidence) said |= e.find("came at other moments") != std::string::npos;
  EXPECT_TRUE(said);
}

// A worker on a full machine reads partly busy and partly waiting for a core: its demand is both,
// and where the cores are full no worker is advised, and the verdict names who holds them.
TEST(WatchDiagnosisTest, WorkersWaitingForACoreOnAFullMachineAreSaturatedWithNoIdleCore) {
  WatchDiagnosisInput in = tree_input(0.45, 2, 0.62, 0.985);
  in.cpus = 2;
  in.tree.worker_run_wait = 0.3;
  in.tree.main_thread_run_wait = 0.2;
  const Diagnosis d = diagnose_watched(in);
  EXPECT_EQ(d.bottleneck, "cpu_preprocess");
  EXPECT_NE(d.verdict.find("no idle core"), std::string::npos) << d.verdict;
  EXPECT_NE(d.verdict.find("2 loader workers 1.24 cores"), std::string::npos) << d.verdict;
  EXPECT_NE(d.verdict.find("waiting for a core"), std::string::npos) << d.verdict;
  for (const Recommendation& r : d.recommendations)
    EXPECT_EQ(r.setting.find("num_workers"), std::string::npos) << r.action;
}

// Issue #25: on a saturated CPU with no single process pinned, the limit is the cores, not
// "something else (network, sleep, a lock)".
TEST(WatchDiagnosisTest, ACpuFullOfTheProgramsProcessesIsTheLimitNotNoClearLimit) {
  WatchDiagnosisInput in = tree_input(0.5, 2, 0.6, 0.97);
  in.cpus = 2;
  in.tree.trainer_cores = 0.77;
  const Diagnosis d = diagnose_watched(in);
  EXPECT_EQ(d.verdict.find("No clear limit"), std::string::npos) << d.verdict;
  EXPECT_NE(d.verdict.find("cores are full"), std::string::npos) << d.verdict;
  EXPECT_EQ(d.bottleneck, "cpu_preprocess");  // the workers hold more of the cores
  for (const Recommendation& r : d.recommendations) EXPECT_FALSE(r.predicted_speedup);
  // With cores idle the same shares are no CPU limit.
  in.utilization.series["cpu_system_ratio"] = SeriesStats{0.5, 0.5, 0.5};
  EXPECT_NE(diagnose_watched(in).verdict.find("No clear limit"), std::string::npos);
}

// Issue #38: Hogwild's training processes are named together in who holds the cores, not the one
// followed as "the training process" and the other among "its other processes".
TEST(WatchDiagnosisTest, HogwildsTrainingProcessesAreNamedTogetherInWhoHoldsTheCores) {
  WatchDiagnosisInput in = tree_input(0.55, 2, 0.07, 0.97);
  in.cpus = 2;
  in.tree.trainer_cores = 0.84;
  in.tree.main_thread_run_wait = 0.42;
  in.tree.trainers = 2;
  in.tree.other_processes_cores = 0.5;  // the second trainer, 0.48, and the launcher waiting in join()
  WatchedProcess first, second, launcher;
  first.pid = 100;
  first.role = second.role = ProcessRole::trainer;
  first.cpu_cores_mean = 0.84;
  second.pid = 101;
  second.cpu_cores_mean = 0.48;
  launcher.pid = 99;
  launcher.role = ProcessRole::launcher;
  launcher.cpu_cores_mean = 0.02;
  in.tree.processes = {first, second, launcher};
  const Diagnosis d = diagnose_watched(in);
  EXPECT_NE(d.verdict.find("2 training processes 1.32 cores"), std::string::npos) << d.verdict;
  EXPECT_NE(d.verdict.find("its other processes 0.02 cores"), std::string::npos) << d.verdict;
  EXPECT_EQ(d.verdict.find("the training process "), std::string::npos) << d.verdict;
}

// Issue #25: a step on one thread beside an idle core gets the thread count to try and measure
// (no number and no setting claimed: the corpus measured 0.67x to 1.54x for it), and
// torch.compile only on a torch that has it.
TEST(WatchDiagnosisTest, AOneThreadStepBesideAnIdleCoreGetsTheThreadCountAndAdviceForItsTorch) {
  WatchDiagnosisInput in = tree_input(0.97, 1, 0.3, 0.55);
  in.cpus = 2;
  in.torch = ProgramTorch{"1.13.0a0", "/usr/lib/python3/dist-packages/torch/version.py"};
  Diagnosis d = diagnose_watched(in);
  EXPECT_EQ(d.bottleneck, "cpu_compute");
  ASSERT_FALSE(d.recommendations.empty());
  EXPECT_NE(d.recommendations[0].action.find("OMP_NUM_THREADS=2"), std::string::npos);
  EXPECT_EQ(d.recommendations[0].setting, "") << "a suggestion to measure, not a claim";
  EXPECT_FALSE(d.recommendations[0].predicted_speedup);
  EXPECT_NE(d.recommendations[0].basis.find("at most"), std::string::npos);
  for (const Recommendation& r : d.recommendations)
    EXPECT_EQ(r.action.find("torch.compile"), std::string::npos) << "torch 1.13 has none";
  in.torch->version = "2.11.0+cu130";
  d = diagnose_watched(in);
  EXPECT_NE(d.recommendations.back().action.find("torch.compile"), std::string::npos);
  // Two thirds of an idle core still make a second thread, never "set_num_threads(1)".
  in.utilization.series["cpu_system_ratio"] = SeriesStats{0.66, 0.66, 0.66};
  d = diagnose_watched(in);
  ASSERT_FALSE(d.recommendations.empty());
  EXPECT_NE(d.recommendations[0].action.find("OMP_NUM_THREADS=2"), std::string::npos);
  // Its compute threads already busy: no thread advice.
  in.tree.other_threads_cores = 0.8;
  d = diagnose_watched(in);
  for (const Recommendation& r : d.recommendations)
    EXPECT_EQ(r.action.find("OMP_NUM_THREADS"), std::string::npos);
}

// Issue #25: a program that failed within seconds (a missing script) gets how it ended, no
// bottleneck; one that failed after running long enough is diagnosed as it ran.
TEST(WatchDiagnosisTest, AProgramThatFailedAtOnceGetsNoBottleneck) {
  WatchDiagnosisInput in = tree_input(0.98, 0, 0, 0.5);
  in.ended = "failed";
  in.exit = "exited with 2";
  in.wall_s = 0.05;
  Diagnosis d = diagnose_watched(in);
  EXPECT_EQ(d.bottleneck, "");
  EXPECT_TRUE(d.recommendations.empty());
  EXPECT_NE(d.verdict.find("exited with 2 after 0.1 s"), std::string::npos) << d.verdict;
  in.wall_s = 60;
  EXPECT_EQ(diagnose_watched(in).bottleneck, "cpu_compute");
}

TEST(WatchDiagnosisTest, SaturatedWorkersOnFullCoresGetCheaperPreprocessingWithoutAPrediction) {
  const Diagnosis d = diagnose_watched(tree_input(0.3, 8, 0.95, 0.98));
  EXPECT_EQ(d.bottleneck, "cpu_preprocess");
  ASSERT_FALSE(d.recommendations.empty());
  EXPECT_FALSE(d.recommendations[0].predicted_speedup) << "no prediction: null, not 0";
  EXPECT_NE(d.verdict.find("no idle core"), std::string::npos) << d.verdict;
}

TEST(WatchDiagnosisTest, APinnedTrainingThreadWithIdleWorkersIsComputeBound) {
  const Diagnosis d = diagnose_watched(tree_input(0.98, 2, 0.2, 0.4));
  EXPECT_EQ(d.bottleneck, "cpu_compute");
}

TEST(WatchDiagnosisTest, WorkersWaitingOnStorageWhileReadingAreStorageBound) {
  const Diagnosis d = diagnose_watched(tree_input(0.2, 4, 0.3, 0.2, 0.6, 180));
  EXPECT_EQ(d.bottleneck, "storage_io");
  // Waiting in D on page-cache reads is no storage limit: no bytes came from the disk.
  EXPECT_NE(diagnose_watched(tree_input(0.2, 4, 0.3, 0.2, 0.6, 0.1)).bottleneck, "storage_io");
}

TEST(WatchDiagnosisTest, ShortKernelsOnAnIdleGpuWithABusyTrainingThreadAreLaunchBound) {
  WatchDiagnosisInput in = tree_input(0.97, 0, 0, 0.2);
  GpuTraceSummary g;
  g.steps = 1;
  g.step_wall_s = 2.0;
  g.kernels = 60'000;
  g.mean_kernel_us = 3.5;
  g.gpu_busy_ratio = 0.12;
  g.syncs = 10'000;
  g.sync_wait_s = 0.6;
  in.gpu_trace = g;
  const Diagnosis d = diagnose_watched(in);
  EXPECT_EQ(d.bottleneck, "launch_overhead");
  bool sync_advice = false;
  for (const Recommendation& r : d.recommendations)
    sync_advice |= r.action.find(".item()") != std::string::npos;
  EXPECT_TRUE(sync_advice) << "a host sync in every iteration is named";
  in.gpu_trace->gpu_busy_ratio = 0.93;
  EXPECT_EQ(diagnose_watched(in).bottleneck, "gpu_compute");
}

// A watched program's CUDA trace over one window of `wall_s`: its kernels, the GPU's busy share,
// and its cudaStreamSynchronize calls with the time the host spent blocked in them.
GpuTraceSummary traced(double wall_s, std::int64_t kernels, double mean_kernel_us, double busy,
                       std::int64_t syncs, double sync_wait_s) {
  GpuTraceSummary g;
  g.steps = 1;
  g.step_wall_s = wall_s;
  g.kernels = kernels;
  g.mean_kernel_us = mean_kernel_us;
  g.gpu_busy_ratio = busy;
  g.syncs = syncs;
  g.sync_wait_s = sync_wait_s;
  if (syncs > 0) g.syncs_by_call = {{"cudaStreamSynchronize", syncs}};
  return g;
}

TEST(WatchDiagnosisTest, AThreadSpinningInSyncsIsNamedForTheSyncsNotForLaunching) {
  // .item() every iteration: the main thread reads 98 % busy, but the trace shows it blocked in
  // cudaStreamSynchronize 70 % of the time (CUDA spins in a synchronize while cores are free).
  WatchDiagnosisInput in = tree_input(0.98, 0, 0, 0.2);
  in.gpu_trace = traced(2.0, 4'000, 250, 0.5, 2'000, 1.4);
  const Diagnosis d = diagnose_watched(in);
  EXPECT_EQ(d.bottleneck, "launch_overhead");
  EXPECT_NE(d.verdict.find("Sync-bound"), std::string::npos) << d.verdict;
  EXPECT_NE(d.verdict.find("1000 per second: cudaStreamSynchronize 2000"), std::string::npos) << d.verdict;
  bool spin_line = false;
  for (const std::string& e : d.evidence) spin_line |= e.find("70% is waiting in CUDA syncs") != std::string::npos;
  EXPECT_TRUE(spin_line);
}

TEST(WatchDiagnosisTest, AnItemEveryIterationWithTheGpuHalfBusyIsSyncBoundWithAPrediction) {
  // gpu_programs.py matmul-item on an H100: main thread 97 % busy, 27 % of the traced time in
  // cudaStreamSynchronize, the GPU busy 50 %. It read "No clear limit"; without the .item() (the
  // same loop reading the sum once, at the end) it ran 1.42x faster.
  WatchDiagnosisInput in = tree_input(0.97, 0, 0, 0.09);
  in.gpu_trace = traced(1.166, 20'001, 27.9, 0.497, 10'000, 0.309);
  const Diagnosis d = diagnose_watched(in);
  EXPECT_EQ(d.bottleneck, "launch_overhead") << d.verdict;
  EXPECT_NE(d.verdict.find("Sync-bound"), std::string::npos) << d.verdict;
  const Recommendation* sync = nullptr;
  for (const Recommendation& r : d.recommendations)
    if (r.setting == "no per-step sync") sync = &r;
  ASSERT_NE(sync, nullptr);
  // 1 / max(0.97 - 0.265, 0.497)
  EXPECT_NEAR(sync->predicted_speedup.value_or(-1), 1.0 / (0.97 - 0.309 / 1.166), 1e-6);
}

TEST(WatchDiagnosisTest, ASyncPredictionIsCappedByWhatTheLoaderWorkersCanCarry) {
  // imagenet --dummy resnet50 on an H200 (2026-11-28): 8 workers busy 62% of a core each, the
  // main thread 77% busy of which 34% in syncs, the GPU busy 52%. Without the syncs the loop
  // would run 1 / max(0.43, 0.52) = 1.92x faster, but the workers carry only 1 / 0.62 = 1.61x.
  WatchDiagnosisInput in = tree_input(0.77, 8, 0.62, 0.25);
  in.gpu_trace = traced(5.21, 17'939, 147.6, 0.52, 68, 0.34 * 5.21);
  const Diagnosis d = diagnose_watched(in);
  ASSERT_EQ(d.bottleneck, "launch_overhead") << d.verdict;
  const Recommendation* sync = nullptr;
  for (const Recommendation& r : d.recommendations)
    if (r.setting == "no per-step sync") sync = &r;
  ASSERT_NE(sync, nullptr);
  EXPECT_NEAR(sync->predicted_speedup.value_or(-1), 1.0 / 0.62, 1e-6);
  EXPECT_NE(sync->basis.find("capped at 1.61x by the loader workers, busy 62% of a core each"),
            std::string::npos) << sync->basis;
  // Workers with room to spare leave the prediction as it was.
  in.tree.worker_busy = 0.3;
  const Diagnosis spare = diagnose_watched(in);
  for (const Recommendation& r : spare.recommendations) {
    if (r.setting == "no per-step sync") {
      EXPECT_NEAR(r.predicted_speedup.value_or(-1), 1.0 / 0.52, 1e-6) << r.basis;
    }
  }
}

TEST(WatchDiagnosisTest, FiguresReadMostlyInTheLeadSaySoForTheWarmUpIsInThem) {
  // imagenet --dummy resnet50 on an H200: 5.2 s read, the 5-s lead and 0.2 s of a window before
  // the device check stopped it; its first step alone took 4.1 s.
  WatchDiagnosisInput in = tree_input(0.77, 0, 0, 0.25);
  in.gpu_trace = traced(5.21, 17'939, 147.6, 0.52, 68, 0.34 * 5.21);
  GpuTraceSummary::Sampled sampled;
  sampled.sampling = TraceSampling{1'000'000'000, 10'000'000'000, 5'000'000'000};
  sampled.read_s = sampled.span_s = 5.21;
  sampled.windows = 2;
  in.gpu_trace->sampled = sampled;
  const auto says_lead = [](const Diagnosis& d) {
    return std::any_of(d.evidence.begin(), d.evidence.end(), [](const std::string& e) {
      return e.find("the GPU figures are mostly the lead, the first 5 s of kernels") != std::string::npos;
    });
  };
  EXPECT_TRUE(says_lead(diagnose_watched(in)));
  // A full window past the lead: the steady state is in the figures.
  in.gpu_trace->sampled->read_s = 6.2;
  in.gpu_trace->sampled->span_s = 20;
  in.gpu_trace->sampled->later.read_s = 1.0;
  in.gpu_trace->sampled->later.windows = 1;
  EXPECT_FALSE(says_lead(diagnose_watched(in)));
  in.gpu_trace->sampled.reset();
  EXPECT_FALSE(says_lead(diagnose_watched(in))) << "traced whole";
}

TEST(WatchDiagnosisTest, ASaturatedWorkerIsNotHiddenByATrainingThreadSpinningInSyncs) {
  // One loader worker at 99 %, the GPU at 30 %, the main thread 90 % busy of which 70 % is spent
  // spinning in the sync that waits for its next batch's step: input-bound, not CPU compute.
  WatchDiagnosisInput in = tree_input(0.9, 1, 0.99, 0.3);
  in.gpu_trace = traced(10.0, 20'000, 150, 0.3, 1'000, 7.0);
  EXPECT_EQ(diagnose_watched(in).bottleneck, "cpu_preprocess");
}

TEST(WatchDiagnosisTest, WithoutATraceNvmlsViewOfTheTrainingProcessDecidesOnTheGpu) {
  WatchDiagnosisInput in = tree_input(0.97, 0, 0, 0.2);
  in.tree.on_gpu = true;
  in.tree.trainer_gpu_sm_util = 0.15;
  EXPECT_EQ(diagnose_watched(in).bottleneck, "launch_overhead");
  in.tree.trainer_gpu_sm_util = 0.95;
  EXPECT_EQ(diagnose_watched(in).bottleneck, "gpu_compute");
  in.tree.trainer_gpu_sm_util = std::nullopt;
  const Diagnosis d = diagnose_watched(in);
  EXPECT_EQ(d.bottleneck, "cpu_compute") << "no GPU reading: the CPU rules";
  bool said = false;
  for (const std::string& e : d.evidence) said |= e.find("SM share: not measured") != std::string::npos;
  EXPECT_TRUE(said) << "an SM share NVML did not give is said to be not measured, not left out";
}

TEST(WatchDiagnosisTest, SpansFromTheProgramDecideAndTheTreeAddsEvidence) {
  WatchDiagnosisInput in = tree_input(0.3, 1, 0.95, 0.5);
  DiagnosisInput spans;
  spans.wall_s = 10;
  spans.batches = 100;
  spans.batch_size = 32;
  spans.samples_per_s = 320;
  spans.cpus = 8;
  spans.stages = {StageStats{"wait", 100, 9.0, 90, 90, 95, 0.9, 1},
                  StageStats{"step", 100, 1.0, 10, 10, 11, 0.1, 1}};
  in.spans = spans;
  const Diagnosis d = diagnose_watched(in);
  EXPECT_GT(d.data_stall_ratio, 0.8) << "measured from the wait spans";
  bool tree_line = false;
  for (const std::string& e : d.evidence) tree_line |= e.find("loader worker processes") != std::string::npos;
  EXPECT_TRUE(tree_line);
}

// feedscope.DataLoader(device="cuda") under watch: the Session's 100 batches of 50 ms over 5 s,
// and the trace of the same 5 s, one CUDA-active window in which each batch ran a 30 ms kernel.
// Per window the GPU "works 3000 ms per step" and every prediction fell below 1x; per batch, 30 ms.
TEST(WatchDiagnosisTest, ASessionsBatchesAndItsTraceGiveTheGpusWorkPerBatch) {
  constexpr std::int64_t ms = 1'000'000;
  GpuActivity a;
  for (std::uint32_t i = 0; i < 100; ++i) {
    const std::int64_t t = 3'600'000 * ms + i * 50 * ms;
    a.runtime.push_back({"cudaLaunchKernel", t, t + ms / 100, 1, i + 1});
    a.kernels.push_back({"sm90_xmma_gemm", t + ms / 50, t + ms / 50 + 30 * ms, 0, 7, i + 1});
  }
  WatchDiagnosisInput in = tree_input(0.3, 2, 0.9, 0.4);
  in.gpu_trace = summarize_program_activity(a, kernel_active_windows(a));
  ASSERT_EQ(in.gpu_trace->steps, 1);
  DiagnosisInput spans;
  spans.wall_s = 5;
  spans.batches = 100;
  spans.batch_size = 32;
  spans.samples_per_s = 640;
  spans.cpus = 8;
  spans.num_workers = 2;
  spans.on_gpu = true;
  spans.stages = {StageStats{"wait", 100, 1.5, 15, 15, 16, 0.3, 1},
                  StageStats{"step", 100, 3.3, 33, 33, 34, 0.66, 1},
                  StageStats{"decode", 100, 9.0, 90, 90, 95, 0.9, 2}};
  in.spans = spans;
  const Evidence e = evidence_of(in);
  ASSERT_TRUE(e.gpu_trace);
  EXPECT_EQ(e.gpu_trace->steps, 100);
  EXPECT_NEAR(e.gpu_trace->device_s_per_step, 0.030, 0.0005);
  EXPECT_NEAR(e.gpu_trace->kernels_per_step, 1.0, 0.02);
  const Diagnosis d = diagnose(e);
  for (const std::string& line : d.evidence)
    EXPECT_EQ(line.find("the GPU works"), std::string::npos) << "the step's span holds the GPU's 30 ms: " << line;
  EXPECT_TRUE(std::any_of(d.recommendations.begin(), d.recommendations.end(),
                          [](const Recommendation& r) { return r.predicted_speedup.value_or(0) >= 1.05; }))
      << "a prediction above 1x survives";
}


// Memory: smaps_rollup readings every half second (the CPU ones at 10 Hz), a forked program with
// two workers for 20 s. `worker_mib_s`: each worker's private growth, its shared memory falling
// as fast (copy-on-access); `trainer_mib_s`: the trainer's own.
ProcessTreeSummary memory_program(double worker_mib_s, double trainer_mib_s,
                                  std::uint64_t available = 8ull << 30) {
  constexpr double kMiB = 1 << 20;
  ProcessTreeDigest digest(kTrainer, 1);
  for (int ms = 0; ms <= 20'000; ms += 100) {
    const double t = ms / 1000.0;
    const bool rollup = ms % 500 == 0;
    std::vector<ProcessCpu> workers;
    for (int pid : {101, 102}) {
      ProcessCpu w = child(pid, "python3", "python3 train.py", 0.5);
      if (rollup) {
        MemoryRollup m;
        m.private_dirty_bytes = static_cast<std::uint64_t>((20 + worker_mib_s * t) * kMiB);
        m.shared_dirty_bytes = static_cast<std::uint64_t>((600 - worker_mib_s * t) * kMiB);
        m.rss_bytes = m.private_dirty_bytes + m.shared_dirty_bytes;
        m.pss_bytes = m.private_dirty_bytes + m.shared_dirty_bytes / 3;
        w.memory = m;
      }
      workers.push_back(w);
    }
    UtilizationSample s = sample(ms, 0.3, workers);
    s.memory_available_bytes = available - static_cast<std::uint64_t>((2 * worker_mib_s + trainer_mib_s) * t * kMiB);
    if (rollup) {
      MemoryRollup m;
      m.private_dirty_bytes = static_cast<std::uint64_t>((640 + trainer_mib_s * t) * kMiB);
      m.shared_dirty_bytes = 4 * static_cast<std::uint64_t>(kMiB);
      s.memory = m;
    }
    digest.add(s);
  }
  return digest.summary();
}

TEST(ProcessTreeTest, MemoryTrendsAreSlopesOfEachProcessAfterItsStartUp) {
  const ProcessTreeSummary t = memory_program(8, 0);
  ASSERT_TRUE(t.memory);
  EXPECT_NEAR(t.memory->rollup_period_s, 0.5, 1e-9);
  EXPECT_EQ(t.memory->rollup_readings, 41u);
  EXPECT_EQ(t.memory->available_last_bytes, (8ull << 30) - (320ull << 20));
  EXPECT_EQ(t.memory->available_min_bytes, t.memory->available_last_bytes);
  for (const WatchedProcess& p : t.processes) {
    ASSERT_TRUE(p.memory) << p.pid;
    ASSERT_TRUE(p.memory->private_bytes_per_s) << p.pid;
    if (p.role == ProcessRole::loader_worker) {
      EXPECT_NEAR(*p.memory->private_bytes_per_s / (1 << 20), 8, 0.01) << p.pid;
      EXPECT_NEAR(*p.memory->shared_bytes_per_s / (1 << 20), -8, 0.01) << p.pid;
      EXPECT_TRUE(p.memory->steady);
      EXPECT_GT(p.memory->window_s, 12);  // its first third left out
    } else {
      EXPECT_NEAR(*p.memory->private_bytes_per_s, 0, 1) << "the trainer is flat";
      EXPECT_FALSE(p.memory->steady);
    }
  }
  // The timeline by role: the workers' private memory together rises, their shared falls.
  const auto& w = t.memory->workers_private_bytes;
  ASSERT_GE(w.size(), 20u);
  EXPECT_NEAR(w.front() / (1 << 20), 40, 8);
  EXPECT_NEAR(w.back() / (1 << 20), 40 + 2 * 8 * 20, 16);
  EXPECT_GT(t.memory->workers_shared_bytes.front(), t.memory->workers_shared_bytes.back());
  EXPECT_NEAR(t.memory->trainer_private_bytes.back() / (1 << 20), 640, 1);
}

TEST(ProcessTreeTest, WorkersCopyingTheirParentAreCopyOnAccessWithTheTimeToRunOut) {
  WatchDiagnosisInput in = tree_input(0.3, 2, 0.5, 0.3);
  in.tree = memory_program(8, 0);
  const Diagnosis d = diagnose_watched(in);
  ASSERT_EQ(d.memory.size(), 1u) << ::testing::PrintToString(d.evidence);
  const MemoryFinding& m = d.memory[0];
  EXPECT_EQ(m.kind, "memory_copy_on_access");
  EXPECT_EQ(m.role, "loader_worker");
  EXPECT_EQ(m.pids, (std::vector<int>{101, 102}));
  ASSERT_TRUE(m.private_bytes_per_s && m.exhausted_in_s && m.headroom_bytes);
  EXPECT_NEAR(*m.private_bytes_per_s / (1 << 20), 16, 0.05) << "two workers at 8 MiB/s";
  EXPECT_LT(*m.shared_bytes_per_s, 0);
  EXPECT_NEAR(*m.exhausted_in_s, *m.headroom_bytes / *m.private_bytes_per_s, 1e-6);
  EXPECT_NE(m.fix.find("numpy"), std::string::npos) << m.fix;
  EXPECT_NE(m.fix.find("feedscope.DataLoader"), std::string::npos) << m.fix;
  EXPECT_FALSE(d.bottleneck.empty()) << "beside the bottleneck, not instead of it";
}

TEST(ProcessTreeTest, ATrainerThatGrowsAloneIsALeakInOneProcess) {
  WatchDiagnosisInput in = tree_input(0.3, 2, 0.5, 0.3);
  in.tree = memory_program(0, 6);
  const Diagnosis d = diagnose_watched(in);
  ASSERT_EQ(d.memory.size(), 1u) << ::testing::PrintToString(d.evidence);
  EXPECT_EQ(d.memory[0].kind, "memory_leak_one_process");
  EXPECT_EQ(d.memory[0].role, "trainer");
  EXPECT_EQ(d.memory[0].pids, std::vector<int>{kTrainer});
  EXPECT_NEAR(*d.memory[0].private_bytes_per_s / (1 << 20), 6, 0.05);
}

// A trainer beside one loader worker started with it (so its trend is its whole watch), for
// `seconds`, its private memory 640 + mib(t) MiB, read every half second.
ProcessTreeSummary growing_trainer(double seconds, const std::function<double(double)>& mib) {
  constexpr double kMiB = 1 << 20;
  ProcessTreeDigest digest(kTrainer, 1);
  for (int ms = 0; ms <= static_cast<int>(seconds * 1000); ms += 100) {
    const double t = ms / 1000.0;
    const bool rollup = ms % 500 == 0;
    ProcessCpu w = child(101, "python3", "python3 train.py", 0.5);
    if (rollup) {
      MemoryRollup m;
      m.private_dirty_bytes = static_cast<std::uint64_t>(20 * kMiB);
      m.shared_dirty_bytes = static_cast<std::uint64_t>(600 * kMiB);
      m.rss_bytes = m.private_dirty_bytes + m.shared_dirty_bytes;
      m.pss_bytes = m.private_dirty_bytes + m.shared_dirty_bytes / 2;
      w.memory = m;
    }
    UtilizationSample s = sample(ms, 0.3, {w});
    s.memory_available_bytes = (8ull << 30) - static_cast<std::uint64_t>(mib(t) * kMiB);
    if (rollup) {
      MemoryRollup m;
      m.private_dirty_bytes = static_cast<std::uint64_t>((640 + mib(t)) * kMiB);
      m.shared_dirty_bytes = static_cast<std::uint64_t>(4 * kMiB);
      s.memory = m;
    }
    digest.add(s);
  }
  return digest.summary();
}

const WatchedProcess& trainer_of(const ProcessTreeSummary& t) {
  for (const WatchedProcess& p : t.processes)
    if (p.pid == kTrainer) return p;
  throw std::runtime_error("no trainer");
}

// A leak is a trend that does not bend: warm-up grows fast and stops.
TEST(ProcessTreeTest, ThirtyMiBInTheFirstTwentySecondsThenFlatIsNoLeak) {
  WatchDiagnosisInput in = tree_input(0.3, 1, 0.5, 0.3);
  in.tree = growing_trainer(60, [](double t) { return 30 * std::min(t, 20.0) / 20; });
  ASSERT_TRUE(trainer_of(in.tree).memory);
  EXPECT_TRUE(trainer_of(in.tree).memory->levels_off);
  EXPECT_NEAR(trainer_of(in.tree).memory->rise_s, 20, 1);
  const Diagnosis d = diagnose_watched(in);
  EXPECT_TRUE(d.memory.empty()) << ::testing::PrintToString(d.evidence);
}

TEST(ProcessTreeTest, WarmUpThatSlowsIsToldFromALeakByItsShape) {
  // 120 MiB approached with a 20-s time constant: both halves of the minute grow at a third of
  // the whole's rate or more, which the halves alone read as a trend.
  WatchDiagnosisInput in = tree_input(0.3, 1, 0.5, 0.3);
  in.tree = growing_trainer(60, [](double t) { return 120 * (1 - std::exp(-t / 20)); });
  ASSERT_TRUE(trainer_of(in.tree).memory->steady);
  const Diagnosis d = diagnose_watched(in);
  EXPECT_TRUE(d.memory.empty()) << ::testing::PrintToString(d.evidence);
  const bool said = std::any_of(d.evidence.begin(), d.evidence.end(), [](const std::string& e) {
    return e.find("then levelled off") != std::string::npos && e.find("not a leak; watched 60 s") != std::string::npos;
  });
  EXPECT_TRUE(said) << ::testing::PrintToString(d.evidence);
}

TEST(ProcessTreeTest, SteadyGrowthWatchedAMinuteIsALeakAndUnderAMinuteNotYetJudged) {
  WatchDiagnosisInput in = tree_input(0.3, 1, 0.5, 0.3);
  in.tree = growing_trainer(60, [](double t) { return 2 * t; });
  Diagnosis d = diagnose_watched(in);
  ASSERT_EQ(d.memory.size(), 1u) << ::testing::PrintToString(d.evidence);
  EXPECT_EQ(d.memory[0].kind, "memory_leak_one_process");
  EXPECT_EQ(d.memory[0].summary.rfind("a leak in one process:", 0), 0u) << d.memory[0].summary;
  EXPECT_NE(d.memory[0].summary.find("with no bend"), std::string::npos) << d.memory[0].summary;
  EXPECT_NE(d.memory[0].summary.find("watched 60 s"), std::string::npos) << d.memory[0].summary;
  EXPECT_NEAR(*d.memory[0].watched_s, 60, 1e-9);
  EXPECT_TRUE(d.memory[0].exhausted_in_s);

  in.tree = growing_trainer(30, [](double t) { return 2 * t; });
  d = diagnose_watched(in);
  ASSERT_EQ(d.memory.size(), 1u) << ::testing::PrintToString(d.evidence);
  EXPECT_EQ(d.memory[0].summary.rfind("growing, not yet judged:", 0), 0u) << d.memory[0].summary;
  EXPECT_NE(d.memory[0].summary.find("watched 30 s, under the 60 s a leak is judged over"), std::string::npos)
      << d.memory[0].summary;
  EXPECT_FALSE(d.memory[0].exhausted_in_s) << "no time to run out from under a minute";
  EXPECT_NE(d.memory[0].fix.find("watch it 60 s or more"), std::string::npos) << d.memory[0].fix;
}

TEST(ProcessTreeTest, FlatMemoryOrAMachineWithRoomIsNoMemoryFinding) {
  WatchDiagnosisInput in = tree_input(0.3, 2, 0.5, 0.3);
  in.tree = memory_program(0, 0);
  const Diagnosis d = diagnose_watched(in);
  EXPECT_TRUE(d.memory.empty()) << ::testing::PrintToString(d.evidence);
  // Slow growth, under the thresholds over a 20 s window, is no finding either.
  in.tree = memory_program(0.2, 0.2);
  EXPECT_TRUE(diagnose_watched(in).memory.empty());
}

TEST(ProcessTreeTest, WorkersWhoseWholeCopiesDoNotFitAreTooManyForTheMemory) {
  WatchDiagnosisInput in = tree_input(0.3, 2, 0.5, 0.3);
  in.tree = memory_program(8, 0, 1ull << 30);  // 1 GiB available, 640 MiB of parent per worker
  const Diagnosis d = diagnose_watched(in);
  ASSERT_EQ(d.memory.size(), 2u) << ::testing::PrintToString(d.evidence);
  EXPECT_EQ(d.memory[1].kind, "memory_workers_exceed_headroom");
  EXPECT_NE(d.memory[1].summary.find("1 fit"), std::string::npos) << d.memory[1].summary;
}

}  // namespace
}  // namespace feedscope
