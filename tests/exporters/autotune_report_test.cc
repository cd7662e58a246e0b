// How a tuned run shows its moves: report.json's autotune, the console lines and report.html.
#include "exporters/autotune_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "exporters/console_report.h"
#include "exporters/html_report.h"
#include "exporters/json_report.h"

namespace feedscope {
namespace autotune_report_test {

Report tuned_report() {
  Report r;
  r.diagnosis.bottleneck = "cpu_preprocess";
  AutotuneSummary a;
  a.moves = {{1.5, {1, 2}, {2, 2}, "the loop waited 40.0% of the time: one worker more",
              {8.5, 0.4}, Measured{14.25, 0.02}, true},
             {4.0, {2, 2}, {2, 4}, "bursts: deeper prefetch", {14.25, 0.06}, Measured{14.3, 0.05}, false},
             {5.5, {2, 4}, {2, 2}, "back: 14.3 -> 14.2 batches/s: no gain beyond the noise (3.0%)",
              {14.3, 0.05}, std::nullopt, true}};
  a.final = {2, 2};
  a.most = {2, 8};
  a.ram_budget_bytes = 512ull << 20;
  a.tunes_workers = a.tunes_prefetch = true;
  r.autotune = a;
  return r;
}

TEST(AutotuneReport, JsonHasTheMovesTheFinalSettingAndTheBounds) {
  const auto j = nlohmann::json::parse(report_to_json(tuned_report()))["autotune"];
  ASSERT_EQ(j["moves"].size(), 3u);
  const auto& m = j["moves"][0];
  EXPECT_EQ(m["t_s"], 1.5);
  EXPECT_EQ(m["from"], (nlohmann::json{{"num_workers", 1}, {"prefetch", 2}}));
  EXPECT_EQ(m["to"], (nlohmann::json{{"num_workers", 2}, {"prefetch", 2}}));
  EXPECT_EQ(m["before"]["batches_per_s"], 8.5);
  EXPECT_EQ(m["before"]["stall"], 0.4);
  EXPECT_EQ(m["after"]["batches_per_s"], 14.25);
  EXPECT_EQ(m["kept"], true);
  EXPECT_FALSE(j["moves"][1]["kept"]);
  EXPECT_TRUE(j["moves"][2]["after"].is_null()) << "not measured is null, not 0";
  EXPECT_EQ(j["final"], (nlohmann::json{{"num_workers", 2}, {"prefetch", 2}}));
  EXPECT_EQ(j["bounds"]["max_workers"], 2);
  EXPECT_EQ(j["bounds"]["max_prefetch"], 8);
  EXPECT_EQ(j["bounds"]["ram_budget_mib"], 512);
}

TEST(AutotuneReport, JsonSaysNullForARunAtFixedSettings) {
  Report r = tuned_report();
  r.autotune.reset();
  const auto j = nlohmann::json::parse(report_to_json(r));
  ASSERT_TRUE(j.contains("autotune"));
  EXPECT_TRUE(j["autotune"].is_null());
}

TEST(AutotuneReport, AMoveIsOneLineWithItsOutcome) {
  const AutotuneSummary a = *tuned_report().autotune;
  EXPECT_EQ(describe_autotune_move(a.moves[0]),
            "autotune 1.5 s: num_workers 1 -> 2: kept, 8.5 -> 14.2 batches/s, stall 40.0% -> 2.0% "
            "(the loop waited 40.0% of the time: one worker more)");
  EXPECT_EQ(describe_autotune_move(a.moves[1]).rfind("autotune 4.0 s: prefetch 2 -> 4: no gain, ", 0), 0u);
  EXPECT_EQ(describe_autotune_move(a.moves[2]),
            "autotune 5.5 s: prefetch 4 -> 2: back: 14.3 -> 14.2 batches/s: no gain beyond the noise (3.0%)");
  TunerMove unjudged = a.moves[1];
  unjudged.after.reset();
  EXPECT_NE(describe_autotune_move(unjudged).find("not measured (the run ended first)"), std::string::npos);
}

TEST(AutotuneReport, ConsoleGivesTheYamlThatFixesTheFinalSetting) {
  EXPECT_EQ(autotune_yaml({3, 4}), "num_workers: 3\nprefetch: 4\n");
  const std::string text = format_console_report(tuned_report(), false);
  EXPECT_NE(text.find("autotune: 3 move(s), ended at num_workers=2 prefetch=2"), std::string::npos) << text;
  EXPECT_NE(text.find("    num_workers: 2\n    prefetch: 2\n"), std::string::npos) << text;
  Report fixed = tuned_report();
  fixed.autotune.reset();
  EXPECT_EQ(format_console_report(fixed, false).find("autotune"), std::string::npos);
}

TEST(AutotuneReport, HtmlTablesTheMovesAndMarksThemOnTheTimeline) {
  UtilizationSample u;
  u.time_ns = 0;
  u.cpu_system_ratio = 0.5;
  UtilizationSample v = u;
  v.time_ns = 10'000'000'000;
  const std::string html = report_to_html(tuned_report(), {u, v}, 0);
  EXPECT_NE(html.find("Loader tuning (num_workers=auto)"), std::string::npos);
  EXPECT_NE(html.find("num_workers: 2\nprefetch: 2"), std::string::npos);
  EXPECT_NE(html.find("class=\"mark\""), std::string::npos);
  EXPECT_NE(html.find(">w2<"), std::string::npos);
  EXPECT_NE(html.find(">p4<"), std::string::npos);
  Report fixed = tuned_report();
  fixed.autotune.reset();
  EXPECT_EQ(report_to_html(fixed, {u, v}, 0).find("class=\"mark\""), std::string::npos);
}

}  // namespace autotune_report_test
}  // namespace feedscope
