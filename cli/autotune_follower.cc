#include "cli/autotune_follower.h"

#include <algorithm>

#include "exporters/autotune_report.h"

namespace feedscope {

AutotuneFollower::AutotuneFollower(const BatchLoader& loader, Trainer* trainer,
                                   MetricsExporter* metrics, int step_cores,
                                   std::int64_t origin_ns, std::ostream& log)
    : loader_(loader), trainer_(trainer), metrics_(metrics), step_cores_(step_cores),
      shift_s_(static_cast<double>(loader.autotune_start_ns() - origin_ns) / 1e9), log_(log),
      last_(loader.setting()) {
  if (metrics_) metrics_->set_loader_setting(last_.num_workers, last_.prefetch);
  if (loader_.autotuned()) follow(last_);
}

void AutotuneFollower::follow(LoaderSetting now) {
  last_ = now;
  if (metrics_) metrics_->set_loader_setting(now.num_workers, now.prefetch);
  if (trainer_ && step_cores_ > 0) trainer_->set_step_threads(std::max(1, step_cores_ - now.num_workers));
}

void AutotuneFollower::poll() {
  if (!loader_.autotuned()) return;
  if (const LoaderSetting now = loader_.setting(); !(now == last_)) follow(now);
  const std::vector<TunerMove>& moves = loader_.autotune_moves();
  // A trial is written once judged (its `after` measured); a move back carries its judgement.
  while (printed_ < moves.size() &&
         (moves[printed_].after || moves[printed_].why.rfind("back:", 0) == 0))
    log_ << "feedscope: " << describe_autotune_move(timed(moves[printed_++])) << std::endl;
}

TunerMove AutotuneFollower::timed(TunerMove move) const {
  move.t_s += shift_s_;
  return move;
}

std::optional<AutotuneSummary> AutotuneFollower::summary() const {
  if (!loader_.autotuned()) return std::nullopt;
  const LoaderCapacity& c = loader_.capacity();
  AutotuneSummary s;
  for (const TunerMove& m : loader_.autotune_moves()) s.moves.push_back(timed(m));
  s.final = loader_.setting();
  // A trial the run ended before measuring is not where the tuner settled.
  if (!s.moves.empty() && !s.moves.back().after && s.moves.back().why.rfind("back:", 0) != 0)
    s.final = s.moves.back().from;
  s.most = c.most;
  s.ram_budget_bytes = c.ram_budget_bytes;
  s.tunes_workers = c.tuner.max_workers > c.tuner.min_workers;
  s.tunes_prefetch = c.tuner.max_prefetch > c.tuner.min_prefetch;
  return s;
}

}  // namespace feedscope
