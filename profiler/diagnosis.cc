#include "profiler/diagnosis.h"

#include "profiler/rules/facts.h"
#include "profiler/rules/rule.h"

namespace feedscope {

namespace {

bool has(const Evidence& e, unsigned needs) {
  return (!(needs & kNeedsLoop) || e.loop) && (!(needs & kNeedsTree) || e.tree) &&
         (!(needs & kNeedsGpuTrace) || e.gpu_trace) && (!(needs & kNeedsEnd) || e.end) &&
         (!(needs & kNeedsAutotune) || e.autotune) && (!(needs & kNeedsPrinted) || e.printed) &&
         (!(needs & kNeedsNoLoop) || !e.loop) && (!(needs & kNeedsDataFiles) || e.data_files_seen) &&
         (!(needs & kNeedsSamples) || e.samples) &&
         (!(needs & kNeedsMemory) || (e.tree && e.tree->memory && e.tree->memory->rollup_readings > 0));
}

}  // namespace

const char* input_bound_class(double ratio) {
  if (ratio >= kHighlyInputBound) return "highly";
  if (ratio >= kModeratelyInputBound) return "moderately";
  return "no";
}

Evidence evidence_of(const DiagnosisInput& in) {
  Evidence e;
  e.cpus = in.cpus;
  e.utilization = in.utilization;
  e.loop = static_cast<const LoopSpans&>(in);
  e.gpu_trace = in.gpu_trace;
  e.trials = in.trials;
  e.autotune = in.autotune;
  e.samples = in.samples;
  return e;
}

Diagnosis diagnose(const Evidence& e) {
  const Facts facts = facts_of(e);
  Diagnosis d;
  d.input_bound = "unknown";  // measured by the loop's wait spans or the program's own lines
  bool named = false;
  for (const Rule& rule : diagnosis_rules()) {
    if (!has(e, rule.needs) || (rule.stage == RuleStage::bottleneck && named)) continue;
    if (!rule.fire(facts, d)) continue;
    d.rules.emplace_back(rule.name);
    if (rule.stage == RuleStage::gate) break;
    named = named || rule.stage == RuleStage::bottleneck;
  }
  return d;
}

Diagnosis diagnose(const DiagnosisInput& input) { return diagnose(evidence_of(input)); }

}  // namespace feedscope
