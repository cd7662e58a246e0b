// A GPU idle between its kernels while the training thread works: the host's own work (Python, the
// framework's dispatch, Inductor's launches of compiled code) sets the pace, whatever the launch
// calls CUPTI timed say (under sampled tracing Triton's driver launches and Inductor's Python
// launch path are not among them).
#include <algorithm>
#include <string>

#include "profiler/detail/format.h"
#include "profiler/diagnosis.h"
#include "profiler/rules/loop_advice.h"
#include "profiler/rules/rules.h"
#include "profiler/watch_diagnosis.h"

namespace feedscope {

using detail::fmt;

void host_dispatch_finding(const GpuTraceSummary& g, double working, double loader_pace, Diagnosis& d) {
  const double busy = gpu_work_share(g);
  const bool graphs = graphed(g);
  d.bottleneck = graphs ? "cpu_compute" : "launch_overhead";
  const std::string timed =
      g.launch_calls > g.launches_without_call
          ? fmt("; the launch calls CUPTI timed take %.0f%% of it", 100 * launch_host_share(g))
          : std::string();
  const char* whose = graphs ? "Python and the optimizer between the graph replays"
                      : g.triton_kernels > 0 ? "Python, the framework's dispatch, Inductor's launches of its Triton kernels"
                                    : "Python, the framework's dispatch";
  d.verdict = fmt("Host-bound: the GPU is busy only %.0f%% of the time and idle between its kernels "
                  "%.0f%% of it, while the training thread works %.0f%%: the host's own work (%s) "
                  "sets the pace, not the GPU%s.",
                  100 * busy, 100 * g.gap_share, 100 * working, whose, timed.c_str());
  Recommendation r;
  if (graphs) {
    r.setting = "batch_size";
    r.action = "Raise the batch size: the step's kernels come from graph replays already, and the "
               "host's work between them (Python, the optimizer) costs about the same at any batch.";
    r.basis = fmt("no prediction: how the step grows with the batch is not measured; at most "
                  "%.2fx, the GPU's busy share (%.0f%%) filled",
                  1 / std::max(busy, 0.01), 100 * busy);
    d.recommendations.push_back(std::move(r));
    return;
  }
  // With the dispatch in one graph replay, the loop runs at the longer of the GPU's work and what
  // the training thread did besides working (its waits, which a graph does not remove).
  const double after = std::max({busy, 1 - working, 0.01});
  r.setting = "torch.compile(mode=\"reduce-overhead\")";
  r.action = fmt("Capture the step in CUDA graphs: torch.compile(mode=\"reduce-overhead\") (or "
                 "torch.cuda.CUDAGraph), so that one replay launches the %.0f kernels a second the "
                 "host now dispatches one by one; or raise the batch size, whose dispatch costs the "
                 "same.",
                 static_cast<double>(g.kernels) / std::max(g.step_wall_s, 1e-9));
  r.basis = fmt("what-if: the training thread's dispatch (it works %.0f%% of the time) goes into one "
                "replay a step; the loop then runs at the longer of the GPU's work (busy %.0f%%) and "
                "the thread's time not working (%.0f%%): 1 / max(%.2f, %.2f); at most %.2fx, the "
                "GPU's busy share; sure to the extent the step captures whole (no sync or CPU tensor "
                "in it) and the thread's work is the dispatch: low",
                100 * working, 100 * busy, 100 * (1 - working), busy, 1 - working,
                1 / std::max(busy, 0.01));
  r.predicted_speedup = 1 / after;
  if (loader_pace > 0 && loader_pace < *r.predicted_speedup) {
    r.predicted_speedup = loader_pace;
    r.basis += fmt("; capped at %.2fx by the loader workers, busy %.0f%% of a core each", loader_pace,
                   100 / loader_pace);
  }
  d.recommendations.push_back(std::move(r));
}

namespace rules {

bool tree_gpu_host_dispatch(const Facts& f, Diagnosis& d) {
  const TreeFacts& T = *f.tree;
  if (!T.traced || T.workers_busy || T.working < kHostBusy) return false;
  // A loop waiting for its data is the input's (the rules after this one).
  if (T.queue_stall && *T.queue_stall >= kModeratelyInputBound) return false;
  if (f.e.printed && f.e.printed->share && *f.e.printed->share >= kModeratelyInputBound) return false;
  const GpuTraceSummary& g = *f.e.gpu_trace;
  if (gpu_work_share(g) >= kGpuMostlyIdle || g.gap_share < kHostGapShare ||
      sync_share(g) >= kSyncWaitDominant || g.h2d_share >= kH2dStepShare)
    return false;
  host_dispatch_finding(g, T.working, T.loader_pace, d);
  return true;
}

}  // namespace rules

}  // namespace feedscope
