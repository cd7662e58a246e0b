// Loader workers started again at every epoch (profiler/worker_churn.h), whose start-up the
// training thread waits for: the wait that persistent_workers=True takes away.
#include <algorithm>
#include <string>

#include "profiler/detail/format.h"
#include "profiler/diagnosis.h"
#include "profiler/rules/rules.h"
#include "profiler/watch_diagnosis.h"

namespace feedscope::rules {

using detail::fmt;

bool tree_worker_churn(const Facts& f, Diagnosis& d) {
  const std::optional<WorkerChurn>& churn = f.e.tree->worker_churn;
  if (!churn || churn->restarts_measured < kChurnMinRestarts || churn->span_s <= 0) return false;
  const WorkerChurn& c = *churn;
  const double share = c.restart_wait_s / c.span_s;
  const double each = c.restart_wait_s / c.restarts_measured;
  if (share < kModeratelyInputBound || c.restart_wait_s < kChurnExplainsWait * c.wait_s ||
      each < kChurnMinStartupS || c.looks < kMinQueueLooks)
    return false;
  d.bottleneck = "cpu_preprocess";
  d.verdict = fmt("Input-bound: the DataLoader starts its loader workers again at every epoch (%d "
                  "sets in %.0f s, one every %.1f s: persistent_workers is off), and the training "
                  "thread waits %.2f s for each new set's first batch: %.0f%% of the run, %.0f%% of "
                  "its wait for data.",
                  c.generations, c.span_s, c.span_s / c.generations, each, 100 * share,
                  100 * c.restart_wait_s / std::max(c.wait_s, 1e-9));
  d.evidence.push_back(fmt("%d loader worker processes started in %d sets; beyond the %.0f%% of the "
                           "time it waits once the workers run, the training thread waited %s for "
                           "the first set's first batch and %.2f s for the %d later ones' (%.2f s "
                           "each), of %.2f s it waited on its loader in all (its looks, measured "
                           "from outside)",
                           c.workers_started, c.generations, 100 * c.steady_wait_share.value_or(0),
                           c.first_startup_s ? fmt("%.2f s", *c.first_startup_s).c_str() : "(not measured)",
                           c.restart_wait_s, c.restarts_measured, each, c.wait_s));
  Recommendation r;
  r.setting = "persistent_workers=True";
  r.changes = {"persistent_workers=1"};  // what watch --try measures, and settles this advice with
  r.action = "Keep the workers across epochs: DataLoader(..., persistent_workers=True). Each epoch "
             "then starts with its workers running, not with new processes starting (their "
             "imports, worker_init_fn, the dataset's files) before its first batch. `watch --try` "
             "measures it from outside, where the command line has no flag for it.";
  r.predicted_speedup = c.span_s / std::max(c.span_s - c.restart_wait_s, 1e-9);
  r.basis = fmt("what-if: the %d later sets' start-up waits (%.2f s of the %.1f s since the first "
                "set started) go: %.1f / (%.1f - %.2f); at most that, as each epoch's first batch "
                "is still loaded; sure to the extent the start-up is the workers' own (processes, "
                "imports, worker_init_fn), not the dataset's per-epoch work: medium",
                c.restarts_measured, c.restart_wait_s, c.span_s, c.span_s, c.span_s, c.restart_wait_s);
  d.recommendations.push_back(std::move(r));
  return true;
}

}  // namespace feedscope::rules
