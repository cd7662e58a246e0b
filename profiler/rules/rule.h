#pragma once
// The diagnosis is an ordered list of named rules (registry.cc), each one function over the facts
// of profiler/rules/facts.h. docs/diagnosis.md lists them, and a test holds the page and the list
// to each other. To add one: write the function beside its kin (loop_rules.cc, tree_rules.cc,
// shared_rules.cc), declare it in rules.h, register it in registry.cc where it belongs in the
// order, give it a test (tests/profiler/diagnosis_rules_test.cc) and its line in the docs.
#include <string>
#include <string_view>
#include <vector>

#include "profiler/report.h"

namespace feedscope {

struct Facts;

// When a rule is asked, and what its answer does.
enum class RuleStage {
  gate,        // fires: the diagnosis ends there (nothing to diagnose)
  measure,     // evidence every later rule builds on (the data stall); all that apply fire
  bottleneck,  // the first that fires names the bottleneck, the verdict and its advice
  context,     // evidence lines that stand beside whichever bottleneck was named
  advice,      // what holds for any bottleneck: more advice, or advice taken back
};

// What a rule reads: where it is absent the rule is not asked.
enum RuleNeeds : unsigned {
  kNeedsNothing = 0,
  kNeedsLoop = 1u << 0,      // the loop's stage spans (run, wrap, a Session)
  kNeedsTree = 1u << 1,      // the process tree by role (watch)
  kNeedsGpuTrace = 1u << 2,  // a CUDA activity trace
  kNeedsEnd = 1u << 3,       // how a watched program ended
  kNeedsAutotune = 1u << 4,  // the loader's tuner's moves
  // Outside the loop only: a rule that reads the program from outside, which the spans,
  // where there are any, answer better.
  kNeedsNoLoop = 1u << 5,
  kNeedsPrinted = 1u << 6,  // the program's own progress lines
  kNeedsDataFiles = 1u << 7,  // a watch that looked for the data files the program holds open
  kNeedsSamples = 1u << 8,    // each sample's load time (feedscope's loader, or its decoder)
  kNeedsMemory = 1u << 9,     // the tree's smaps_rollup readings (private and shared memory)
};

struct Rule {
  std::string_view name;  // as docs/diagnosis.md and report.json's diagnosis.rules name it
  RuleStage stage;
  unsigned needs;
  // Adds to `d` what it finds; returns whether it fired (a bottleneck rule: whether it decided).
  // A rule that does not fire leaves `d` as it was, but for the evidence it weighed.
  bool (*fire)(const Facts& facts, Diagnosis& d);
};

// In the order they are asked.
const std::vector<Rule>& diagnosis_rules();

const char* to_string(RuleStage stage);
// "loop spans, CUDA trace": what `needs` names, in docs/diagnosis.md's words.
std::string needs_text(unsigned needs);

}  // namespace feedscope
