// The ranks of a torch.distributed job side by side (profiler/rank_digest.h): each rank read as a
// process with its own workers for the whole run (ProcessTreeDigest::rank_views), and the job's
// straggler named from spans, from saturated workers, or from a busy main thread.
#include <gtest/gtest.h>

#include <algorithm>

#include "profiler/process_tree.h"
#include "profiler/rank_digest.h"
#include "profiler/watched_gpu.h"
#include "sampler/proc_fs.h"

namespace feedscope {
namespace {

constexpr int kLauncher = 50;  // torchrun

ProcessCpu rank_process(int pid, int ppid, std::optional<int> rank, double cores, std::optional<double> main_busy) {
  ProcessCpu p;
  p.pid = pid;
  p.ppid = ppid;
  p.name = "python3";
  p.cmdline = "python3 train.py";
  p.cores = cores;
  p.state = 'R';
  p.rank = rank;
  p.local_rank = rank;
  p.world_size = 2;
  p.master_env = true;
  p.job = "127.0.0.1:29500 rdzv=job";
  p.main_thread_busy = main_busy;
  return p;
}

// torchrun (the started process) with two ranks, each with one forked worker: rank 1's worker
// saturated, rank 0's idle; the sampler reads the whole tree and follows rank 0's threads.
void two_ranks_one_slow_loader(ProcessTreeDigest& tree) {
  for (int i = 0; i <= 20; ++i) {
    UtilizationSample s;
    s.time_ns = i * 100'000'000LL;
    s.cpu_core_ratio = {0.5, 0.5, 0.5, 0.5};
    s.cpu_system_ratio = 0.5;
    s.pid = i == 0 ? 0 : 101;
    if (i > 0) {
      s.cpu_process_ratio = 0.1 / 4;
      ThreadCpu main;
      main.tid = 101;
      main.name = "python3";
      main.ratio = 0.1;
      s.threads = {main};
    } else {
      ThreadCpu main;
      main.tid = kLauncher;
      main.name = "torchrun";
      s.threads = {main};
    }
    s.children = {rank_process(101, kLauncher, 0, 0.1, 0.1), rank_process(102, kLauncher, 1, 0.12, 0.1),
                  rank_process(201, 101, 0, 0.1, 0.1), rank_process(202, 102, 1, 0.95, 0.95)};
    const int follow = tree.add(s);
    if (i == 0) {
      EXPECT_EQ(follow, 102) << "the busiest rank is followed";
    }
  }
}

TEST(RankViewsTest, EveryRankIsReadWithItsOwnWorkersForTheWholeRun) {
  ProcessTreeDigest tree(kLauncher, 1);
  two_ranks_one_slow_loader(tree);
  const std::vector<ProcessTreeSummary> views = tree.rank_views();
  ASSERT_EQ(views.size(), 2u);
  for (const ProcessTreeSummary& v : views) {
    EXPECT_EQ(v.workers, 1) << "pid " << v.trainer_pid << ": its own worker, not the other rank's";
    EXPECT_EQ(v.job, "127.0.0.1:29500 rdzv=job");
    EXPECT_EQ(v.world_size, 2);
  }
  EXPECT_EQ(views[0].trainer_rank, 0);
  EXPECT_NEAR(views[0].worker_busy, 0.1, 1e-9);
  EXPECT_EQ(views[1].trainer_rank, 1);
  EXPECT_NEAR(views[1].worker_busy, 0.95, 1e-9);
  EXPECT_NEAR(views[1].main_thread_busy, 0.1, 1e-9) << "a rank not followed: its main thread alone";
  EXPECT_GT(views[0].other_processes_cores, 1.0) << "the other rank and its worker";
}

TEST(RankDigestTest, ASaturatedLoaderOnOneRankIsTheStragglerAndTheOthersWaitInTheCollective) {
  ProcessTreeDigest tree(kLauncher, 1);
  two_ranks_one_slow_loader(tree);
  std::vector<RankObservation> observed;
  for (const ProcessTreeSummary& v : tree.rank_views()) observed.push_back({v, std::nullopt, std::nullopt, "node-a"});
  WatchDiagnosisInput common;
  common.cpus = 4;
  common.utilization.cpu_system_ratio = 0.5;
  std::vector<RankSummary> ranks = summarize_ranks(observed, common);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[1].bottleneck, "cpu_preprocess");
  const JobVerdict v = judge_ranks(ranks);
  EXPECT_EQ(v.pattern, "straggler");
  EXPECT_EQ(v.rule, "loader_straggler");
  ASSERT_TRUE(v.straggler);
  EXPECT_EQ(v.straggler->rank, 1);
  EXPECT_EQ(v.straggler->host, "node-a");
  EXPECT_EQ(v.straggler->bottleneck, "cpu_preprocess");
  ASSERT_TRUE(ranks[0].collective_wait_ratio);
  EXPECT_NEAR(*ranks[0].collective_wait_ratio, 0.9, 1e-9) << "its main thread asleep while rank 1 loads";
  EXPECT_FALSE(ranks[1].collective_wait_ratio) << "the straggler waits for its data, not for the others";
  ASSERT_TRUE(v.recommendation);
  EXPECT_NE(v.recommendation->action.find("rank 1 on node-a"), std::string::npos) << v.recommendation->action;
  EXPECT_FALSE(v.recommendation->predicted_speedup) << "a bound in words, not a prediction";
}

// A DDP rank's CUDA records: 50 steps of 100 ms, each `compute_ms` of its own kernels, then the
// all-reduce's NCCL kernel until the step's 95th ms (it waits there for the slower rank), then
// .item(): a stream sync the host spins in until the step ends.
GpuActivity ddp_rank_records(double compute_ms) {
  constexpr std::int64_t ms = 1'000'000;
  GpuActivity a;
  std::uint32_t corr = 1;
  for (std::int64_t s = 0; s < 50; ++s) {
    const std::int64_t step = 3'600'000 * ms + s * 100 * ms;
    const std::int64_t compute_end = step + static_cast<std::int64_t>(compute_ms * ms);
    a.runtime.push_back({"cudaLaunchKernel", step, step + ms / 100, 1, corr});
    a.kernels.push_back({"sm90_xmma_gemm_bf16bf16_bf16f32", step + ms / 50, compute_end, 0, 7, corr++});
    a.runtime.push_back({"cudaLaunchKernel", step + ms / 20, step + ms / 20 + ms / 100, 1, corr});
    a.kernels.push_back({"ncclDevKernel_AllReduce_Sum_bf16_RING_LL", compute_end, step + 95 * ms, 0, 9, corr++});
    a.runtime.push_back({"cudaStreamSynchronize", step + ms / 10, step + 96 * ms, 1, corr++});
  }
  return a;
}

// A rank's view from outside: its main thread spinning in the sync, no loader workers.
ProcessTreeSummary spinning_rank(int pid, int rank) {
  ProcessTreeSummary t;
  t.trainer_pid = pid;
  t.trainer_name = "python3";
  t.trainer_rank = rank;
  t.main_thread_busy = 0.98;
  t.trainer_cores = 1.0;
  t.ranks = 2;
  t.world_size = 2;
  t.on_gpu = true;
  WatchedProcess p;
  p.pid = pid;
  p.name = "python3";
  p.role = ProcessRole::rank;
  p.rank = rank;
  p.main_thread_busy = 0.98;
  p.last_seen_s = 5;
  t.processes.push_back(p);
  return t;
}

// Each rank with its own gpu-<pid> records: rank 0 runs 20 ms of its own kernels and waits in the
// all-reduce 75 ms of each step; rank 1 runs 90 ms and waits 5. From outside both spin in .item()
// alike; their traces say that rank 1 is GPU-bound and rank 0 waits for it.
TEST(RankDigestTest, EachRankIsDiagnosedWithItsOwnTraceAndTheOneTheOthersWaitForIsTheStraggler) {
  std::vector<RankObservation> observed;
  observed.push_back({spinning_rank(101, 0), std::nullopt, summarize_process_gpu(ddp_rank_records(20)), "node-a"});
  observed.push_back({spinning_rank(102, 1), std::nullopt, summarize_process_gpu(ddp_rank_records(90)), "node-a"});
  WatchDiagnosisInput common;
  common.cpus = 16;
  common.utilization.series["cpu_system_ratio"] = SeriesStats{0.15, 0.15, 0.15};
  std::vector<RankSummary> ranks = summarize_ranks(observed, common);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[1].bottleneck, "gpu_compute") << ranks[1].verdict;
  EXPECT_NE(ranks[0].verdict.find("Waiting for other ranks"), std::string::npos) << ranks[0].verdict;
  ASSERT_TRUE(ranks[0].collective_wait_ratio);
  EXPECT_NEAR(*ranks[0].collective_wait_ratio, 0.75, 0.01);
  EXPECT_NEAR(*ranks[1].collective_wait_ratio, 0.05, 0.01);
  const JobVerdict v = judge_ranks(ranks);
  EXPECT_EQ(v.rule, "collective_straggler");
  EXPECT_EQ(v.pattern, "straggler");
  ASSERT_TRUE(v.straggler);
  EXPECT_EQ(v.straggler->rank, 1);
  EXPECT_EQ(v.straggler->bottleneck, "gpu_compute");
  ASSERT_TRUE(v.recommendation);
  EXPECT_NE(v.recommendation->basis.find("at least 75 %"), std::string::npos) << v.recommendation->basis;
  // The job's diagnosis is the straggler's, read with its own trace.
  const Diagnosis d = diagnose_rank(observed[1], common);
  EXPECT_EQ(d.bottleneck, "gpu_compute");
  EXPECT_NE(std::find(d.rules.begin(), d.rules.end(), "tree_gpu_trace"), d.rules.end());
}

RankSummary spans_rank(int rank, double stall, double step_ms, double period_ms) {
  RankSummary r;
  r.rank = rank;
  r.pid = 1000 + rank;
  r.data_stall_ratio = stall;
  r.step_ms = step_ms;
  r.period_ms = period_ms;
  r.main_thread_busy = 0.3;
  r.bottleneck = stall > 0.2 ? "cpu_preprocess" : "cpu_compute";
  return r;
}

TEST(RankDigestTest, WithSpansTheStepBeyondTheQuickestRanksIsTheWaitInTheCollective) {
  // Rank 3 waits 40 % for data; ranks 0-2 reach the all-reduce first and wait there for it.
  std::vector<RankSummary> ranks = {spans_rank(0, 0.02, 98, 160), spans_rank(1, 0.03, 96, 160),
                                    spans_rank(2, 0.02, 97, 160), spans_rank(3, 0.40, 40, 160)};
  const JobVerdict v = judge_ranks(ranks);
  EXPECT_EQ(v.rule, "stall_straggler");
  ASSERT_TRUE(v.straggler);
  EXPECT_EQ(v.straggler->rank, 3);
  EXPECT_NEAR(*ranks[0].collective_wait_ratio, (98.0 - 40) / 160, 1e-9);
  EXPECT_NEAR(*ranks[3].collective_wait_ratio, 0, 1e-9);
  ASSERT_TRUE(v.recommendation);
  EXPECT_NE(v.recommendation->basis.find("at least 35 %"), std::string::npos) << v.recommendation->basis;
}

TEST(RankDigestTest, RanksThatAllWaitForDataAlikeHaveNoStragglerButAJobVerdict) {
  std::vector<RankSummary> ranks = {spans_rank(0, 0.41, 40, 160), spans_rank(1, 0.38, 42, 160),
                                    spans_rank(2, 0.44, 39, 160)};
  const JobVerdict v = judge_ranks(ranks);
  EXPECT_EQ(v.pattern, "all_input_bound");
  EXPECT_EQ(v.rule, "stall_everywhere");
  EXPECT_FALSE(v.straggler);
  EXPECT_NE(v.verdict.find("every rank"), std::string::npos);
}

TEST(RankDigestTest, RanksThatKeepPaceHaveNoStraggler) {
  std::vector<RankSummary> ranks = {spans_rank(0, 0.02, 150, 160), spans_rank(1, 0.03, 151, 160)};
  const JobVerdict v = judge_ranks(ranks);
  EXPECT_EQ(v.pattern, "keep_pace");
  EXPECT_EQ(v.rule, "keep_pace");
  EXPECT_FALSE(v.straggler);
  std::vector<RankSummary> one = {spans_rank(0, 0.5, 10, 160)};
  EXPECT_EQ(judge_ranks(one).pattern, "one_rank");
  EXPECT_EQ(judge_ranks(one).rule, "one_rank");
}

// Over the run every rank waits alike; window by window one rank stands out, a different one as
// the run goes on: each rank's loader falls behind in turn (its shards, its share of the disk).
TEST(RankDigestTest, AStragglerThatMovesFromRankToRankIsNamedSoFromTheStallTimeline) {
  std::vector<RankSummary> ranks = {spans_rank(0, 0.2, 60, 100), spans_rank(1, 0.2, 60, 100),
                                    spans_rank(2, 0.2, 60, 100)};
  for (RankSummary& r : ranks) r.timeline_bucket_s = 2;
  const auto at = [&](std::size_t rank, std::vector<std::optional<double>> stall) {
    ranks[rank].timeline_data_stall = std::move(stall);
  };
  // Twelve windows: rank 0 holds the others back in 4, rank 1 in 3, rank 2 in 3; two keep pace,
  // and rank 2 streamed no window in the last.
  at(0, {0.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1});
  at(1, {0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.1, 0.1});
  at(2, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.1, std::nullopt});
  JobVerdict v = judge_ranks(ranks);
  EXPECT_EQ(v.pattern, "moving_straggler");
  EXPECT_EQ(v.rule, "moving_straggler");
  EXPECT_FALSE(v.straggler) << "no one rank to name";
  ASSERT_FALSE(v.evidence.empty());
  EXPECT_NE(v.evidence[0].find("in 10 of 11 windows of 2 s"), std::string::npos) << v.evidence[0];
  EXPECT_NE(v.evidence[0].find("rank 0 in 40 %, rank 1 in 30 %, rank 2 in 30 %"), std::string::npos)
      << v.evidence[0];

  // The same rank in most windows is a straggler of the whole run, as the run's figures say.
  at(0, {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0});
  at(1, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0});
  at(2, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0});
  ranks[0].data_stall_ratio = 0.35;
  ranks[1].data_stall_ratio = ranks[2].data_stall_ratio = 0.05;
  v = judge_ranks(ranks);
  EXPECT_EQ(v.pattern, "straggler");
  ASSERT_TRUE(v.straggler);
  EXPECT_EQ(v.straggler->rank, 0);

  // Two ranks taking turns, windows split 7:4 as turns and windows fell: the first leads 64 % of
  // the time, yet over the run both wait alike (CI saw this one called all_input_bound).
  std::vector<RankSummary> two = {spans_rank(0, 0.5, 60, 100), spans_rank(1, 0.5, 60, 100)};
  for (RankSummary& r : two) r.timeline_bucket_s = 1;
  two[0].timeline_data_stall = {0.77, 0.66, 0.02, 0.74, 0.22, 0.40, 0.66, 0.01, 0.88, 0.05, 0.58, 0.52};
  two[1].timeline_data_stall = {0.13, 0.28, 0.80, 0.01, 0.71, 0.36, 0.27, 0.79, 0.02, 0.86, 0.22, 0.28};
  v = judge_ranks(two);
  EXPECT_EQ(v.pattern, "moving_straggler") << v.evidence[0];
  EXPECT_NE(v.evidence[0].find("in 11 of 12 windows of 1 s"), std::string::npos) << v.evidence[0];
  EXPECT_NE(v.evidence[0].find("rank 0 in 64 %, rank 1 in 36 %"), std::string::npos) << v.evidence[0];
  // The same windows where rank 0 also waits 15 points more over the run: it is the straggler.
  two[0].data_stall_ratio = 0.6;
  two[1].data_stall_ratio = 0.45;
  v = judge_ranks(two);
  EXPECT_EQ(v.pattern, "straggler");
  ASSERT_TRUE(v.straggler);
  EXPECT_EQ(v.straggler->rank, 0);

  // Ranks of two machines share no clock: their timelines are not compared window by window.
  at(0, {0.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1});
  at(1, {0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.1, 0.1});
  at(2, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.1, 0.1});
  for (RankSummary& r : ranks) r.data_stall_ratio = 0.2;
  ranks[2].host = "node-b";
  EXPECT_EQ(judge_ranks(ranks).pattern, "all_input_bound");
}

TEST(RankDigestTest, WithoutSpansLoadersSaturatedAlikeOnEveryRankAreTheJobsLimit) {
  std::vector<RankSummary> ranks(3);
  for (int i = 0; i < 3; ++i) {
    ranks[i].rank = i;
    ranks[i].num_workers = 2;
    ranks[i].worker_busy = 0.8 + 0.05 * i;
    ranks[i].worker_run_wait = 0.05;
  }
  const JobVerdict v = judge_ranks(ranks);
  EXPECT_EQ(v.rule, "loaders_saturated");
  EXPECT_EQ(v.pattern, "all_input_bound");
  EXPECT_FALSE(v.straggler);
  EXPECT_NE(v.verdict.find("workers 85-95 % busy"), std::string::npos) << v.verdict;
}

TEST(RankDigestTest, AMainThreadBusierThanTheOthersWithoutSpansIsAComputeStraggler) {
  RankSummary busy, idle;
  busy.rank = 0;
  busy.main_thread_busy = 0.95;
  busy.bottleneck = "cpu_compute";
  idle.rank = 1;
  idle.main_thread_busy = 0.4;
  idle.bottleneck = "cpu_compute";
  std::vector<RankSummary> ranks = {busy, idle};
  const JobVerdict v = judge_ranks(ranks);
  EXPECT_EQ(v.rule, "main_thread_straggler");
  ASSERT_TRUE(v.straggler);
  EXPECT_EQ(v.straggler->rank, 0);
  EXPECT_NEAR(*ranks[1].collective_wait_ratio, 0.6, 1e-9);
}

TEST(ProcFsDistributedEnvTest, TheJobIsNamedByItsMasterAndRendezvous) {
  using namespace std::string_literals;
  const RankIdentity e = parse_distributed_env(
      "RANK=5\0WORLD_SIZE=8\0LOCAL_RANK=1\0GROUP_RANK=2\0MASTER_ADDR=10.0.0.1\0MASTER_PORT=29400\0"
      "TORCHELASTIC_RUN_ID=abc\0"s);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.node_rank, 2);
  EXPECT_EQ(e.job, "10.0.0.1:29400 rdzv=abc");
  EXPECT_EQ(parse_distributed_env("PATH=/bin\0"s).job, "");
}

}  // namespace
}  // namespace feedscope

namespace feedscope {
namespace {

// A reading at `time_ns` of torchrun (kLauncher) and its ranks 0 (pid 101) and 1 (pid 102), each
// at half a core with its main thread as busy, and `more` processes besides.
UtilizationSample launcher_and_two_ranks(std::int64_t time_ns, std::vector<ProcessCpu> more = {}) {
  UtilizationSample s;
  s.time_ns = time_ns;
  s.cpu_core_ratio = {0.5, 0.5};
  ThreadCpu main;
  main.tid = kLauncher;
  main.name = "torchrun";
  s.threads = {main};
  s.children = {rank_process(101, kLauncher, 0, 0.5, 0.5), rank_process(102, kLauncher, 1, 0.5, 0.5)};
  s.children.insert(s.children.end(), more.begin(), more.end());
  return s;
}

// A long job keeps a bounded timeline per rank: buckets double in length, means stay means.
TEST(RankViewsTest, ALongRunsTimelineStaysBoundedAndKeepsItsMeans) {
  ProcessTreeDigest tree(kLauncher, 1);
  for (int i = 0; i <= 6000; ++i)  // 600 s at 10 Hz
    tree.add(launcher_and_two_ranks(i * 100'000'000LL, {rank_process(201, 101, 0, 0.75, 0.75)}));
  const std::vector<ProcessTreeSummary> views = tree.rank_views();
  ASSERT_EQ(views.size(), 2u);
  const ProcessTreeSummary& v = views[0].trainer_pid == 101 ? views[0] : views[1];
  EXPECT_EQ(v.timeline_bucket_s, 4.0);
  EXPECT_LE(v.timeline_workers_cores.size(), kTimelineBuckets);
  EXPECT_GE(v.timeline_workers_cores.size(), 150u);
  for (const double cores : v.timeline_workers_cores) EXPECT_NEAR(cores, 0.75, 1e-9);
  for (const double busy : v.timeline_main_busy) EXPECT_NEAR(busy, 0.5, 1e-9);
}

// The live per-rank GPU figures: NVML's per-process share for a rank it listed, held between the
// driver's windows; none for a rank it did not list.
TEST(RankViewsTest, ARanksLiveGpuShareIsNvmlsPerProcessReading) {
  ProcessTreeDigest tree(kLauncher, 1);
  for (int i = 0; i <= 4; ++i) {
    UtilizationSample s = launcher_and_two_ranks(i * 100'000'000LL);
    GpuSample g;
    g.sm_window_begin_us = 0;
    g.sm_window_end_us = i < 3 ? 1000 : 2000;  // a new window at the first and the fourth reading
    g.processes = {GpuProcessSample{101, 1ULL << 30, i < 3 ? 0.6 : 0.8}};
    s.gpus = {g};
    tree.add(s);
    for (const RankReading& r : tree.latest_ranks()) {
      if (r.pid == 102) {
        EXPECT_FALSE(r.gpu_sm_util) << "NVML did not list it: not measured";
        EXPECT_FALSE(r.gpu_memory_bytes);
        continue;
      }
      if (i == 0) continue;  // a rank's first reading is its baseline
      EXPECT_EQ(r.gpu_memory_bytes, 1ULL << 30);
      ASSERT_TRUE(r.gpu_sm_util) << "reading " << i;
      EXPECT_DOUBLE_EQ(*r.gpu_sm_util, i < 3 ? 0.6 : 0.8) << "reading " << i;
    }
  }
}

// A rank's Session hands a window about once a second: its stall lands in the bucket it ended in,
// a window read twice counts once, and a bucket without one is not a zero.
TEST(RankViewsTest, ARanksLiveWindowsMakeItsDataStallOverTime) {
  ProcessTreeDigest tree(kLauncher, 1);
  for (int i = 0; i <= 40; ++i)  // 4 s at 10 Hz
    tree.add(launcher_and_two_ranks(1'000'000'000LL + i * 100'000'000LL));
  tree.add_live_window(101, 500'000'000LL, 1.0, 0.9);     // before the first reading: nothing
  tree.add_live_window(101, 1'500'000'000LL, 1.0, 0.4);   // bucket 0
  tree.add_live_window(101, 1'500'000'000LL, 1.0, 0.4);   // the same window, read again
  tree.add_live_window(101, 3'600'000'000LL, 1.0, 0.1);   // bucket 2
  tree.add_live_window(101, 3'900'000'000LL, 1.0, 0.3);   // bucket 2 too
  for (const ProcessTreeSummary& v : tree.rank_views()) {
    if (v.trainer_pid == 102) {
      EXPECT_TRUE(v.timeline_data_stall.empty()) << "no Session, no stall timeline";
      continue;
    }
    ASSERT_GE(v.timeline_data_stall.size(), 4u);
    EXPECT_NEAR(v.timeline_data_stall[0].value_or(-1), 0.4, 1e-9);
    EXPECT_FALSE(v.timeline_data_stall[1]) << "no window ended in it: not measured";
    EXPECT_NEAR(v.timeline_data_stall[2].value_or(-1), 0.2, 1e-9);
  }
}

// A reading of process `sampled` (its main thread at `main_busy`) with `children`.
UtilizationSample started_reading(int i, int sampled, const std::string& name, double main_busy,
                                  std::vector<ProcessCpu> children) {
  UtilizationSample s;
  s.pid = sampled;
  s.time_ns = i * 100'000'000LL;
  s.cpu_core_ratio = {0.5, 0.5};
  s.cpu_system_ratio = 0.5;
  s.cpu_process_ratio = main_busy / 2;
  s.rss_bytes = 1 << 20;
  ThreadCpu main;
  main.tid = sampled;
  main.name = name;
  main.ratio = main_busy;
  s.threads = {main};
  s.children = std::move(children);
  return s;
}

// `srun -n 2 feedscope watch -- python3 train.py`: the process watch started is rank 1 (srun's
// variables, inherited by its forked loader worker, which is no rank of its own).
TEST(LauncherRanksTest, TheProcessASrunTasksWatchStartedIsTheRank) {
  constexpr int kStarted = 300;
  RankIdentity srun_task;
  srun_task.rank = 1;
  srun_task.world_size = 2;
  srun_task.local_rank = 1;
  srun_task.node_rank = 0;
  srun_task.source = "slurm";
  srun_task.job = "127.0.0.1:29500 slurm=7.0";
  ProcessTreeDigest tree(kStarted, 1, srun_task);
  for (int i = 0; i <= 10; ++i) {
    ProcessCpu worker = rank_process(301, kStarted, 1, 0.9, std::nullopt);
    worker.rank_source = "slurm";
    worker.job = srun_task.job;
    worker.master_env = true;
    EXPECT_EQ(tree.add(started_reading(i, kStarted, "python3", 0.2, {worker})), 0) << "nothing to follow";
  }
  const std::vector<ProcessTreeSummary> views = tree.rank_views();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].trainer_pid, kStarted);
  EXPECT_EQ(views[0].trainer_rank, 1);
  EXPECT_EQ(views[0].world_size, 2);
  EXPECT_EQ(views[0].job, "127.0.0.1:29500 slurm=7.0");
  EXPECT_EQ(views[0].workers, 1) << "its forked worker carries its variables and is its loader worker";
  const ProcessTreeSummary summary = tree.summary();
  EXPECT_EQ(summary.ranks, 1);
  WatchDiagnosisInput common;
  common.cpus = 2;
  const std::vector<RankSummary> ranks = summarize_ranks({{views[0], std::nullopt, std::nullopt, "node-a"}}, common);
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].rank, 1);
  EXPECT_EQ(ranks[0].local_rank, 1);
  EXPECT_EQ(ranks[0].rank_source, "slurm");
}

// `srun -N 2 feedscope watch -- torchrun --nproc_per_node 2 ...`: torchrun carries srun's task
// number 0; its children torch's ranks 0 and 1. torchrun is their launcher, both are ranks (rank
// 0 too, though its number is torchrun's), and the launchers' disagreement is said.
TEST(LauncherRanksTest, ATorchrunThatSrunStartedIsTheLauncherOfItsRanks) {
  constexpr int kStarted = 400;
  RankIdentity srun_task;
  srun_task.rank = 0;
  srun_task.world_size = 2;
  srun_task.source = "slurm";
  srun_task.job = "slurm=7.0";
  ProcessTreeDigest tree(kStarted, 1, srun_task);
  int followed = 0;
  for (int i = 0; i <= 10; ++i) {
    std::vector<ProcessCpu> children;
    for (const int rank : {0, 1}) {
      ProcessCpu r = rank_process(401 + rank, kStarted, rank, 0.3 + 0.1 * rank, 0.3);
      r.rank_source = "torch";
      r.world_size = 4;
      r.job = "127.0.0.1:29500 rdzv=x slurm=7.0";
      r.rank_notes = {"SLURM_PROCID=0 of SLURM_STEP_NUM_TASKS=2 names another rank than RANK=" +
                      std::to_string(rank) + " of WORLD_SIZE=4, which is used: ..."};
      children.push_back(r);
    }
    const int next = tree.add(started_reading(i, followed ? followed : kStarted, "python3", 0.05, children));
    if (next) followed = next;
  }
  EXPECT_EQ(followed, 402) << "the busiest rank is followed, as under torchrun watched alone";
  const std::vector<ProcessTreeSummary> views = tree.rank_views();
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].trainer_rank, 0);
  EXPECT_EQ(views[1].trainer_rank, 1);
  EXPECT_EQ(views[0].world_size, 4);
  const ProcessTreeSummary summary = tree.summary();
  for (const WatchedProcess& p : summary.processes) {
    if (p.pid == kStarted) {
      EXPECT_EQ(p.role, ProcessRole::launcher);
    }
  }
  ASSERT_EQ(summary.rank_notes.size(), 2u);
  EXPECT_EQ(summary.rank_notes[0].rfind("rank 0 (pid 401): SLURM_PROCID=0", 0), 0u) << summary.rank_notes[0];
}

// A watch of torchrun on the job's second machine (ranks 2 and 3): before the ranks start there is
// no rank, rather than torchrun standing in as a rank 0 that the job does not have there.
TEST(LauncherRanksTest, ALauncherOfRanksStandsInForNoRank) {
  for (const bool launcher : {false, true}) {
    ProcessTreeDigest tree(kLauncher, 1);
    if (launcher) tree.launches_ranks();
    for (int i = 0; i <= 2; ++i) tree.add(started_reading(i, kLauncher, "python3", 0.3, {}));
    const std::vector<RankReading> ranks = tree.latest_ranks();
    if (launcher) {
      EXPECT_TRUE(ranks.empty());
    } else {
      ASSERT_EQ(ranks.size(), 1u) << "a program that is no job is rank 0 of the live series";
      EXPECT_EQ(ranks[0].rank, 0);
    }
  }
}

}  // namespace
}  // namespace feedscope
