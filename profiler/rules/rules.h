#pragma once
// Every rule of the diagnosis, by the name registry.cc gives it (docs/diagnosis.md explains each).
// A rule adds to `d` what it finds and returns whether it fired; rule.h says what firing means at
// each stage. Declared here so that each has its own test.
#include "profiler/report.h"
#include "profiler/rules/facts.h"

namespace feedscope::rules {

// gate
bool ended_before_measuring(const Facts& f, Diagnosis& d);

// measure
bool loop_data_stall(const Facts& f, Diagnosis& d);
bool printed_data_stall(const Facts& f, Diagnosis& d);

// bottleneck, from the loop's spans (loop_rules.cc)
bool copy_on_training_thread(const Facts& f, Diagnosis& d);
bool input_copy(const Facts& f, Diagnosis& d);
bool input_storage(const Facts& f, Diagnosis& d);
bool input_crowded_out(const Facts& f, Diagnosis& d);
bool input_handoff(const Facts& f, Diagnosis& d);
bool input_preprocess(const Facts& f, Diagnosis& d);
bool gpu_copy(const Facts& f, Diagnosis& d);
bool gpu_collective_wait(const Facts& f, Diagnosis& d);
bool gpu_devices_take_turns(const Facts& f, Diagnosis& d);
bool gpu_host_between_launches(const Facts& f, Diagnosis& d);
bool gpu_launch_bound(const Facts& f, Diagnosis& d);
bool step_limit(const Facts& f, Diagnosis& d);

// bottleneck, from the process tree (tree_rules.cc)
bool tree_storage(const Facts& f, Diagnosis& d);
bool tree_gpu_collective_wait(const Facts& f, Diagnosis& d);
bool tree_gpu_trace(const Facts& f, Diagnosis& d);
bool tree_gpu_host_dispatch(const Facts& f, Diagnosis& d);
bool tree_gpu_nvml(const Facts& f, Diagnosis& d);
bool tree_worker_churn(const Facts& f, Diagnosis& d);
bool tree_workers_saturated(const Facts& f, Diagnosis& d);
bool tree_data_in_memory(const Facts& f, Diagnosis& d);
bool tree_one_thread(const Facts& f, Diagnosis& d);
bool tree_step_bound(const Facts& f, Diagnosis& d);
bool tree_cores_full(const Facts& f, Diagnosis& d);
bool tree_printed_data_wait(const Facts& f, Diagnosis& d);
bool queue_data_stall(const Facts& f, Diagnosis& d);
bool tree_queue_data_wait(const Facts& f, Diagnosis& d);
bool tree_idle_workers(const Facts& f, Diagnosis& d);
bool tree_no_clear_limit(const Facts& f, Diagnosis& d);

// context (shared_rules.cc)
bool tree_processes(const Facts& f, Diagnosis& d);
bool tree_core_waits(const Facts& f, Diagnosis& d);
bool gpu_trace_evidence(const Facts& f, Diagnosis& d);
bool copy_beside_gpu_limit(const Facts& f, Diagnosis& d);

// context, memory (memory_rules.cc)
bool memory_copy_on_access(const Facts& f, Diagnosis& d);
bool memory_leak_one_process(const Facts& f, Diagnosis& d);
bool memory_workers_exceed_headroom(const Facts& f, Diagnosis& d);

// advice (shared_rules.cc)
bool blocking_input_copy(const Facts& f, Diagnosis& d);
bool remove_host_syncs(const Facts& f, Diagnosis& d);
bool slow_samples(const Facts& f, Diagnosis& d);
bool autotune_tried(const Facts& f, Diagnosis& d);
bool drop_unhelpful(const Facts& f, Diagnosis& d);

}  // namespace feedscope::rules
