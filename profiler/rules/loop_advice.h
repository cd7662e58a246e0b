#pragma once
// The recommendations the loop's rules make, each with its what-if prediction or the reason it has
// none (loop_advice.cc says how each is derived), and the evidence some of them weigh first.
#include <optional>
#include <string>

#include "profiler/evidence.h"
#include "profiler/rules/facts.h"

namespace feedscope {

// A number only where both rates are: a what-if with nothing measured under it predicts nothing.
Recommendation with_prediction(Recommendation r, double rate, double measured);

Recommendation more_workers(const Evidence& e, const Costs& c, double measured,
                            bool workers_are_processes);
// "host_to_device", "gpu_compute" or "launch_overhead": the GPU-side limit a trace shows.
const char* gpu_bottleneck(const GpuTraceSummary& g);
Recommendation bigger_batch(const Evidence& e, const GpuTraceSummary& g, const Costs& c,
                            double loader_rate, double measured);
Recommendation tiny_model_on_cpu(const Evidence& e, const Costs& c, double measured);
Recommendation pin_memory(const Evidence& e, const GpuTraceSummary& g, const Costs& c,
                          double loader_rate, double measured);
Recommendation pin_for_the_copy_engine(const Evidence& e, const GpuTraceSummary* g,
                                       const Costs& c, double measured);
Recommendation smaller_copies(const Evidence& e, const GpuTraceSummary& g, const Costs& c,
                              double loader_rate, double measured);
Recommendation remove_syncs(const Evidence& e, const GpuTraceSummary& g, const Costs& c,
                            double loader_rate, double measured);

// torch's `.to(device)` without non_blocking: pinned memory and non_blocking=True, predicted
// from the wait the trace saw in the syncs that follow each copy (loop_advice.cc).
Recommendation pin_and_copy_async(const Evidence& e, const GpuTraceSummary& g, const Costs& c,
                                  double loader_rate, double measured);
// The same over a watched program's traced window, without steps: the time blocked in those
// syncs comes off, down to the GPU's busy share.
Recommendation pin_and_copy_async_window(const GpuTraceSummary& g);

// NCCL's collectives alone on the GPU most of the step: the rank waits for the others. Names the
// bottleneck by the rank's own work outside the wait, the verdict says what it waits for.
void collective_wait_finding(const GpuTraceSummary& g, Diagnosis& d);

// The host (Python, the framework's dispatch) sets the pace of a GPU idle between its kernels:
// CUDA graphs where the kernels are not graphed already, predicted from the training thread's
// `working` share and bounded by the GPU's busy share (and by the loader's `loader_pace`, where
// not 0); a larger batch where they are.
void host_dispatch_finding(const GpuTraceSummary& g, double working, double loader_pace, Diagnosis& d);

// "412 kernels from 2 CUDA graphs (20 replays)" and/or "3000 launches through the driver API
// (compiled code)": how the steps' kernels were launched, where graphs or compiled code did.
std::string launched_how(const GpuTraceSummary& g);

// Whether storage was at work while the loader read (page-cache hits are not reads), with the
// readings it weighed added to `d`'s evidence either way.
bool storage_evidence(const Evidence& e, Diagnosis& d);

// Threads outside the pipeline take the cores the workers (input-bound) or a CPU step need: the
// thread cap to advise, with its evidence added to `d`; none where the cores are not crowded.
std::optional<Recommendation> workers_crowded_out(const Evidence& e, const Costs& c,
                                                  double span_share, double measured,
                                                  Diagnosis& d);
std::optional<Recommendation> step_crowded_out(const Evidence& e, const Costs& c, double wall,
                                               double worker_span_share, double measured,
                                               Diagnosis& d);

}  // namespace feedscope
