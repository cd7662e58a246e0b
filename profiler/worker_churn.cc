#include "profiler/worker_churn.h"

#include <algorithm>

namespace feedscope {

namespace {

// Looks that found the thread waiting on its loader at least this often: it is blocked, waiting
// for a batch, not stepping between batches.
constexpr double kBlocked = 0.9;

}  // namespace

void WorkerChurnTracker::add(double t_s, double dt_s, int alive, int started, const MainThreadWaits* looks) {
  last_s_ = t_s;
  if (started > 0) {
    if (churn_.generations == 0 || alive - started <= 0) {
      ++churn_.generations;
      // The workers started between the previous reading and this one.
      generation_start_s_ = t_s - dt_s / 2;
      if (churn_.generations == 1) churn_.first_start_s = generation_start_s_;
      startups_.emplace_back();
    }
    churn_.workers_started += started;
  }
  if (looks == nullptr || looks->looks == 0 || alive == 0) return;
  const double on_loader = static_cast<double>(looks->on_loader()) / static_cast<double>(looks->looks);
  churn_.wait_s += dt_s * on_loader;
  churn_.looks += looks->looks;
  Startup* s = startups_.empty() ? nullptr : &startups_.back();
  if (s == nullptr || s->ended) {
    steady_s_ += dt_s;
    steady_wait_s_ += dt_s * on_loader;
  } else if (on_loader >= kBlocked) {
    s->blocked_s += dt_s;
    s->blocked_wait_s += dt_s * on_loader;
  } else {  // its first batch came within this reading
    s->ended = true;
    s->end_s = dt_s;
    s->end_share = on_loader;
  }
}

std::optional<WorkerChurn> WorkerChurnTracker::summary() const {
  if (churn_.generations == 0) return std::nullopt;
  WorkerChurn out = churn_;
  out.span_s = last_s_ - out.first_start_s;
  if (steady_s_ <= 0) return out;  // never outside a start-up: no steady wait to measure it by
  const double steady = steady_wait_s_ / steady_s_;
  out.steady_wait_share = steady;
  for (std::size_t g = 0; g < startups_.size(); ++g) {
    const Startup& s = startups_[g];
    if (s.blocked_s <= 0 && !s.ended) continue;  // not looked at
    const double beyond = std::max(0.0, s.blocked_wait_s - steady * s.blocked_s) +
                          s.end_s * std::max(0.0, s.end_share - steady);
    if (g == 0) {
      out.first_startup_s = beyond;
    } else {
      out.restart_wait_s += beyond;
      ++out.restarts_measured;
    }
  }
  return out;
}

}  // namespace feedscope
