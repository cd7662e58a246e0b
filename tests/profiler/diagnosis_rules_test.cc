// The diagnosis as a list of named rules: each rule fires on a case made for it, a rule whose
// evidence is absent is not asked, one bottleneck rule decides, and docs/diagnosis.md names every
// rule in the registry's order with its stage and what it needs.
#include "profiler/rules/rule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "profiler/diagnosis.h"
#include "profiler/rank_digest.h"
#include "profiler/rules/facts.h"
#include "profiler/rules/rules.h"
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

// Nothing busy, cores idle, and the program's own MetricLogger lines say its loop waits for data.
WatchDiagnosisInput idle_tree_waiting_for_data() {
  WatchDiagnosisInput in = tree_input(0.2, 2, 0.1, 0.1);
  in.printed = PrintedDataWait{12, 10, 10.0, 4.6, 0.46, "MetricLogger `time: ... data: ...`"};
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
      {"tree_gpu_nvml",
       [] {
         WatchDiagnosisInput in = tree_input(0.97, 0, 0, 0.2);
         in.tree.trainer_gpu_sm_util = 0.9;
         return watched(in);
       }},
      {"tree_workers_saturated", [] { return watched(tree_input(0.3, 8, 0.95, 0.98)); }},
      {"tree_one_thread", [] { return watched(tree_input(0.98, 0, 0, 0.2)); }},
      {"tree_step_bound", [] { return watched(tree_input(0.98, 2, 0.2, 0.4)); }},
      {"tree_cores_full", [] { return watched(tree_input(0.5, 2, 0.6, 0.97)); }},
      {"tree_printed_data_wait", [] { return watched(idle_tree_waiting_for_data()); }},
      {"tree_no_clear_limit", [] { return watched(tree_input(0.2, 2, 0.1, 0.1)); }},
      {"tree_processes", [] { return watched(tree_input(0.2, 2, 0.1, 0.1)); }},
      {"tree_core_waits",
       [] {
         WatchDiagnosisInput in = tree_input(0.5, 2, 0.6, 0.97);
         in.tree.main_thread_run_wait = 0.2;
         return watched(in);
       }},
      {"gpu_trace_evidence", launch_bound_with_syncs},
      {"remove_host_syncs", launch_bound_with_syncs},
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

}  // namespace
}  // namespace feedscope
