// The diagnosis' rules in the order they are asked (rule.h says what each stage means). Every
// path goes through this one list: `run`, a wrapped loop, `watch` with or without a Session, each
// rank of a job. docs/diagnosis.md names each rule; DiagnosisRulesTest holds the page to the list.
#include "profiler/rules/rule.h"

#include "profiler/rules/rules.h"

namespace feedscope {

const std::vector<Rule>& diagnosis_rules() {
  using S = RuleStage;
  static const std::vector<Rule> list = {
      {"ended_before_measuring", S::gate, kNeedsEnd, rules::ended_before_measuring},
      {"loop_data_stall", S::measure, kNeedsLoop, rules::loop_data_stall},
      {"printed_data_stall", S::measure, kNeedsPrinted | kNeedsNoLoop, rules::printed_data_stall},
      // From outside, the training thread's waits on its workers' queue: measured over the whole
      // window, it stands over the printed lines' figure where both are there.
      {"queue_data_stall", S::measure, kNeedsTree | kNeedsNoLoop, rules::queue_data_stall},
      // The loop's spans decide first: they measure what the tree can only infer.
      {"copy_on_training_thread", S::bottleneck, kNeedsLoop, rules::copy_on_training_thread},
      {"input_copy", S::bottleneck, kNeedsLoop, rules::input_copy},
      {"input_storage", S::bottleneck, kNeedsLoop, rules::input_storage},
      {"input_crowded_out", S::bottleneck, kNeedsLoop, rules::input_crowded_out},
      {"input_handoff", S::bottleneck, kNeedsLoop, rules::input_handoff},
      {"input_preprocess", S::bottleneck, kNeedsLoop, rules::input_preprocess},
      {"gpu_copy", S::bottleneck, kNeedsLoop | kNeedsGpuTrace, rules::gpu_copy},
      {"gpu_collective_wait", S::bottleneck, kNeedsLoop | kNeedsGpuTrace, rules::gpu_collective_wait},
      {"gpu_devices_take_turns", S::bottleneck, kNeedsLoop | kNeedsGpuTrace,
       rules::gpu_devices_take_turns},
      {"gpu_host_between_launches", S::bottleneck, kNeedsLoop | kNeedsGpuTrace,
       rules::gpu_host_between_launches},
      {"gpu_launch_bound", S::bottleneck, kNeedsLoop | kNeedsGpuTrace, rules::gpu_launch_bound},
      {"step_limit", S::bottleneck, kNeedsLoop, rules::step_limit},
      // From outside, where no span was sent.
      {"tree_storage", S::bottleneck, kNeedsTree | kNeedsNoLoop, rules::tree_storage},
      {"tree_gpu_collective_wait", S::bottleneck, kNeedsTree | kNeedsNoLoop | kNeedsGpuTrace,
       rules::tree_gpu_collective_wait},
      {"tree_gpu_trace", S::bottleneck, kNeedsTree | kNeedsNoLoop | kNeedsGpuTrace,
       rules::tree_gpu_trace},
      {"tree_gpu_host_dispatch", S::bottleneck, kNeedsTree | kNeedsNoLoop | kNeedsGpuTrace,
       rules::tree_gpu_host_dispatch},
      {"tree_gpu_nvml", S::bottleneck, kNeedsTree | kNeedsNoLoop, rules::tree_gpu_nvml},
      {"tree_worker_churn", S::bottleneck, kNeedsTree | kNeedsNoLoop, rules::tree_worker_churn},
      {"tree_workers_saturated", S::bottleneck, kNeedsTree | kNeedsNoLoop,
       rules::tree_workers_saturated},
      {"tree_data_in_memory", S::bottleneck, kNeedsTree | kNeedsNoLoop | kNeedsDataFiles,
       rules::tree_data_in_memory},
      {"tree_one_thread", S::bottleneck, kNeedsTree | kNeedsNoLoop, rules::tree_one_thread},
      {"tree_step_bound", S::bottleneck, kNeedsTree | kNeedsNoLoop, rules::tree_step_bound},
      {"tree_cores_full", S::bottleneck, kNeedsTree | kNeedsNoLoop, rules::tree_cores_full},
      // Where the tree names nothing, the training thread's waits on its workers' queue, then the
      // program's own lines that say its loop waits for data.
      {"tree_queue_data_wait", S::bottleneck, kNeedsTree | kNeedsNoLoop, rules::tree_queue_data_wait},
      {"tree_printed_data_wait", S::bottleneck, kNeedsTree | kNeedsNoLoop | kNeedsPrinted,
       rules::tree_printed_data_wait},
      {"tree_no_clear_limit", S::bottleneck, kNeedsTree | kNeedsNoLoop, rules::tree_no_clear_limit},
      {"tree_processes", S::context, kNeedsTree, rules::tree_processes},
      {"tree_core_waits", S::context, kNeedsTree | kNeedsNoLoop, rules::tree_core_waits},
      {"tree_idle_workers", S::context, kNeedsTree | kNeedsNoLoop, rules::tree_idle_workers},
      {"gpu_trace_evidence", S::context, kNeedsGpuTrace, rules::gpu_trace_evidence},
      {"copy_beside_gpu_limit", S::context, kNeedsLoop | kNeedsGpuTrace, rules::copy_beside_gpu_limit},
      {"memory_copy_on_access", S::context, kNeedsTree | kNeedsMemory, rules::memory_copy_on_access},
      {"memory_leak_one_process", S::context, kNeedsTree | kNeedsMemory, rules::memory_leak_one_process},
      {"memory_workers_exceed_headroom", S::context, kNeedsTree | kNeedsMemory,
       rules::memory_workers_exceed_headroom},
      {"blocking_input_copy", S::advice, kNeedsGpuTrace, rules::blocking_input_copy},
      {"remove_host_syncs", S::advice, kNeedsLoop | kNeedsGpuTrace, rules::remove_host_syncs},
      {"slow_samples", S::advice, kNeedsSamples, rules::slow_samples},
      {"autotune_tried", S::advice, kNeedsAutotune, rules::autotune_tried},
      // Last: it weighs every recommendation the rules above made.
      {"drop_unhelpful", S::advice, kNeedsNothing, rules::drop_unhelpful},
  };
  return list;
}

const char* to_string(RuleStage stage) {
  switch (stage) {
    case RuleStage::gate: return "gate";
    case RuleStage::measure: return "measure";
    case RuleStage::bottleneck: return "bottleneck";
    case RuleStage::context: return "context";
    case RuleStage::advice: return "advice";
  }
  return "?";
}

std::string needs_text(unsigned needs) {
  static const std::pair<unsigned, const char*> names[] = {
      {kNeedsLoop, "loop spans"},      {kNeedsTree, "process tree"},
      {kNeedsGpuTrace, "CUDA trace"},  {kNeedsEnd, "program's end"},
      {kNeedsAutotune, "autotune"},    {kNeedsPrinted, "printed lines"},
      {kNeedsNoLoop, "no loop spans"}, {kNeedsDataFiles, "data files looked for"},
      {kNeedsSamples, "sample costs"},
      {kNeedsMemory, "memory readings"}};
  std::string out;
  for (const auto& [bit, name] : names)
    if (needs & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  return out.empty() ? "nothing" : out;
}

}  // namespace feedscope
