#include "cli/autotune_follower.h"

#include <algorithm>

#include "exporters/autotune_report.h"

namespace feedscope {

AutotuneFollower::AutotuneFollower(const BatchLoader& loader, Trainer* trainer,
                                   MetricsExporter* metrics, int step_cores,
                                   std::int64_t origin_ns, std::ostream& log)
    : loader_(loader), trainer_(trainer), metrics_(metrics), step_cores_(step_cores),
      shift_s_(static_cast<double>(loader.autotune_start_ns() - origin_ns) / 1e9), log_(log),
      last_(loader.setting()), workers_(last_.num_workers) {
  if (metrics_) metrics_->set_loader_setting(last_.num_workers, last_.prefetch);
  if (loader_.autotuned()) follow(last_);
}

void AutotuneFollower::follow(LoaderSetting now) {
  last_ = now;
  workers_.store(now.num_workers, std::memory_order_relaxed);
  if (metrics_) metrics_->set_loader_setting(now.num_workers, now.prefetch);
  if (trainer_ && step_cores_ > 0) trainer_->set_step_threads(std::max(1, step_cores_ - now.num_workers));
}

void AutotuneFollower::poll() {
  if (!loader_.autotuned()) return;
  if (const LoaderSetting now = loader_.setting(); !(now == last_)) follow(now);
  const std::vector<TunerMove>& moves = loader_.autotune_moves();
  while (printed_ < moves.size() && autotune_move_judged(moves[printed_]))
    log_ << "feedscope: " << describe_autotune_move(timed(moves[printed_++])) << std::endl;
}

TunerMove AutotuneFollower::timed(TunerMove move) const {
  move.t_s += shift_s_;
  return move;
}

std::optional<AutotuneSummary> AutotuneFollower::summary() const {
  return autotune_summary(loader_, shift_s_);
}

}  // namespace feedscope
