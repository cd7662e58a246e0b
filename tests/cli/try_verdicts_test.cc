#include "cli/try_verdicts.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace feedscope {
namespace {

TriedChange tried(const std::string& change, const std::string& setting, std::vector<std::optional<double>> rates) {
  TriedChange c;
  c.change = change;
  c.setting = setting;
  c.why = "why it was tried";
  c.rates = std::move(rates);
  return c;
}

// What try_changes does with a change's runs: its rates over the unchanged runs', then judged.
TriedChange judged(TriedChange c, const std::vector<std::optional<double>>& unchanged) {
  double a = 0, b = 0;
  for (std::size_t i = 0; i < c.rates.size(); ++i)
    if (c.rates[i] && unchanged[i]) {
      a += *c.rates[i];
      b += *unchanged[i];
    }
  if (b > 0) c.speedup = a / b;
  judge_tried_change(c, unchanged);
  return c;
}

TEST(TryVerdictsTest, AGainIsFasterInEveryRoundBeyondTheUnchangedRunsSpread) {
  const std::vector<std::optional<double>> unchanged = {10.0, 11.0};
  const TriedChange gain = judged(tried("-j 2", "num_workers=2", {17.0, 18.0}), unchanged);
  EXPECT_EQ(gain.outcome, "gain");
  ASSERT_TRUE(gain.noise);
  EXPECT_NEAR(*gain.noise, 0.1, 1e-12);
  // nanoGPT's char model, OMP_NUM_THREADS=2: 0.49x.
  EXPECT_EQ(judged(tried("OMP_NUM_THREADS=2", "threads=2", {4.9, 5.4}), unchanged).outcome, "loss");
  // 1.12x where the unchanged runs themselves differ by 20 %: noise, not a gain.
  EXPECT_EQ(judged(tried("-j 3", "num_workers=3", {11.0, 13.6}), {10.0, 12.0}).outcome, "within the noise");
  // One round faster, the other slower: no gain whatever the total says.
  EXPECT_EQ(judged(tried("-j 3", "num_workers=3", {16.0, 10.5}), {10.0, 10.8}).outcome, "within the noise");
  // One round: its noise is not measured, and 1.05x is the bar.
  const TriedChange one = judged(tried("-j 3", "num_workers=3", {10.4}), {10.0});
  EXPECT_EQ(one.outcome, "within the noise");
  EXPECT_FALSE(one.noise);
  EXPECT_EQ(judged(tried("-j 3", "num_workers=3", {std::nullopt}), {10.0}).outcome, "not measured");
}

Recommendation guess(const std::string& action, std::vector<std::string> changes) {
  Recommendation r;
  r.action = action;
  r.basis = "no prediction: not seen from outside";
  r.changes = std::move(changes);
  return r;
}

Recommendation predicted(const std::string& setting, double speedup) {
  Recommendation r;
  r.setting = setting;
  r.action = "Raise " + setting;
  r.predicted_speedup = speedup;
  r.basis = "what-if: the num_workers model";
  return r;
}

ChangeTries tries_of(std::vector<TriedChange> changes) {
  ChangeTries t;
  t.seconds = 20;
  t.rounds = 2;
  t.unit = "samples/s";
  t.unchanged_rates = {10.0, 10.4};
  t.changes = std::move(changes);
  return t;
}

bool says(const Diagnosis& d, const std::string& text) {
  return std::any_of(d.evidence.begin(), d.evidence.end(), [&](const std::string& e) { return e.find(text) != std::string::npos; });
}

TEST(TryVerdictsTest, AMeasuredLossLeavesNoAdviceOfThatChange) {
  Diagnosis d;
  d.verdict = "CPU-bound: the training step is the limit.";
  d.recommendations = {guess("Try giving torch's intra-op pool the idle cores, and measure it", {"threads=2"}),
                       guess("Make the step cheaper", {})};
  const ChangeTries t = tries_of({judged(tried("OMP_NUM_THREADS=2", "threads=2", {4.9, 5.1}), {10.0, 10.4})});
  settle_tried_changes(t, d);
  ASSERT_EQ(d.recommendations.size(), 1u);
  EXPECT_EQ(d.recommendations[0].action, "Make the step cheaper");
  EXPECT_TRUE(says(d, "tried OMP_NUM_THREADS=2: 0.49x: not advised (a loss, measured over 2 trials of 20 s"))
      << ::testing::PrintToString(d.evidence);
}

TEST(TryVerdictsTest, AMeasuredGainReplacesTheGuessAndThePredictionItTested) {
  Diagnosis d;
  d.recommendations = {predicted("num_workers=2", 1.89), guess("Try threads", {"threads=2"}),
                       guess("Make preprocessing cheaper", {})};
  const ChangeTries t = tries_of({judged(tried("-j 2", "num_workers=2", {16.5, 17.2}), {10.0, 10.4}),
                                  judged(tried("OMP_NUM_THREADS=2", "threads=2", {10.1, 10.3}), {10.0, 10.4})});
  settle_tried_changes(t, d);
  ASSERT_EQ(d.recommendations.size(), 2u) << "the measured -j 2 and the cheaper preprocessing";
  const Recommendation& first = d.recommendations[0];
  EXPECT_EQ(first.setting, "-j 2");
  EXPECT_STREQ(basis_kind(first), "measured");
  EXPECT_NEAR(*first.predicted_speedup, 33.7 / 20.4, 1e-9);
  EXPECT_NE(first.action.find("1.65x measured (watch --try, over 2 trials of 20 s against the unchanged command); "
                              "predicted 1.89x from outside"),
            std::string::npos)
      << first.action;
  EXPECT_EQ(d.recommendations[1].action, "Make preprocessing cheaper");
  EXPECT_TRUE(says(d, "tried OMP_NUM_THREADS=2: 1.00x: not advised (within the noise: the unchanged runs varied 4%"))
      << ::testing::PrintToString(d.evidence);
}

TEST(TryVerdictsTest, APredictionALossContradictsGoesAndTheVerdictSaysSo) {
  Diagnosis d;
  d.verdict = "Input-bound: raise num_workers to 2 (predicted 1.22x).";
  d.recommendations = {predicted("num_workers=2", 1.22)};
  settle_tried_changes(tries_of({judged(tried("-j 2", "num_workers=2", {8.9, 9.4}), {10.0, 10.4})}), d);
  EXPECT_TRUE(d.recommendations.empty());
  EXPECT_NE(d.verdict.find("watch --try measured -j 2 at 0.90x (predicted 1.22x): not advised."), std::string::npos)
      << d.verdict;
}

TEST(TryVerdictsTest, GuessesSayTheyWereNotMeasuredWhereNoRateWasRead) {
  Diagnosis d;
  d.recommendations = {guess("Try threads", {"threads=2"}), guess("Make the step cheaper", {})};
  mark_guesses_unmeasured(d);
  EXPECT_EQ(d.recommendations[0].basis.rfind("not measured: the program's rate could not be read; give "
                                             "--throughput-pattern (no prediction",
                                             0),
            0u)
      << d.recommendations[0].basis;
  EXPECT_STREQ(basis_kind(d.recommendations[0]), "not measured");
  EXPECT_EQ(d.recommendations[1].basis, "no prediction: not seen from outside") << "no change a trial makes";
}

TEST(TryVerdictsTest, MeasuredFirstThenPredictedThenTheRest) {
  std::vector<Recommendation> recs = {guess("a guess", {}), predicted("num_workers=3", 1.3)};
  Recommendation small, large;
  small.basis = large.basis = "measured, not predicted";
  small.predicted_speedup = 1.2;
  large.predicted_speedup = 1.8;
  small.action = "small";
  large.action = "large";
  recs.push_back(small);
  recs.push_back(large);
  order_by_basis(recs);
  std::vector<std::string> order;
  for (const Recommendation& r : recs) order.push_back(r.action);
  EXPECT_EQ(order, (std::vector<std::string>{"large", "small", "Raise num_workers=3", "a guess"}));
}

TEST(TryVerdictsTest, WhatARecommendationAdvisesAndWhetherOnlyAsAGuess) {
  Diagnosis d;
  d.recommendations = {guess("Try", {"num_workers=2", "threads=2"})};
  EXPECT_TRUE(only_guessed(d, "threads"));
  EXPECT_EQ(guessed_value(d, "num_workers"), 2);
  EXPECT_FALSE(only_guessed(d, "batch_size"));
  d.recommendations.push_back(predicted("num_workers=3", 1.4));
  EXPECT_FALSE(only_guessed(d, "num_workers")) << "a prediction is no guess";
  Recommendation threads;
  threads.setting = "torch.set_num_threads(4)";
  EXPECT_EQ(changes_advised(threads), std::vector<std::string>{"threads=4"});
  EXPECT_TRUE(advises(threads, "threads"));
}

TEST(TryVerdictsTest, TheOfferedCommandRunsInAShellAsItIs) {
  EXPECT_EQ(shell_command({"feedscope", "watch", "--try=auto", "--", "python3", "main.py", "-j", "1"}),
            "feedscope watch --try=auto -- python3 main.py -j 1");
  EXPECT_EQ(shell_command({"--throughput-pattern", "([0-9.]+) s/batch", "it's"}),
            "--throughput-pattern '([0-9.]+) s/batch' 'it'\\''s'");
}

}  // namespace
}  // namespace feedscope
