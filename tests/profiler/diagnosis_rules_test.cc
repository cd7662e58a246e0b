// The diagnosis as a list of named rules: each rule fires on a case made for it, a rule whose
// evidence is absent is not asked, one bottleneck rule decides, and docs/diagnosis.md names every
// rule in the registry's order with its stage and what it needs.
#include "profiler/rules/rule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "profiler/diagnosis.h"
#include "profiler/rank_digest.h"
#include "profiler/rules/facts.h"
#include "profiler/rules/rules.h"
#include "profiler/slow_samples.h"
#include "profiler/watch_diagnosis.h"
#include "tests/support/diagnosis_scenarios.h"

namespace feedscope {
namespace {

struct DocumentedRule {
  std::string name, stage, needs;
};

// The rows of the rule table in docs/diagnosis.md's `section`:
// "| `name` | stage | needs | what it finds |".
std::vector<DocumentedRule> documented_rules(const std::string& section) {
  std::ifstream in(std::string(FEEDSCOPE_SOURCE_DIR) + "/docs/diagnosis.md");
  std::vector<DocumentedRule> rows;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == section;
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::size_t at = 1;
    for (std::size_t bar; (bar = line.find(" | ", at)) != std::string::npos; at = bar + 3)
      cells.push_back(line.substr(at, bar - at));
    if (cells.size() < 3) continue;
    for (std::string& c : cells) c.erase(0, c.find_first_not_of(' '));
    rows.push_back({cells[0].substr(1, cells[0].size() - 2), cells[1], cells[2]});
  }
  return rows;
}

TEST(DiagnosisRulesTest, TheDocsNameEveryRuleInItsOrderWithItsStageAndNeeds) {
  const std::vector<DocumentedRule> docs = documented_rules("## The rules");
  const std::vector<Rule>& rules = diagnosis_rules();
  ASSERT_FALSE(docs.empty()) << "docs/diagnosis.md has no rule table under '## The rules'";
  for (std::size_t i = 0; i < std::max(docs.size(), rules.size()); ++i) {
    ASSERT_LT(i, docs.size()) << "rule " << rules[i].name << " is not in docs/diagnosis.md";
    ASSERT_LT(i, rules.size()) << docs[i].name << " is in docs/diagnosis.md but not a rule";
    EXPECT_EQ(docs[i].name, rules[i].name) << "row " << i + 1 << " of the table";
    EXPECT_EQ(docs[i].stage, to_string(rules[i].stage)) << rules[i].name;
    EXPECT_EQ(docs[i].needs, needs_text(rules[i].needs)) << rules[i].name;
  }
}

TEST(DiagnosisRulesTest, TheDocsNameEveryJobRuleInItsOrder) {
  const std::vector<DocumentedRule> docs = documented_rules("## The job's rules");
  const std::vector<JobRule>& rules = job_rules();
  ASSERT_EQ(docs.size(), rules.size()) << "docs/diagnosis.md's job table against job_rules()";
  for (std::size_t i = 0; i < rules.size(); ++i) {
    EXPECT_EQ(docs[i].name, rules[i].name) << "row " << i + 1 << " of the job table";
    EXPECT_EQ(docs[i].stage, "job") << rules[i].name;
    EXPECT_EQ(docs[i].needs, to_string(rules[i].needs)) << rules[i].name;
  }
}

TEST(DiagnosisRulesTest, NamesAreUniqueAndTheLastRuleWeighsAllAdvice) {
  const std::vector<Rule>& rules = diagnosis_rules();
  for (std::size_t i = 0; i < rules.size(); ++i)
    for (std::size_t j = i + 1; j < rules.size(); ++j) EXPECT_NE(rules[i].name, rules[j].name);
  EXPECT_EQ(rules.back().name, "drop_unhelpful");
}

// ---- a case for every rule ----

GpuTraceSummary gpu_steps(std::int64_t steps, double busy) {
  GpuTraceSummary g;
  g.steps = steps;
  g.kernels = steps * 40;
  g.kernels_per_step = 40;
  g.mean_kernel_us = 5;
  g.gpu_busy_ratio = busy;
  return g;
}

Evidence launch_bound_with_syncs() {
  DiagnosisInput in = scenario(0.105, 100, 0.0, 0.0002, 0.00001, 0.001, 2, 8, true);
  in.gpu_trace = gpu_steps(100, 0.2);
  in.gpu_trace->syncs = 100;
  in.gpu_trace->syncs_per_step = 1;
  in.gpu_trace->sync_wait_s = 0.03;
  in.gpu_trace->gpu_busy_s = 0.02;
  return evidence_of(in);
}

Evidence watched(const WatchDiagnosisInput& in) { return evidence_of(in); }

// A GPU-bound loop (49 ms steps of 50 ms a batch) whose GPU runs NCCL alone half of each step.
Evidence rank_waiting_in_all_reduce() {
  DiagnosisInput in = scenario(5.0, 100, 0, 0.002, 0.0005, 0.049, 2, 8, true);
  in.gpu_trace = gpu_steps(100, 0.95);
  in.gpu_trace->step_wall_s = 4.9;
  in.gpu_trace->collective_s = 2.94;
  in.gpu_trace->collective_share = 0.6;
  in.gpu_trace->collective_alone_share = 0.5;
  return evidence_of(in);
}

// A step split over two GPUs that take turns: together busy 95 %, each about half.
Evidence devices_taking_turns() {
  DiagnosisInput in = scenario(5.0, 100, 0, 0.002, 0.0005, 0.049, 2, 8, true);
  in.gpu_trace = gpu_steps(100, 0.95);
  in.gpu_trace->step_wall_s = 4.9;
  in.gpu_trace->devices = {{0, 2000, 2.4, 0.49}, {1, 2000, 2.3, 0.47}};
  return evidence_of(in);
}

// An idle GPU whose step is one CUDA graph replay: one cheap launch call a step.
Evidence graphed_loop_idle_gpu() {
  DiagnosisInput in = scenario(0.105, 100, 0.0, 0.0002, 0.00001, 0.001, 2, 8, true);
  in.gpu_trace = gpu_steps(100, 0.2);
  in.gpu_trace->step_wall_s = 0.1;
  in.gpu_trace->gpu_busy_s = 0.02;
  in.gpu_trace->graph_kernels = in.gpu_trace->kernels;
  in.gpu_trace->graphs = 1;
  in.gpu_trace->graph_replays = 100;
  in.gpu_trace->launch_calls = 100;
  in.gpu_trace->mean_launch_call_us = 5;
  return evidence_of(in);
}

// `.to(device)` twice a step: each copy followed by a stream sync on the training thread.
Evidence blocking_copies() {
  DiagnosisInput in = scenario(0.105, 100, 0.0, 0.0002, 0.00001, 0.001, 2, 8, true);
  in.gpu_trace = gpu_steps(100, 0.2);
  in.gpu_trace->syncs = 200;
  in.gpu_trace->syncs_per_step = 2;
  in.gpu_trace->sync_wait_s = 0.03;
  in.gpu_trace->syncs_after_h2d = 200;
  in.gpu_trace->sync_after_h2d_wait_s = 0.03;
  in.gpu_trace->gpu_busy_s = 0.02;
  return evidence_of(in);
}

// The training thread copies from pageable memory 73 % of the run, but the GPU works 15 ms of
// every 15.6 ms batch.
Evidence copy_beside_a_busy_gpu() {
  DiagnosisInput in = scenario(1.56, 100, 0.0, 0.0, 0.0001, 0.0041, 8, 16, true);
  in.h2d_submit_s = 100 * 0.0114;
  in.gpu_trace = gpu_steps(100, 0.95);
  in.gpu_trace->device_s_per_step = 0.015;
  in.gpu_trace->h2d_pageable_bytes = 100 * 12'000'000;
  return evidence_of(in);
}

// Compiled nanoGPT's shape on an H200: the training thread works 70 % of a core, the GPU is busy
// 8 % and idle between its Triton kernels 90 % of the time; `graphs`: its kernels come from CUDA
// graph replays (mode="reduce-overhead" already).
WatchDiagnosisInput host_dispatching(bool graphs) {
  WatchDiagnosisInput in = tree_input(0.7, 1, 0.27, 0.11);
  in.gpu_trace = gpu_steps(1, 0.08);
  in.gpu_trace->step_wall_s = 2.0;
  in.gpu_trace->gap_share = 0.9;
  in.gpu_trace->triton_kernels = in.gpu_trace->kernels;
  if (graphs) in.gpu_trace->graph_kernels = in.gpu_trace->kernels;
  return in;
}

// A watched program with no workers, its training thread pinned, no data file open, no reads.
WatchDiagnosisInput in_memory_program() {
  WatchDiagnosisInput in = tree_input(0.98, 0, 0, 0.2);
  in.data_files_seen = 0;
  return in;
}

// Nothing busy, cores idle, and the program's own MetricLogger lines say its loop waits for data.
// `looks` at the training thread, `on_queue` of them blocked on its workers' queue.
WatchDiagnosisInput with_queue_looks(WatchDiagnosisInput in, std::size_t looks, std::size_t on_queue) {
  MainThreadWaits w;
  w.looks = looks;
  w.loader_queue = on_queue;
  w.running = looks - on_queue;
  in.tree.main_thread_waits = w;
  return in;
}

WatchDiagnosisInput idle_tree_waiting_for_data() {
  WatchDiagnosisInput in = tree_input(0.2, 2, 0.1, 0.1);
  in.printed = PrintedDataWait{12, 10, 10.0, 4.6, 0.46, "MetricLogger `time: ... data: ...`"};
  return in;
}

// Three image folders' per-sample costs, set rather than timed: 2000 files of a uniform folder
// (3 ms each, within 10 %), a photo folder of mixed but ordinary sizes (0.3 to 3x the median's
// pixels, 1 % of phone photos at 5x), and the uniform folder with 2 % of its files at 8000x6000
// (60x the median's cost).
enum class Folder { uniform, mixed, skewed };

SampleCosts folder_costs(Folder folder) {
  constexpr std::int64_t kMedianNs = 3'000'000;
  SampleCostRecorder recorder(2);
  for (std::size_t i = 0; i < 2000; ++i) {
    double factor = 1.0 + 0.1 * (static_cast<double>((i * 37) % 11) - 5) / 5;
    if (folder == Folder::mixed) factor = i % 100 == 3 ? 5.0 : std::pow(10.0, -0.5 + static_cast<double>((i * 7919) % 1000) / 1000);
    if (folder == Folder::skewed && i % 50 == 49) factor = 60;
    recorder.record(static_cast<int>(i % 2), i, static_cast<std::int64_t>(factor * kMedianNs));
  }
  SampleCostSnapshot snapshot = recorder.snapshot();
  for (SlowSampleCost& slow : snapshot.slowest) {
    slow.file = {"/data/photos/class_0001/img_" + std::to_string(slow.index) + ".jpg", 500'000, 500, 375, "jpeg"};
    if (folder == Folder::skewed && slow.ns > 10 * kMedianNs) slow.file = {slow.file.file, 9'800'000, 8000, 6000, "jpeg"};
  }
  snapshot.wait_ns = 2'000'000'000;
  snapshot.wait_on_slowest_ns = folder == Folder::skewed ? 1'500'000'000 : 40'000'000;
  return sample_costs_of(snapshot, "feedscope's loader", 224);
}

// Input-bound on 4 cores with one worker: loading a batch takes 50 ms of one core, the step 10 ms.
DiagnosisInput loading_folder(Folder folder) {
  DiagnosisInput in = scenario(3.0, 100, 0.001, 0.029, 0.020, 0.010, 1, 4, false);
  in.stages[static_cast<std::size_t>(Stage::transform)] = {"transform", 100, 2.0, 20.0, 20.0, 21.0, 0, 1};
  in.samples = folder_costs(folder);
  return in;
}

// A watched program with two loader workers read by smaps_rollup over 20 s: each worker's private
// memory growing `worker_mib_s` as its shared falls as fast, and the trainer's `trainer_mib_s`;
// `one_worker`: only the first worker grows, and its shared memory stays.
WatchDiagnosisInput memory_input(double worker_mib_s, double trainer_mib_s,
                                 std::uint64_t available = 8ull << 30, bool one_worker = false) {
  constexpr double kMiB = 1 << 20;
  WatchDiagnosisInput in = tree_input(0.3, 2, 0.5, 0.3);
  TreeMemory m;
  m.rollup_readings = 40;
  m.rollup_period_s = 0.5;
  m.available_last_bytes = m.available_min_bytes = available;
  m.bucket_s = 10;
  m.workers_private_bytes = {40 * kMiB, (40 + 2 * worker_mib_s * 20) * kMiB};
  m.workers_private_peak_bytes = static_cast<std::uint64_t>(m.workers_private_bytes.back());
  in.tree.memory = m;
  const auto process = [&](int pid, ProcessRole role, double mib_s, double shared_mib_s) {
    WatchedProcess p;
    p.pid = pid;
    p.ppid = pid == 100 ? 1 : 100;
    p.name = "python3";
    p.role = role;
    MemoryTrend t;
    t.private_bytes = static_cast<std::uint64_t>((role == ProcessRole::trainer ? 640 : 20 + mib_s * 20) * kMiB);
    t.private_peak_bytes = t.private_bytes;
    t.readings = 40;
    t.window_s = 13;
    t.private_bytes_per_s = mib_s * kMiB;
    t.shared_bytes_per_s = shared_mib_s * kMiB;
    t.steady = mib_s > 0;
    p.memory = t;
    in.tree.processes.push_back(p);
  };
  process(100, ProcessRole::trainer, trainer_mib_s, 0);
  process(101, ProcessRole::loader_worker, worker_mib_s, one_worker ? 0 : -worker_mib_s);
  process(102, ProcessRole::loader_worker, one_worker ? 0 : worker_mib_s, one_worker ? 0 : -worker_mib_s);
  return in;
}

struct RuleCase {
  const char* rule;
  std::function<Evidence()> evidence;
};

std::vector<RuleCase> rule_cases() {
  return {
      {"ended_before_measuring",
       [] {
         WatchDiagnosisInput in = tree_input(0.98, 0, 0, 0.5);
         in.ended = "failed";
         in.exit = "exit code 2";
         in.wall_s = 0.4;
         return watched(in);
       }},
      {"loop_data_stall", [] { return evidence_of(scenario(5.0, 100, 0, 0.002, 0.0005, 0.049, 2, 2, false)); }},
      {"printed_data_stall",
       [] {
         WatchDiagnosisInput in = tree_input(0.3, 2, 0.9, 0.5);
         in.printed = PrintedDataWait{11, 10, 2.0, 0.9, 0.45};
         return watched(in);
       }},
      {"copy_on_training_thread",
       [] {
         DiagnosisInput in = scenario(1.56, 100, 0.0, 0.0, 0.0001, 0.0041, 8, 16, true);
         in.h2d_submit_s = 100 * 0.0114;
         return evidence_of(in);
       }},
      {"input_copy",
       [] {
         DiagnosisInput in = scenario(1.5, 100, 0.0, 0.0, 0.011, 0.004, 8, 16, true);
         in.stages[static_cast<std::size_t>(Stage::collate)] = {"collate", 100, 1.3, 13.0, 13.0, 14.0, 0, 8};
         in.stages[static_cast<std::size_t>(Stage::h2d)] = {"h2d", 100, 1.1, 11.0, 11.0, 12.0, 0, 1};
         return evidence_of(in);
       }},
      {"input_storage",
       [] {
         DiagnosisInput in = scenario(4.0, 100, 0.030, 0.005, 0.025, 0.015, 2, 8, true);
         in.utilization.cpu_process_ratio = 0.15;
         return evidence_of(in);
       }},
      {"input_crowded_out",
       [] {
         DiagnosisInput in = scenario(3.0, 100, 0.001, 0.029, 0.020, 0.010, 1, 2, false);
         in.utilization.cpu_system_ratio = 0.98;
         in.utilization.series["cpu_other_threads_cores"] = SeriesStats{0.9, 0.9, 1.0};
         in.utilization.threads["worker 0"] = 0.55;
         in.utilization.threads["training"] = 0.4;
         return evidence_of(in);
       }},
      {"input_handoff", [] { return evidence_of(scenario(0.0235, 100, 0.0, 0.000005, 0.00003, 0.0002, 1, 2, false)); }},
      {"input_preprocess", [] { return evidence_of(scenario(3.0, 100, 0.001, 0.029, 0.020, 0.010, 1, 4, true)); }},
      {"gpu_copy",
       [] {
         DiagnosisInput in = scenario(2.0, 10, 0.0, 0.002, 0.0, 0.200, 2, 8, true);
         in.gpu_trace = gpu_steps(10, 0.9);
         in.gpu_trace->h2d_share = 0.8;
         in.gpu_trace->h2d_pageable_bytes = 4'000'000'000;
         return evidence_of(in);
       }},
      {"gpu_collective_wait", rank_waiting_in_all_reduce},
      {"gpu_devices_take_turns", devices_taking_turns},
      {"gpu_host_between_launches", graphed_loop_idle_gpu},
      {"gpu_launch_bound", launch_bound_with_syncs},
      {"step_limit", [] { return evidence_of(scenario(5.0, 100, 0.0, 0.002, 0.0005, 0.049, 2, 2, false)); }},
      {"tree_storage", [] { return watched(tree_input(0.2, 4, 0.3, 0.2, 0.6, 180)); }},
      {"tree_gpu_trace",
       [] {
         WatchDiagnosisInput in = tree_input(0.97, 0, 0, 0.2);
         in.gpu_trace = gpu_steps(1, 0.12);
         in.gpu_trace->step_wall_s = 2.0;
         return watched(in);
       }},
      {"tree_gpu_host_dispatch", [] { return watched(host_dispatching(false)); }},
      {"tree_gpu_collective_wait",
       [] {
         WatchDiagnosisInput in = tree_input(0.5, 0, 0, 0.2);
         in.gpu_trace = gpu_steps(1, 0.95);
         in.gpu_trace->step_wall_s = 2.0;
         in.gpu_trace->collective_share = 0.7;
         in.gpu_trace->collective_alone_share = 0.6;
         return watched(in);
       }},
      {"tree_gpu_nvml",
       [] {
         WatchDiagnosisInput in = tree_input(0.97, 0, 0, 0.2);
         in.tree.trainer_gpu_sm_util = 0.9;
         return watched(in);
       }},
      {"tree_worker_churn",
       [] {
         WatchDiagnosisInput in = tree_input(0.3, 4, 0.3, 0.3);
         in.tree.worker_churn = WorkerChurn{5, 20, 0.05, 5.95, 0.4, 1.6, 4, 0.0, 2.0, 300};
         return watched(in);
       }},
      {"tree_workers_saturated", [] { return watched(tree_input(0.3, 8, 0.95, 0.98)); }},
      {"tree_data_in_memory", [] { return watched(in_memory_program()); }},
      {"tree_one_thread", [] { return watched(tree_input(0.98, 0, 0, 0.2)); }},
      {"tree_step_bound", [] { return watched(tree_input(0.98, 2, 0.2, 0.4)); }},
      {"tree_cores_full", [] { return watched(tree_input(0.5, 2, 0.6, 0.97)); }},
      {"queue_data_stall", [] { return watched(with_queue_looks(tree_input(0.3, 2, 0.9, 0.5), 500, 200)); }},
      {"tree_queue_data_wait",
       [] { return watched(with_queue_looks(tree_input(0.2, 2, 0.1, 0.1), 500, 300)); }},
      {"tree_printed_data_wait", [] { return watched(idle_tree_waiting_for_data()); }},
      {"tree_no_clear_limit", [] { return watched(tree_input(0.2, 2, 0.1, 0.1)); }},
      {"tree_processes", [] { return watched(tree_input(0.2, 2, 0.1, 0.1)); }},
      {"tree_idle_workers",
       [] {
         WatchDiagnosisInput in = tree_input(0.9, 16, 0.05, 0.6);
         in.cpus = 2;
         return watched(in);
       }},
      {"tree_core_waits",
       [] {
         WatchDiagnosisInput in = tree_input(0.5, 2, 0.6, 0.97);
         in.tree.main_thread_run_wait = 0.2;
         return watched(in);
       }},
      {"gpu_trace_evidence", launch_bound_with_syncs},
      {"copy_beside_gpu_limit", copy_beside_a_busy_gpu},
      {"memory_copy_on_access", [] { return watched(memory_input(8, 0)); }},
      {"memory_leak_one_process", [] { return watched(memory_input(0, 6)); }},
      {"memory_workers_exceed_headroom", [] { return watched(memory_input(8, 0, 512ull << 20)); }},
      {"blocking_input_copy", blocking_copies},
      {"remove_host_syncs", launch_bound_with_syncs},
      {"slow_samples", [] { return evidence_of(loading_folder(Folder::skewed)); }},
      {"autotune_tried",
       [] {
         DiagnosisInput in = scenario(3.0, 100, 0.001, 0.029, 0.020, 0.010, 1, 4, false);
         in.autotune = AutotuneSummary{};
         return evidence_of(in);
       }},
      {"drop_unhelpful",
       [] {
         // Input-bound (20 %), yet a second worker would give 1.02x: the step is nearly the pace.
         return evidence_of(scenario(1.02, 100, 0.0, 0.0105, 0.002, 0.010, 1, 2, true));
       }},
  };
}

bool fired(const Diagnosis& d, std::string_view rule) {
  return std::find(d.rules.begin(), d.rules.end(), rule) != d.rules.end();
}

// The host sets the pace: CUDA graphs advised where the kernels are not graphed, predicted from
// the thread's time not working (30 %) and never past the GPU's busy share (1 / 0.08); a larger
// batch, without a number, where they come from graph replays already.
TEST(DiagnosisRulesTest, AHostDispatchingBesideAnIdleGpuIsToldToCaptureCudaGraphs) {
  const Diagnosis d = diagnose(watched(host_dispatching(false)));
  EXPECT_EQ(d.bottleneck, "launch_overhead");
  EXPECT_NE(d.verdict.find("Host-bound"), std::string::npos) << d.verdict;
  EXPECT_NE(d.verdict.find("Inductor"), std::string::npos) << d.verdict;
  ASSERT_FALSE(d.recommendations.empty());
  const Recommendation& r = d.recommendations.front();
  EXPECT_EQ(r.setting, "torch.compile(mode=\"reduce-overhead\")");
  ASSERT_TRUE(r.predicted_speedup);
  EXPECT_NEAR(*r.predicted_speedup, 1 / 0.3, 1e-9);
  EXPECT_LE(*r.predicted_speedup, 1 / 0.08);
  EXPECT_NE(r.basis.find("at most 12.50x"), std::string::npos) << r.basis;

  const Diagnosis graphed = diagnose(watched(host_dispatching(true)));
  EXPECT_EQ(graphed.bottleneck, "cpu_compute");
  ASSERT_FALSE(graphed.recommendations.empty());
  EXPECT_EQ(graphed.recommendations.front().setting, "batch_size");
  EXPECT_FALSE(graphed.recommendations.front().predicted_speedup);

  // A loop that waits for its data is not the host's dispatch.
  WatchDiagnosisInput waiting = host_dispatching(false);
  waiting.printed = PrintedDataWait{12, 10, 10.0, 4.6, 0.46};
  EXPECT_FALSE(fired(diagnose(watched(waiting)), "tree_gpu_host_dispatch"));
}

TEST(DiagnosisRulesTest, EveryRuleHasACaseInItsOwnName) {
  const std::vector<RuleCase> cases = rule_cases();
  for (const Rule& rule : diagnosis_rules())
    EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [&](const RuleCase& c) { return c.rule == rule.name; }))
        << "rule " << rule.name << " has no case in rule_cases()";
}

TEST(DiagnosisRulesTest, EachRuleFiresOnItsCaseAndABottleneckRuleAloneDecides) {
  for (const RuleCase& c : rule_cases()) {
    const Diagnosis d = diagnose(c.evidence());
    EXPECT_TRUE(fired(d, c.rule)) << c.rule << " did not fire; fired: " << ::testing::PrintToString(d.rules);
    int bottlenecks = 0, gates = 0;
    for (const Rule& rule : diagnosis_rules()) {
      if (!fired(d, rule.name)) continue;
      bottlenecks += rule.stage == RuleStage::bottleneck;
      gates += rule.stage == RuleStage::gate;
    }
    EXPECT_EQ(bottlenecks + gates, 1) << c.rule << ": " << ::testing::PrintToString(d.rules);
  }
}

TEST(DiagnosisRulesTest, ARuleWhoseEvidenceIsAbsentIsNotAsked) {
  const Diagnosis from_outside = diagnose(watched(tree_input(0.98, 2, 0.2, 0.4)));
  const Diagnosis loop = diagnose(evidence_of(scenario(5.0, 100, 0, 0.002, 0.0005, 0.049, 2, 2, false)));
  for (const Rule& rule : diagnosis_rules()) {
    if (rule.needs & kNeedsLoop) {
      EXPECT_FALSE(fired(from_outside, rule.name)) << rule.name;
    }
    if (rule.needs & (kNeedsTree | kNeedsGpuTrace | kNeedsEnd | kNeedsAutotune | kNeedsPrinted)) {
      EXPECT_FALSE(fired(loop, rule.name)) << rule.name;
    }
  }
  EXPECT_EQ(from_outside.input_bound, "unknown") << "no wait spans: the stall is not measured";
  EXPECT_TRUE(from_outside.data_stall_source.empty());
}

// A program with a Session sent spans: the loop's rules decide, and the tree's evidence stands
// beside them; the outside rules are not asked.
TEST(DiagnosisRulesTest, SpansFromInsideDecideAndTheTreeAddsItsEvidence) {
  WatchDiagnosisInput in = tree_input(0.3, 1, 0.95, 0.5);
  in.spans = scenario(3.0, 100, 0.001, 0.029, 0.020, 0.010, 1, 4, false);
  const Diagnosis d = diagnose(watched(in));
  EXPECT_TRUE(fired(d, "input_preprocess")) << ::testing::PrintToString(d.rules);
  EXPECT_TRUE(fired(d, "tree_processes"));
  EXPECT_FALSE(fired(d, "tree_workers_saturated"));
  EXPECT_FALSE(fired(d, "tree_core_waits"));
}

// ImageNet-style `Time ... Data ...` lines measure a watched program's stall where no span did;
// a Session's wait spans measure it better, and its lines are then not read.
TEST(DiagnosisRulesTest, TheProgramsOwnLinesMeasureTheStallOnlyWithoutSpans) {
  WatchDiagnosisInput in = tree_input(0.3, 2, 0.9, 0.5);
  in.printed = PrintedDataWait{11, 10, 2.0, 0.9, 0.45};
  const Diagnosis d = diagnose(watched(in));
  EXPECT_NEAR(d.data_stall_ratio, 0.45, 1e-12);
  EXPECT_EQ(d.input_bound, "highly");
  EXPECT_NE(d.data_stall_source.find("Time ... Data"), std::string::npos);
  ASSERT_FALSE(d.evidence.empty());
  EXPECT_EQ(d.evidence.front().rfind("the program's own lines: waiting for data 0.900 s of 2.000 s", 0), 0u)
      << d.evidence.front();
  in.printed->share.reset();  // lines read, none counted
  EXPECT_FALSE(fired(diagnose(watched(in)), "printed_data_stall"));
  in.printed->share = 0.45;
  in.spans = scenario(3.0, 100, 0.001, 0.029, 0.020, 0.010, 1, 4, false);
  const Diagnosis spans = diagnose(watched(in));
  EXPECT_FALSE(fired(spans, "printed_data_stall"));
  EXPECT_EQ(spans.data_stall_source, "wait spans");
}

// Where the tree names no limit, the program's own `data:` column decides: the loop waits for data.
TEST(DiagnosisRulesTest, TheProgramsOwnDataColumnDecidesWhereTheTreeNamesNoLimit) {
  WatchDiagnosisInput in = idle_tree_waiting_for_data();
  const Diagnosis d = diagnose(watched(in));
  EXPECT_TRUE(fired(d, "printed_data_stall"));
  EXPECT_TRUE(fired(d, "tree_printed_data_wait")) << ::testing::PrintToString(d.rules);
  EXPECT_FALSE(fired(d, "tree_no_clear_limit"));
  EXPECT_EQ(d.bottleneck, "cpu_preprocess");
  EXPECT_EQ(d.data_stall_source, "the program's own MetricLogger `time: ... data: ...` lines");
  EXPECT_EQ(d.verdict.rfind("Input-bound: the loop waits for data 46% of the time (the program's own "
                            "MetricLogger `time: ... data: ...`)", 0), 0u)
      << d.verdict;
  ASSERT_FALSE(d.recommendations.empty());
  EXPECT_EQ(d.recommendations.front().setting, "prefetch_factor");
  in.printed->share = 0.10;  // moderately input-bound: not the verdict
  const Diagnosis low = diagnose(watched(in));
  EXPECT_FALSE(fired(low, "tree_printed_data_wait"));
  EXPECT_TRUE(fired(low, "tree_no_clear_limit"));
  WatchDiagnosisInput saturated = tree_input(0.3, 8, 0.95, 0.98);  // the tree decides first
  saturated.printed = idle_tree_waiting_for_data().printed;
  const Diagnosis busy = diagnose(watched(saturated));
  EXPECT_TRUE(fired(busy, "tree_workers_saturated"));
  EXPECT_FALSE(fired(busy, "tree_printed_data_wait"));
}

// The training thread's looks on its workers' queue measure the stall from outside: over the
// program's own lines where both are there; not with too few looks; and the workers' advice
// builds on it: busy workers that keep up are no bottleneck, and a wait on idle workers is one.
TEST(DiagnosisRulesTest, TheQueueLooksMeasureTheStallAndTheVerdictBuildsOnIt) {
  WatchDiagnosisInput in = with_queue_looks(tree_input(0.3, 2, 0.9, 0.5), 500, 200);
  in.printed = PrintedDataWait{11, 10, 2.0, 0.9, 0.45};
  Diagnosis d = diagnose(watched(in));
  EXPECT_TRUE(fired(d, "printed_data_stall"));
  EXPECT_NEAR(d.data_stall_ratio, 0.40, 1e-12);
  EXPECT_EQ(d.data_stall_source, "blocked on the DataLoader queue");
  EXPECT_EQ(d.input_bound, "highly");
  ASSERT_TRUE(fired(d, "tree_workers_saturated")) << ::testing::PrintToString(d.rules);
  // The training thread does other things 60 % of its time: at most 1/0.6 = 1.67x faster.
  ASSERT_FALSE(d.recommendations.empty());
  ASSERT_TRUE(d.recommendations.front().predicted_speedup);
  EXPECT_LE(*d.recommendations.front().predicted_speedup, 1.0 / 0.6 + 1e-9);
  EXPECT_NE(d.recommendations.front().basis.find("blocked on the DataLoader queue"), std::string::npos);

  const Diagnosis few = diagnose(watched(with_queue_looks(tree_input(0.3, 2, 0.9, 0.5), 150, 60)));
  EXPECT_FALSE(fired(few, "queue_data_stall"));
  EXPECT_TRUE(few.data_stall_source.empty());
  EXPECT_TRUE(std::any_of(few.evidence.begin(), few.evidence.end(),
                          [](const std::string& e) { return e.find("fewer than the 200") != std::string::npos; }));

  // Busy workers, but the training thread waits for them 1 % of the time: they keep up.
  const Diagnosis keep_up = diagnose(watched(with_queue_looks(tree_input(0.3, 8, 0.95, 0.98), 500, 5)));
  EXPECT_FALSE(fired(keep_up, "tree_workers_saturated"));
  for (const Recommendation& r : keep_up.recommendations)
    EXPECT_EQ(r.setting.rfind("num_workers", 0), std::string::npos) << r.action;

  // Idle workers, the training thread waiting on them 60 % of the time: more workers, predicted
  // to the point it no longer waits.
  const Diagnosis idle = diagnose(watched(with_queue_looks(tree_input(0.2, 2, 0.1, 0.1), 500, 300)));
  ASSERT_TRUE(fired(idle, "tree_queue_data_wait")) << ::testing::PrintToString(idle.rules);
  EXPECT_FALSE(fired(idle, "tree_no_clear_limit"));
  ASSERT_FALSE(idle.recommendations.empty());
  EXPECT_EQ(idle.recommendations.front().setting, "num_workers=5");
  EXPECT_NEAR(*idle.recommendations.front().predicted_speedup, 2.5, 1e-9);
}

// num_workers=0: the Python stack's looks in torch.utils.data measure the loading share, and
// workers are predicted from it; a program never seen there loads some other way: not measured.
TEST(DiagnosisRulesTest, TheStacksLooksMeasureLoadingInTheTrainingThread) {
  WatchDiagnosisInput in = tree_input(0.98, 0, 0, 0.5);
  MainThreadWaits w;
  w.looks = 500;
  w.stack_looks = 500;
  w.loading = 200;
  w.running = 300;
  in.tree.main_thread_waits = w;
  const Diagnosis d = diagnose(watched(in));
  EXPECT_EQ(d.data_stall_source, "the training thread in torch.utils.data (its Python stack)");
  EXPECT_NEAR(d.data_stall_ratio, 0.4, 1e-12);
  ASSERT_TRUE(fired(d, "tree_one_thread")) << ::testing::PrintToString(d.rules);
  EXPECT_EQ(d.bottleneck, "cpu_preprocess");
  ASSERT_FALSE(d.recommendations.empty());
  EXPECT_EQ(d.recommendations.front().setting, "num_workers=1");
  // 1/(1 - 0.4) = 1.67x, or what the 4 idle cores allow.
  EXPECT_NEAR(*d.recommendations.front().predicted_speedup, 1.0 / 0.6, 1e-9);

  w.loading = 0;
  w.running = 500;
  in.tree.main_thread_waits = w;
  const Diagnosis other = diagnose(watched(in));
  EXPECT_FALSE(fired(other, "queue_data_stall"));
  EXPECT_TRUE(other.data_stall_source.empty());
  EXPECT_TRUE(std::any_of(other.evidence.begin(), other.evidence.end(), [](const std::string& e) {
    return e.find("never in torch.utils.data") != std::string::npos;
  }));
}

// OpenBLAS's pool spins in sched_yield beside a training thread that loads: its core reads busy
// though any worker would take it. tabular_train.py at num_workers=0 on 2 cores: predicted 1.04x
// with the spin counted as work, measured 2.1x with workers; counted as idle, 1.9x.
TEST(DiagnosisRulesTest, ThreadsThatYieldTheirCoreCountAsIdle) {
  WatchDiagnosisInput in = tree_input(0.97, 0, 0, 0.95);
  in.cpus = 2;
  in.tree.other_threads_cores = 0.88;
  in.tree.trainer_cores = 0.97 + 0.88;
  MainThreadWaits w;
  w.looks = w.stack_looks = 500;
  w.loading = 440;
  w.running = 60;
  in.tree.main_thread_waits = w;
  const Diagnosis spun = diagnose(watched(in));
  ASSERT_TRUE(fired(spun, "tree_one_thread")) << ::testing::PrintToString(spun.rules);
  ASSERT_FALSE(spun.recommendations.empty());
  EXPECT_EQ(spun.recommendations.front().setting, "") << "no idle core seen: no worker claimed";
  EXPECT_FALSE(spun.recommendations.front().predicted_speedup);
  EXPECT_NE(spun.verdict.find("No core is free for them (0.1 idle)"), std::string::npos) << spun.verdict;

  in.tree.yielding_threads_cores = 0.8;
  const Diagnosis d = diagnose(watched(in));
  ASSERT_FALSE(d.recommendations.empty());
  // (0.97 + 0.08 + (0.1 + 0.8)) / (0.97 + 0.08): the step's thread, the working rest, and the
  // idle cores with the yielded ones; 2 workers carry 0.88 of the loading at that pace.
  EXPECT_NEAR(*d.recommendations.front().predicted_speedup, (1.85 - 0.8 + 0.1 + 0.8) / (1.85 - 0.8),
              1e-9);
  EXPECT_EQ(d.recommendations.front().setting, "num_workers=2");
  EXPECT_TRUE(std::any_of(d.evidence.begin(), d.evidence.end(), [](const std::string& e) {
    return e.find("0.80 gave the core away") != std::string::npos;
  }));
}

// Image advice for images only: workers that opened no data file get the Dataset's own code.
TEST(DiagnosisRulesTest, CheaperPreprocessingFitsTheDataTheWorkersOpened) {
  const auto advice_for = [](const std::string& kind) {
    WatchDiagnosisInput in = tree_input(0.3, 2, 0.97, 0.99);  // saturated, no idle core
    in.data_files_seen = kind == "none" ? 0 : 10;
    in.data_kind = kind;
    const Diagnosis d = diagnose(watched(in));
    EXPECT_TRUE(fired(d, "tree_workers_saturated")) << ::testing::PrintToString(d.rules);
    return d.recommendations.empty() ? std::string() : d.recommendations.back().action;
  };
  EXPECT_NE(advice_for("images").find("the workers decode image files; decode at reduced size"), std::string::npos);
  const std::string none = advice_for("none");
  EXPECT_EQ(none.find("decode at reduced size"), std::string::npos) << none;
  EXPECT_NE(none.find("__getitem__"), std::string::npos) << none;
  EXPECT_NE(advice_for("shards").find("tar or TFRecord shards"), std::string::npos);
  EXPECT_NE(advice_for("").find("if it decodes images"), std::string::npos);
}

// Sixteen workers on two cores, each at a few percent: what they cost, and the count that would
// carry their work; busy workers or a loop that waits for them are left alone.
TEST(DiagnosisRulesTest, ManyIdleWorkersGetTheCountThatWouldDo) {
  WatchDiagnosisInput in = tree_input(0.9, 16, 0.05, 0.6);
  in.cpus = 2;
  const Diagnosis d = diagnose(watched(in));
  ASSERT_TRUE(fired(d, "tree_idle_workers")) << ::testing::PrintToString(d.rules);
  const auto lower = std::find_if(d.recommendations.begin(), d.recommendations.end(),
                                  [](const Recommendation& r) { return r.setting == "num_workers=2"; });
  ASSERT_NE(lower, d.recommendations.end());
  EXPECT_FALSE(lower->predicted_speedup);
  EXPECT_NE(lower->action.find("persistent_workers=True"), std::string::npos);
  in.tree.worker_busy = 0.6;  // busy workers
  in.tree.workers_cores = 16 * 0.6;
  EXPECT_FALSE(fired(diagnose(watched(in)), "tree_idle_workers"));
  in = with_queue_looks(tree_input(0.2, 16, 0.05, 0.3), 500, 300);  // the loop waits for them
  in.cpus = 2;
  EXPECT_FALSE(fired(diagnose(watched(in)), "tree_idle_workers"));
}

TEST(DiagnosisRulesTest, TheGateEndsTheDiagnosisBeforeAnyOtherRule) {
  WatchDiagnosisInput in = tree_input(0.98, 0, 0, 0.5);
  in.ended = "crashed";
  in.exit = "signal 11";
  in.wall_s = 1.0;
  const Diagnosis d = diagnose(watched(in));
  EXPECT_EQ(d.rules, std::vector<std::string>{"ended_before_measuring"});
  EXPECT_TRUE(d.bottleneck.empty());
  in.wall_s = 60;  // long enough for the tree to say something
  EXPECT_FALSE(fired(diagnose(watched(in)), "ended_before_measuring"));
}

TEST(DiagnosisRulesTest, DropUnhelpfulTakesBackOnlyAdvicePredictedUnderFivePercent) {
  const Evidence e = evidence_of(scenario(3.0, 100, 0.001, 0.029, 0.020, 0.010, 1, 4, true));
  const Facts f = facts_of(e);
  Diagnosis d;
  Recommendation slow;
  slow.setting = "num_workers=2";
  slow.predicted_speedup = 1.02;
  Recommendation unmeasured;
  unmeasured.setting = "batch_size=256";
  d.recommendations = {slow, unmeasured};
  EXPECT_TRUE(rules::drop_unhelpful(f, d));
  ASSERT_EQ(d.recommendations.size(), 1u);
  EXPECT_EQ(d.recommendations[0].setting, "batch_size=256");
  EXPECT_FALSE(rules::drop_unhelpful(f, d)) << "nothing left to take back";
}

bool advises(const Diagnosis& d, std::string_view words) {
  for (const Recommendation& r : d.recommendations)
    if (r.action.find(words) != std::string::npos || r.setting.find(words) != std::string::npos)
      return true;
  return false;
}

bool says(const Diagnosis& d, std::string_view words) {
  for (const std::string& line : d.evidence)
    if (line.find(words) != std::string::npos) return true;
  return false;
}

// A rank waiting in an all-reduce is not compute-bound: the verdict says what it waits for.
TEST(DiagnosisRulesTest, ARankWaitingInCollectivesWaitsForTheOtherRanks) {
  const Diagnosis d = diagnose(rank_waiting_in_all_reduce());
  EXPECT_TRUE(fired(d, "gpu_collective_wait")) << ::testing::PrintToString(d.rules);
  EXPECT_FALSE(fired(d, "step_limit"));
  EXPECT_EQ(d.verdict.rfind("Waiting for other ranks: NCCL collectives run alone on the GPU 50%", 0), 0u)
      << d.verdict;
  EXPECT_EQ(d.bottleneck, "gpu_compute") << "outside the wait its GPU is busy 90 %: its own limit";
  EXPECT_TRUE(says(d, "NCCL collectives 60% of the time, alone on the GPU 50%")) << ::testing::PrintToString(d.evidence);
  // Without the collectives the same busy GPU is the step's limit, as before.
  Evidence e = rank_waiting_in_all_reduce();
  e.gpu_trace->collective_s = 0;
  e.gpu_trace->collective_share = 0;
  e.gpu_trace->collective_alone_share = 0;
  EXPECT_TRUE(fired(diagnose(e), "step_limit"));
  // A collective overlapped with compute (alone 10 %) is no wait worth naming.
  e.gpu_trace->collective_share = 0.5;
  e.gpu_trace->collective_alone_share = 0.1;
  const Diagnosis overlapped = diagnose(e);
  EXPECT_TRUE(fired(overlapped, "step_limit"));
  EXPECT_EQ(overlapped.bottleneck, "gpu_compute");
}

TEST(DiagnosisRulesTest, AWatchedRankWaitingInCollectivesIsNotGpuBound) {
  WatchDiagnosisInput in = tree_input(0.5, 0, 0, 0.2);
  in.gpu_trace = gpu_steps(1, 0.95);
  in.gpu_trace->step_wall_s = 2.0;
  in.gpu_trace->collective_share = 0.9;
  in.gpu_trace->collective_alone_share = 0.85;
  const Diagnosis d = diagnose(watched(in));
  EXPECT_TRUE(fired(d, "tree_gpu_collective_wait")) << ::testing::PrintToString(d.rules);
  EXPECT_EQ(d.verdict.rfind("Waiting for other ranks", 0), 0u) << d.verdict;
  EXPECT_EQ(d.bottleneck, "launch_overhead") << "its own work fills 10 % of the step";
}

// Busy reads busy while any one device is: with several, each is weighed on its own, and the
// idle one is named.
TEST(DiagnosisRulesTest, SeveralGpusAreWeighedOneByOne) {
  const Diagnosis d = diagnose(devices_taking_turns());
  EXPECT_TRUE(fired(d, "gpu_devices_take_turns")) << ::testing::PrintToString(d.rules);
  EXPECT_NE(d.bottleneck, "gpu_compute");
  EXPECT_NE(d.verdict.find("the busiest, cuda:0, only 49% and cuda:1 47%"), std::string::npos) << d.verdict;
  EXPECT_TRUE(says(d, "2 GPUs, busy per device: cuda:0 49%, cuda:1 47%; the idlest, cuda:1, idle 53%"))
      << ::testing::PrintToString(d.evidence);
  // One device busy, the other idle: the busy one's work is the step's limit, and the evidence
  // names the idle one.
  Evidence one_idle = devices_taking_turns();
  one_idle.gpu_trace->devices = {{0, 4000, 4.6, 0.94}, {1, 10, 0.1, 0.02}};
  const Diagnosis lopsided = diagnose(one_idle);
  EXPECT_FALSE(fired(lopsided, "gpu_devices_take_turns"));
  EXPECT_TRUE(says(lopsided, "the idlest, cuda:1, idle 98%")) << ::testing::PrintToString(lopsided.evidence);
}

// A step in a CUDA graph is not launch-bound for an idle GPU, and is never told to capture
// itself in one.
TEST(DiagnosisRulesTest, AGraphedStepIsNotToldToUseCudaGraphs) {
  const Diagnosis d = diagnose(graphed_loop_idle_gpu());
  EXPECT_TRUE(fired(d, "gpu_host_between_launches")) << ::testing::PrintToString(d.rules);
  EXPECT_FALSE(fired(d, "gpu_launch_bound"));
  EXPECT_EQ(d.bottleneck, "cpu_compute");
  EXPECT_NE(d.verdict.find("not launch-bound"), std::string::npos) << d.verdict;
  EXPECT_NE(d.verdict.find("CUDA graph replays"), std::string::npos) << d.verdict;
  EXPECT_FALSE(advises(d, "CUDA graph"));
  EXPECT_TRUE(advises(d, "batch_size=")) << "the host's work per step is the same at any batch";
  EXPECT_TRUE(says(d, "4000 of the 4000 kernels from 1 CUDA graph(s) (100 replays)"))
      << ::testing::PrintToString(d.evidence);
  // Compiled code (Triton's kernels) with cheap launches reads the same.
  Evidence compiled = graphed_loop_idle_gpu();
  compiled.gpu_trace->graph_kernels = 0;
  compiled.gpu_trace->triton_kernels = compiled.gpu_trace->kernels;
  const Diagnosis c = diagnose(compiled);
  EXPECT_TRUE(fired(c, "gpu_host_between_launches")) << ::testing::PrintToString(c.rules);
  EXPECT_NE(c.verdict.find("compiled code"), std::string::npos) << c.verdict;
  // Driver-API launches alone are not compiled code: cuBLAS makes them in a plain eager loop
  // (2 a step of the MLP on an H200, 2026-11-27).
  Evidence cublas = graphed_loop_idle_gpu();
  cublas.gpu_trace->graph_kernels = 0;
  cublas.gpu_trace->driver_launch_calls = 200;
  EXPECT_FALSE(fired(diagnose(cublas), "gpu_host_between_launches"));
  // Its launch calls taking most of the step, a graphed step is launch-bound after all.
  Evidence launching = graphed_loop_idle_gpu();
  launching.gpu_trace->launch_calls = 4000;
  launching.gpu_trace->mean_launch_call_us = 20;  // 80 ms of the 100 ms traced
  EXPECT_TRUE(fired(diagnose(launching), "gpu_launch_bound"));
}

TEST(DiagnosisRulesTest, AWatchedGraphedProgramIsNotToldToCaptureAGraph) {
  WatchDiagnosisInput in = tree_input(0.97, 0, 0, 0.2);
  in.gpu_trace = gpu_steps(1, 0.12);
  in.gpu_trace->step_wall_s = 2.0;
  in.gpu_trace->graph_kernels = in.gpu_trace->kernels;
  in.gpu_trace->graphs = 1;
  const Diagnosis d = diagnose(watched(in));
  EXPECT_TRUE(fired(d, "tree_gpu_trace")) << ::testing::PrintToString(d.rules);
  EXPECT_EQ(d.bottleneck, "cpu_compute");
  EXPECT_EQ(d.verdict.rfind("Host-bound", 0), 0u) << d.verdict;
  EXPECT_FALSE(advises(d, "CUDA graph"));
  // Not graphed: launch-bound, and a graph is advised, as before.
  in.gpu_trace->graph_kernels = 0;
  const Diagnosis plain = diagnose(watched(in));
  EXPECT_EQ(plain.bottleneck, "launch_overhead");
  EXPECT_TRUE(advises(plain, "CUDA graph"));
}

// .to(device) without non_blocking: a copy, then a stream sync on the training thread. Its
// advice is pinning and non_blocking, predicted from the wait; not ".item()".
TEST(DiagnosisRulesTest, ASyncAfterEachInputCopyIsAdvisedPinnedNonBlockingCopies) {
  const Diagnosis d = diagnose(blocking_copies());
  EXPECT_TRUE(fired(d, "blocking_input_copy")) << ::testing::PrintToString(d.rules);
  EXPECT_FALSE(fired(d, "remove_host_syncs")) << "every sync is an input copy's";
  EXPECT_FALSE(advises(d, ".item()"));
  const auto it = std::find_if(d.recommendations.begin(), d.recommendations.end(), [](const Recommendation& r) {
    return r.setting == "pin_memory=True, non_blocking=True";
  });
  ASSERT_NE(it, d.recommendations.end());
  EXPECT_NE(it->action.find(".to(device, non_blocking=True)"), std::string::npos);
  // step = max(1 ms - 0.3 ms blocked, 0.2 ms busy) = 0.7 ms.
  ASSERT_TRUE(it->predicted_samples_per_s);
  EXPECT_NEAR(*it->predicted_samples_per_s, 64 / 0.0007, 1);
  // One more .item() sync a step besides: both advices, the .item() one without the copies' wait.
  Evidence both = blocking_copies();
  both.gpu_trace->syncs = 300;
  both.gpu_trace->syncs_per_step = 3;
  both.gpu_trace->sync_wait_s = 0.05;
  const Diagnosis d2 = diagnose(both);
  EXPECT_TRUE(fired(d2, "blocking_input_copy"));
  EXPECT_TRUE(fired(d2, "remove_host_syncs"));
  const auto item = std::find_if(d2.recommendations.begin(), d2.recommendations.end(),
                                 [](const Recommendation& r) { return r.setting == "no per-step sync"; });
  ASSERT_NE(item, d2.recommendations.end());
  EXPECT_NE(item->action.find("1.0 per step"), std::string::npos) << item->action;
  EXPECT_NE(item->basis.find("0.20 ms blocked"), std::string::npos) << item->basis;
}

TEST(DiagnosisRulesTest, AWatchedProgramsBlockingCopiesAreNotCalledItem) {
  WatchDiagnosisInput in = tree_input(0.97, 0, 0, 0.2);
  in.gpu_trace = gpu_steps(1, 0.3);
  in.gpu_trace->step_wall_s = 2.0;
  in.gpu_trace->syncs = 400;
  in.gpu_trace->sync_wait_s = 0.8;
  in.gpu_trace->syncs_after_h2d = 400;
  in.gpu_trace->sync_after_h2d_wait_s = 0.8;
  const Diagnosis d = diagnose(watched(in));
  EXPECT_TRUE(fired(d, "blocking_input_copy")) << ::testing::PrintToString(d.rules);
  EXPECT_FALSE(advises(d, ".item()"));
  const auto it = std::find_if(d.recommendations.begin(), d.recommendations.end(), [](const Recommendation& r) {
    return r.setting == "pin_memory=True, non_blocking=True";
  });
  ASSERT_NE(it, d.recommendations.end());
  ASSERT_TRUE(it->predicted_speedup);
  EXPECT_NEAR(*it->predicted_speedup, 1 / 0.6, 1e-9) << "40 % blocked: 1 / max(0.6, 0.3)";
}

// A pageable copy on the training thread beside a GPU that sets the pace: the GPU's verdict.
TEST(DiagnosisRulesTest, ACopyOnTheThreadBesideABusyGpuIsContext) {
  const Diagnosis d = diagnose(copy_beside_a_busy_gpu());
  EXPECT_FALSE(fired(d, "copy_on_training_thread")) << ::testing::PrintToString(d.rules);
  EXPECT_TRUE(fired(d, "step_limit"));
  EXPECT_EQ(d.bottleneck, "gpu_compute");
  EXPECT_TRUE(fired(d, "copy_beside_gpu_limit"));
  EXPECT_TRUE(says(d, "the copy overlaps the GPU's work")) << ::testing::PrintToString(d.evidence);
  // A GPU with room to spare: the copy on the thread is the limit, as before.
  Evidence idle = copy_beside_a_busy_gpu();
  idle.gpu_trace->device_s_per_step = 0.005;
  const Diagnosis copy = diagnose(idle);
  EXPECT_TRUE(fired(copy, "copy_on_training_thread"));
  EXPECT_EQ(copy.bottleneck, "host_to_device");
  EXPECT_FALSE(fired(copy, "copy_beside_gpu_limit"));
}

// No workers, no data file open, no reads: the data is in memory and the time is the step's.
TEST(DiagnosisRulesTest, AnInMemoryLoopIsNotToldToAddWorkers) {
  const Diagnosis d = diagnose(watched(in_memory_program()));
  EXPECT_TRUE(fired(d, "tree_data_in_memory")) << ::testing::PrintToString(d.rules);
  EXPECT_FALSE(fired(d, "tree_one_thread"));
  EXPECT_EQ(d.bottleneck, "cpu_compute");
  EXPECT_TRUE(says(d, "data in memory")) << ::testing::PrintToString(d.evidence);
  EXPECT_FALSE(advises(d, "num_workers"));
  // Files seen open, or reads from storage, or not looked at all: it may load, as before.
  WatchDiagnosisInput files = in_memory_program();
  files.data_files_seen = 12;
  EXPECT_TRUE(fired(diagnose(watched(files)), "tree_one_thread"));
  WatchDiagnosisInput reads = in_memory_program();
  reads.tree.storage_read_bytes_per_s = 5e6;
  EXPECT_TRUE(fired(diagnose(watched(reads)), "tree_one_thread"));
  WatchDiagnosisInput unknown = in_memory_program();
  unknown.data_files_seen.reset();
  EXPECT_TRUE(fired(diagnose(watched(unknown)), "tree_one_thread"));
}

}  // namespace
}  // namespace feedscope

namespace feedscope {
namespace {

const Recommendation* advice(const Diagnosis& d, std::string_view setting_prefix) {
  for (const Recommendation& r : d.recommendations)
    if (r.setting.starts_with(setting_prefix)) return &r;
  return nullptr;
}

// 2 % of files at 8000x6000: named with what they are, the fix sized from the pipeline's 224 crop,
// and its gain predicted through the num_workers model.
TEST(DiagnosisRulesTest, SlowSamplesNameTheFilesTheSizeAndTheGain) {
  const Diagnosis d = diagnose(evidence_of(loading_folder(Folder::skewed)));
  ASSERT_TRUE(fired(d, "slow_samples")) << ::testing::PrintToString(d.rules);
  const auto line = std::find_if(d.evidence.begin(), d.evidence.end(), [](const std::string& e) {
    return e.starts_with("a few slow samples cost");
  });
  ASSERT_NE(line, d.evidence.end());
  EXPECT_NE(line->find("2.0% of samples (40 of 2000)"), std::string::npos) << *line;
  EXPECT_NE(line->find("8000x6000, 9.8 MB jpeg"), std::string::npos) << *line;
  EXPECT_NE(line->find("class_0001/img_"), std::string::npos) << *line;
  const Recommendation* r = advice(d, "slow files");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->setting, "slow files: shorter side 256 px");
  // Loading falls from 50 ms to the median's share: 40 files at 57 ms beyond the median of 2000 at
  // 3 ms are 2.3 of the 8.2 s of loading (54 %). One worker on 4 cores: the rate follows loading.
  ASSERT_TRUE(r->predicted_speedup.has_value()) << r->basis;
  EXPECT_NEAR(*r->predicted_speedup, 1 / (1 - 0.54), 0.15) << r->basis;
  EXPECT_TRUE(std::any_of(d.evidence.begin(), d.evidence.end(), [](const std::string& e) {
    return e.find("75% of it while the batch it waited for loaded its slowest sample") != std::string::npos;
  }));
}

TEST(DiagnosisRulesTest, SlowSamplesStayQuietOnAUniformOrAnOrdinaryFolder) {
  for (const Folder folder : {Folder::uniform, Folder::mixed}) {
    const Diagnosis d = diagnose(evidence_of(loading_folder(folder)));
    EXPECT_FALSE(fired(d, "slow_samples")) << static_cast<int>(folder) << ": " << ::testing::PrintToString(d.evidence);
    EXPECT_EQ(advice(d, "slow files"), nullptr);
  }
  const SampleCosts mixed = folder_costs(Folder::mixed);
  EXPECT_GT(mixed.p99_ms / mixed.p50_ms, 2.0) << "the ordinary folder does spread";
  // The same tail in a records dataset (no pixels: a cold read's, not a file's size): storage's.
  DiagnosisInput records = loading_folder(Folder::skewed);
  for (SlowSample& slow : records.samples->slowest) slow.width = slow.height = std::nullopt;
  EXPECT_FALSE(fired(diagnose(evidence_of(records)), "slow_samples"));
}

// Where the step sets the pace on a GPU, cheaper loading gains nothing: the advice is weighed and
// taken back by drop_unhelpful, the files still named in the evidence.
TEST(DiagnosisRulesTest, SlowSamplesBesideAFasterLoaderAreNotAdvised) {
  DiagnosisInput in = scenario(5.0, 100, 0, 0.002, 0.0005, 0.049, 2, 2, true);
  in.samples = folder_costs(Folder::skewed);
  const Diagnosis d = diagnose(evidence_of(in));
  EXPECT_TRUE(fired(d, "slow_samples"));
  EXPECT_EQ(advice(d, "slow files"), nullptr);
  EXPECT_TRUE(std::any_of(d.evidence.begin(), d.evidence.end(), [](const std::string& e) {
    return e.starts_with("considered slow files");
  }));
}

}  // namespace
}  // namespace feedscope

namespace feedscope {
namespace {

// Measured on this repository's 2-core machine (bench/slow_samples.sh, a skewed folder's run): the
// MLP step's span swelled to 232 ms a batch while its thread was busy 31 % of the run, waiting for
// a core beside the workers decoding 4000x3000 files. On the spans' times cheaper loading would
// gain nothing (the step would set the pace); on CPU time the step gets its core back.
TEST(DiagnosisRulesTest, SlowSamplesBesideACpuStepArePredictedOnCpuTime) {
  DiagnosisInput in = scenario(15.0, 62, 0.006, 0.240, 0.002, 0.232, 2, 2, false);
  in.utilization.threads = {{"training", 0.309}, {"worker 0", 0.171}, {"worker 1", 0.143}};
  in.utilization.cpu_process_ratio = 0.315;
  in.samples = folder_costs(Folder::skewed);
  const Diagnosis d = diagnose(evidence_of(in));
  const Recommendation* r = advice(d, "slow files");
  ASSERT_NE(r, nullptr) << ::testing::PrintToString(d.evidence);
  ASSERT_TRUE(r->predicted_speedup.has_value()) << r->basis;
  EXPECT_NEAR(*r->predicted_speedup, 1.37, 0.05) << r->basis;
  EXPECT_NE(r->basis.find("on CPU time"), std::string::npos) << r->basis;
}

TEST(DiagnosisRulesTest, MemoryFindingsStandBesideTheBottleneck) {
  const Diagnosis copy = diagnose(watched(memory_input(8, 0)));
  ASSERT_EQ(copy.memory.size(), 1u);
  EXPECT_EQ(copy.memory[0].kind, "memory_copy_on_access");
  EXPECT_NEAR(*copy.memory[0].private_bytes_per_s / (1 << 20), 16, 1e-9) << "2 workers x 8 MiB/s";
  EXPECT_NEAR(*copy.memory[0].exhausted_in_s, 8.0 * 1024 / 16, 1e-6);
  EXPECT_NE(copy.memory[0].summary.find("copy-on-access"), std::string::npos);
  EXPECT_FALSE(copy.bottleneck.empty());
  // The workers' figures give the cost of fewer workers: two busy half a core each are a core of
  // work, more than one worker carries with a margin.
  EXPECT_NE(copy.memory[0].fix.find("num_workers=1 loads at about 1/2"), std::string::npos)
      << copy.memory[0].fix;

  const Diagnosis one = diagnose(watched(memory_input(8, 0, 8ull << 30, true)));
  ASSERT_EQ(one.memory.size(), 1u) << ::testing::PrintToString(one.evidence);
  EXPECT_EQ(one.memory[0].kind, "memory_leak_one_process");
  EXPECT_EQ(one.memory[0].pids, std::vector<int>{101}) << "one worker alone grows";

  // The parent of copying workers: its pages they copied away are its alone now, its private
  // growing as its shared falls (the #20433 repro's trainer). The copy, not a leak.
  WatchDiagnosisInput mirror = memory_input(8, 6);
  mirror.tree.processes[0].memory->shared_bytes_per_s = -5.0 * (1 << 20);
  const Diagnosis parent = diagnose(watched(mirror));
  ASSERT_EQ(parent.memory.size(), 1u) << ::testing::PrintToString(parent.evidence);
  EXPECT_EQ(parent.memory[0].kind, "memory_copy_on_access");
  EXPECT_TRUE(says(parent, "a page every worker copied away is its alone now"));
  // Its shared memory flat: its own growth, a leak beside the copy.
  const Diagnosis both = diagnose(watched(memory_input(8, 6)));
  ASSERT_EQ(both.memory.size(), 2u) << ::testing::PrintToString(both.evidence);
  EXPECT_EQ(both.memory[1].kind, "memory_leak_one_process");

  // A short program's growth is its start-up until it has lasted kMemoryLeakSeconds: the 7-s
  // matmul loop on an H200 grew 124 MiB/s over 3.9 s as CUDA started, and was called a leak.
  WatchDiagnosisInput short_run = memory_input(0, 12);
  short_run.tree.processes[0].memory->window_s = 3.9;
  const Diagnosis start_up = diagnose(watched(short_run));
  EXPECT_TRUE(start_up.memory.empty()) << ::testing::PrintToString(start_up.evidence);
  EXPECT_TRUE(says(start_up, "grew 12.0 MiB/s over 3.9 s: too short a stretch to tell a leak from "
                             "its start-up"));

  EXPECT_TRUE(diagnose(watched(memory_input(0, 0))).memory.empty()) << "flat memory";
  EXPECT_TRUE(diagnose(watched(memory_input(0.1, 0.1))).memory.empty()) << "under the thresholds";
}

// NVML lists the GPU's processes by the host's PIDs; from inside a container none is the tree's.
TEST(DiagnosisRulesTest, AGpuShareNvmlCannotMatchInAContainerIsSaidNotMeasured) {
  WatchDiagnosisInput in = tree_input(0.97, 0, 0, 0.2);
  in.tree.gpu_share_unmeasured =
      "NVML names the GPU's processes by the host's PIDs, and feedscope runs in a PID namespace "
      "of its own (a container): the program's GPU share is not measured";
  const Diagnosis d = diagnose(watched(in));
  EXPECT_TRUE(says(d, "NVML: NVML names the GPU's processes by the host's PIDs"))
      << ::testing::PrintToString(d.evidence);
}

}  // namespace
}  // namespace feedscope
