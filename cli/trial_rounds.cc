#include "cli/trial_rounds.h"

#include <algorithm>
#include <vector>

#include "sampler/statistics.h"

namespace feedscope {

TrialRounds time_in_rounds(const std::function<void()>& step, const std::function<void()>& drain,
                           int steps, double budget_s, int rounds,
                           const std::function<double()>& now_s) {
  rounds = std::max(rounds, 1);
  const int per_round = std::max(steps / rounds, 1);
  const double round_budget_s = budget_s / rounds;
  const double start = now_s();
  TrialRounds out;
  std::vector<double> per_step;
  for (int r = 0; r < rounds && (r == 0 || now_s() - start < budget_s); ++r) {
    drain();
    const double begin = now_s();
    int done = 0;
    while (done < per_round) {
      step();
      ++done;
      if (now_s() - begin > round_budget_s) break;
    }
    drain();
    per_step.push_back((now_s() - begin) / done);
    out.steps += done;
  }
  out.rounds = static_cast<int>(per_step.size());
  out.median_s = percentile(per_step, 0.5);
  out.min_s = *std::min_element(per_step.begin(), per_step.end());
  out.max_s = *std::max_element(per_step.begin(), per_step.end());
  return out;
}

}  // namespace feedscope
