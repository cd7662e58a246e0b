#include "profiler/worker_churn.h"

namespace feedscope {

void WorkerChurnTracker::end_startup() {
  if (!in_startup_) return;
  in_startup_ = false;
  if (churn_.generations == 1) {
    churn_.first_startup_s = startup_wait_s_;
  } else {
    churn_.restart_wait_s += startup_wait_s_;
    ++churn_.restarts_measured;
  }
}

void WorkerChurnTracker::add(double t_s, double dt_s, int alive, int started, const MainThreadWaits* looks) {
  last_s_ = t_s;
  if (started > 0) {
    if (churn_.generations == 0 || alive - started <= 0) {
      // A start-up the thread never came out of (its workers ended first) counts as it stood.
      end_startup();
      ++churn_.generations;
      // The workers started between the previous reading and this one.
      generation_start_s_ = t_s - dt_s / 2;
      if (churn_.generations == 1) churn_.first_start_s = generation_start_s_;
      in_startup_ = true;
      startup_wait_s_ = 0;
    }
    churn_.workers_started += started;
  }
  if (looks == nullptr || looks->looks == 0 || alive == 0) return;
  const double on_loader = static_cast<double>(looks->on_loader()) / static_cast<double>(looks->looks);
  churn_.wait_s += dt_s * on_loader;
  churn_.looks += looks->looks;
  if (!in_startup_) return;
  startup_wait_s_ += dt_s * on_loader;
  // Most of the looks found it working: its first batch has come.
  if (on_loader < 0.5) end_startup();
}

std::optional<WorkerChurn> WorkerChurnTracker::summary() const {
  if (churn_.generations == 0) return std::nullopt;
  WorkerChurn out = churn_;
  out.span_s = last_s_ - out.first_start_s;
  return out;
}

}  // namespace feedscope
