#pragma once
// A what-if trial's step time, robust to a moment of the machine's noise: the timed steps run in
// rounds and the trial's figure is the median of the rounds' means. One stall (another process
// taking the cores for a moment, a page-cache flush) moves one round, not the figure: a single
// timed stretch read a CPU step 33 % fast once and 29 % slow another time on the H200.
#include <functional>

namespace feedscope {

struct TrialRounds {
  double median_s = 0;  // the median of the rounds' seconds per step
  double min_s = 0, max_s = 0;
  int rounds = 0;  // rounds timed (fewer than asked where the budget ran out)
  int steps = 0;   // steps timed, all rounds together
};

// Times `step` in up to `rounds` rounds of `steps / rounds` steps each (at least 1), every round
// drained at both ends (`drain`: a device's queue), the whole within about `budget_s`: a round
// ends early at its share of the budget, and no round starts once the budget is spent (the first
// always runs). `now_s` is the clock (tests pass their own).
TrialRounds time_in_rounds(const std::function<void()>& step, const std::function<void()>& drain,
                           int steps, double budget_s, int rounds,
                           const std::function<double()>& now_s);

}  // namespace feedscope
