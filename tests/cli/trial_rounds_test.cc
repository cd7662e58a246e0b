#include "cli/trial_rounds.h"

#include <gtest/gtest.h>

namespace feedscope {
namespace {

// A clock the steps move: each step takes 2 ms, but for the stalls asked for.
struct FakeSteps {
  double now = 100;
  int taken = 0;
  std::function<double(int)> cost = [](int) { return 0.002; };
  std::function<void()> step() {
    return [this] { now += cost(taken++); };
  }
  std::function<double()> clock() {
    return [this] { return now; };
  }
};

TEST(TrialRoundsTest, OneStallMovesOneRoundNotTheFigure) {
  FakeSteps s;
  s.cost = [](int i) { return i == 130 ? 0.5 : 0.002; };  // a moment of noise in the third round
  const TrialRounds t = time_in_rounds(s.step(), [] {}, 250, 60, 5, s.clock());
  EXPECT_EQ(t.rounds, 5);
  EXPECT_EQ(t.steps, 250);
  EXPECT_NEAR(t.median_s, 0.002, 1e-12);
  EXPECT_NEAR(t.min_s, 0.002, 1e-12);
  EXPECT_NEAR(t.max_s, (49 * 0.002 + 0.5) / 50, 1e-12);
  // The mean of one timed stretch would have read the stall into the step: 0.004 s.
  EXPECT_GT((250 * 0.002 + 0.498) / 250, 1.9 * t.median_s);
}

TEST(TrialRoundsTest, TheBudgetEndsARoundAndStopsTheRest) {
  FakeSteps s;
  s.cost = [](int) { return 0.09; };
  // 1000 steps asked in 5 rounds, 1 s in all: each round stops past its 0.2 s, and a round starts
  // only while the budget lasts.
  const TrialRounds t = time_in_rounds(s.step(), [] {}, 1000, 1.0, 5, s.clock());
  EXPECT_EQ(t.rounds, 4) << "rounds of 3 steps (0.27 s) each: the fifth would start at 1.08 s";
  EXPECT_EQ(t.steps, 12);
  EXPECT_NEAR(t.median_s, 0.09, 1e-9);
}

TEST(TrialRoundsTest, EachRoundIsDrainedAtBothEnds) {
  FakeSteps s;
  int drains = 0;
  const TrialRounds t = time_in_rounds(s.step(), [&] { ++drains; }, 9, 60, 3, s.clock());
  EXPECT_EQ(drains, 6);
  EXPECT_EQ(t.rounds, 3);
  EXPECT_EQ(t.steps, 9);
  const TrialRounds one = time_in_rounds(s.step(), [] {}, 0, 60, 0, s.clock());
  EXPECT_EQ(one.rounds, 1) << "at least one round of one step";
  EXPECT_EQ(one.steps, 1);
}

}  // namespace
}  // namespace feedscope
