#pragma once
// The recommendations the loop's rules make, each with its what-if prediction or the reason it has
// none (loop_advice.cc says how each is derived), and the evidence some of them weigh first.
#include <optional>

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
