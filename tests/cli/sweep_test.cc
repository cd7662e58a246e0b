#include "cli/sweep.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "cli/sweep_command.h"

namespace feedscope {
namespace {

Report fake_report(double samples_per_s, const std::string& bottleneck) {
  Report r;
  r.throughput.samples_per_s = samples_per_s;
  r.diagnosis.bottleneck = bottleneck;
  r.diagnosis.data_stall_ratio = 0.1;
  r.diagnosis.data_stall_source = "wait spans";
  r.environment.device = "cpu";
  return r;
}

TEST(SweepGridTest, ParsesListsDropsDuplicatesAndKeepsOrder) {
  const SweepGrid g = parse_grid({{"num_workers", "2, 0,1,2"}, {"batch_size", "64"},
                                  {"pin_memory", "on,off"}});
  EXPECT_EQ(g.num_workers, (std::vector<std::int64_t>{2, 0, 1}));
  EXPECT_EQ(g.batch_size, (std::vector<std::int64_t>{64}));
  EXPECT_TRUE(g.prefetch.empty());
  EXPECT_EQ(g.pin_memory, (std::vector<bool>{true, false}));
}

TEST(SweepGridTest, BadValuesNameTheKeyAndTheValue) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"num_workers", "0,1,-1", "'-1'"},   {"num_workers", "0,two", "'two'"},
      {"batch_size", "32,0", "'0'"},       {"prefetch", "1,,2", "empty item"},
      {"pin_memory", "on,maybe", "'maybe'"}, {"batch_size", "64,", "empty item"},
      {"num_workers", "1,auto", "is not a sweep point"}, {"prefetch", "auto", "--prefetch auto"},
  };
  for (const auto& [key, text, named] : cases) {
    try {
      parse_grid({{key, text}});
      ADD_FAILURE() << key << "=" << text << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), key);
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_grid({{"lr", "0.1,0.2"}}), ConfigError);
}

TEST(SweepGridTest, TheThreadCountIsAKnobNamedOnlyWhereVaried) {
  const SweepGrid g = parse_grid({{"cpu_threads", "1,2,2"}, {"num_workers", "0,1"}});
  EXPECT_EQ(g.cpu_threads, (std::vector<std::int64_t>{1, 2}));
  RunConfig base;
  const auto points = grid_points(base, g);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[1].cpu_threads, 2) << "the last key varies fastest";
  EXPECT_EQ(knobs_label(points[1], {"num_workers", "cpu_threads"}), "num_workers=0 cpu_threads=2");
  EXPECT_EQ(knobs_label(base, {"cpu_threads"}), "cpu_threads=default");
  EXPECT_EQ(all_knobs().size(), 4u) << "the loader's four; threads only where named";
  EXPECT_THROW(parse_grid({{"cpu_threads", "0,-1"}}), ConfigError);
}

TEST(SweepGridTest, PointsAreTheFullProductEachOnce) {
  RunConfig base;
  base.prefetch = 3;
  const SweepGrid g = parse_grid({{"num_workers", "0,1,2,4"}, {"batch_size", "32,64,128"},
                                  {"pin_memory", "on,off"}});
  const std::vector<RunConfig> points = grid_points(base, g);
  ASSERT_EQ(points.size(), 4u * 3u * 2u);
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, bool>> seen;
  for (const RunConfig& c : points) {
    EXPECT_EQ(c.prefetch, 3) << "an unswept knob keeps the base value";
    EXPECT_TRUE(seen.insert({c.num_workers, c.batch_size, c.prefetch, c.pin_memory}).second);
  }
}

TEST(SweepTest, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

TEST(SweepTest, EachPointKeepsTheMedianOfItsRepeatsAndThatRunsBottleneck) {
  RunConfig base;
  const SweepGrid g = parse_grid({{"num_workers", "1,2"}});
  // Per point, the repeats return these in turn; the outlier must not move the median.
  std::map<std::int64_t, std::vector<std::pair<double, std::string>>> plan = {
      {1, {{100, "cpu_preprocess"}, {900, "cpu_compute"}, {110, "storage_io"}}},
      {2, {{200, "cpu_compute"}, {210, "cpu_compute"}, {190, "cpu_preprocess"}}}};
  std::map<std::int64_t, int> calls;
  SweepOptions o;
  o.repeats = 3;
  o.slab_bytes = [](std::int64_t batch) { return static_cast<std::uint64_t>(batch) * 1000; };
  const SweepResult r = run_sweep(base, g, o, [&](const RunConfig& c) {
    const auto& [sps, bottleneck] = plan[c.num_workers][static_cast<std::size_t>(calls[c.num_workers]++)];
    return fake_report(sps, bottleneck);
  });
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_EQ(calls[1], 3);
  EXPECT_DOUBLE_EQ(r.points[0].median_samples_per_s, 110);
  EXPECT_EQ(r.points[0].bottleneck, "storage_io");
  EXPECT_EQ(r.points[0].samples_per_s.size(), 3u);
  EXPECT_DOUBLE_EQ(r.points[1].median_samples_per_s, 200);
  EXPECT_EQ(r.points[1].bottleneck, "cpu_compute");
  EXPECT_EQ(r.points[1].host_bytes, loader_host_bytes(grid_points(base, g)[1], 64000));
  EXPECT_EQ(r.best, 1);
  EXPECT_TRUE(r.interrupted.empty());
}

TEST(SweepTest, BestAndTheSmallestWithinFivePercent) {
  SweepResult r;
  const auto add = [&](std::int64_t nw, double sps, std::uint64_t bytes) {
    SweepPoint p;
    p.num_workers = nw;
    p.median_samples_per_s = sps;
    p.host_bytes = bytes;
    r.points.push_back(p);
  };
  add(1, 500, 10);
  add(2, 960, 30);   // within 5 % of the best, fewer workers: the economical choice
  add(2, 970, 20);   // same workers, less memory, faster: preferred over the previous
  add(4, 1000, 50);  // best
  add(3, 990, 40);
  choose_best(r);
  EXPECT_EQ(r.best, 3);
  EXPECT_EQ(r.economical, 2);
  r.points[3].median_samples_per_s = 2000;  // now nothing else is within 5 %
  choose_best(r);
  EXPECT_EQ(r.economical, 3);
  for (SweepPoint& p : r.points) p.median_samples_per_s = 0;  // every run failed
  choose_best(r);
  EXPECT_EQ(r.best, -1) << "a point that measured no rate is no choice";
  EXPECT_EQ(r.economical, -1);
}

TEST(SweepTest, StopBetweenRunsKeepsTheCompletedPoints) {
  RunConfig base;
  const SweepGrid g = parse_grid({{"num_workers", "0,1,2,3"}});
  int runs = 0;
  SweepOptions o;
  o.repeats = 2;
  o.stop_requested = [&] { return runs == 5; };  // mid-way through the third point
  const SweepResult r = run_sweep(base, g, o, [&](const RunConfig& c) {
    ++runs;
    return fake_report(100.0 * static_cast<double>(c.num_workers + 1), "cpu_preprocess");
  });
  EXPECT_EQ(r.interrupted, "SIGINT");
  EXPECT_EQ(r.planned, 4u);
  ASSERT_EQ(r.points.size(), 2u) << "the half-measured third point is dropped";
  EXPECT_EQ(r.best, 1);
  const auto csv = sweep_csv(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;
  const auto j = nlohmann::json::parse(sweep_json(r, base));
  EXPECT_EQ(j["interrupted"], "SIGINT");
  EXPECT_EQ(j["completed_points"], 2);
  EXPECT_EQ(j["planned_points"], 4);
}

TEST(SweepTest, AnInterruptedRunEndsTheSweepWithoutCountingIt) {
  RunConfig base;
  const SweepGrid g = parse_grid({{"num_workers", "0,1,2"}});
  SweepOptions o;
  o.repeats = 1;
  const SweepResult r = run_sweep(base, g, o, [&](const RunConfig& c) {
    Report rep = fake_report(100, "cpu_compute");
    if (c.num_workers == 1) rep.interrupted = "SIGTERM";
    return rep;
  });
  EXPECT_EQ(r.interrupted, "SIGTERM");
  EXPECT_EQ(r.points.size(), 1u);
}

TEST(SweepTest, OutputsCarryEveryPoint) {
  RunConfig base;
  const SweepGrid g = parse_grid({{"num_workers", "0,1"}, {"batch_size", "32,64"}});
  SweepOptions o;
  o.repeats = 1;
  const SweepResult r = run_sweep(base, g, o, [&](const RunConfig& c) {
    return fake_report(static_cast<double>(c.num_workers * 1000 + c.batch_size), "cpu_<preprocess>");
  });
  const std::string csv = sweep_csv(r);
  EXPECT_NE(csv.find("1,64,2,on,1064.00,1,1064.00,"), std::string::npos) << csv;
  const std::string html = sweep_report_html(r);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("1064/s"), std::string::npos);
  EXPECT_NE(html.find("cpu_&lt;preprocess&gt;"), std::string::npos) << "names are escaped";
  EXPECT_EQ(html.find("cpu_<preprocess>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos) << "self-contained, no script";
  const std::string table = sweep_table(r);
  EXPECT_NE(table.find("<- best"), std::string::npos);
  const std::string yaml = yaml_snippet(r.points[static_cast<std::size_t>(r.best)]);
  EXPECT_EQ(yaml, "num_workers: 1\nbatch_size: 64\nprefetch: 2\npin_memory: true\n");
  RunConfig applied;
  apply_yaml(applied, yaml, "snippet");  // the snippet is a valid config
  EXPECT_EQ(applied.num_workers, 1);
  EXPECT_EQ(applied.batch_size, 64);
}

TEST(SweepTest, RepeatsAgreeWhenTheirSpreadIsWithinTheToleranceOfTheirMedian) {
  EXPECT_FALSE(repeats_agree({100}, 0.03)) << "one run agrees with nothing";
  EXPECT_TRUE(repeats_agree({100, 102}, 0.03));
  EXPECT_FALSE(repeats_agree({100, 104}, 0.03));
  EXPECT_TRUE(repeats_agree({0, 0}, 0.03)) << "a program failing twice";
  EXPECT_FALSE(repeats_agree({100, 100}, 0)) << "0: every repeat runs";
}

TEST(SweepTest, APointStopsRepeatingOnceItsRepeatsAgree) {
  RunConfig base;
  const SweepGrid g = parse_grid({{"num_workers", "1,2"}});
  // Point 1 agrees after two runs; point 2 never does and runs all five.
  std::map<std::int64_t, std::vector<double>> plan = {{1, {100, 101, 500, 500, 500}},
                                                      {2, {100, 200, 150, 300, 120}}};
  std::map<std::int64_t, std::size_t> calls;
  std::vector<std::size_t> totals;
  SweepOptions o;
  o.repeats = 5;
  o.on_progress = [&](const SweepProgress& p) { totals.push_back(p.runs_total); };
  const SweepResult r = run_sweep(base, g, o, [&](const RunConfig& c) {
    return fake_report(plan[c.num_workers][calls[c.num_workers]++], "cpu_compute");
  });
  EXPECT_EQ(calls[1], 2u);
  EXPECT_EQ(calls[2], 5u);
  EXPECT_DOUBLE_EQ(r.points[0].median_samples_per_s, 100.5);
  EXPECT_EQ(r.points[1].samples_per_s.size(), 5u);
  EXPECT_EQ(totals.front(), 10u);
  EXPECT_EQ(totals.back(), 7u) << "the skipped repeats leave the total";
}

// A user's program that receives only {num_workers}: no prefetch, pin_memory or batch size of
// feedscope's own in what the sweep shows, and no slab memory it cannot know.
TEST(SweepTest, AProgramsSweepShowsOnlyTheKnobsItReceives) {
  RunConfig base;
  const SweepGrid g = parse_grid({{"num_workers", "0,2"}});
  SweepOptions o;
  o.repeats = 1;
  o.knobs = {"num_workers"};
  o.command = {"python3", "train.py", "-j", "{num_workers}", "-b", "16"};
  const SweepResult r = run_sweep(base, g, o, [&](const RunConfig& c) {
    return fake_report(100.0 + static_cast<double>(c.num_workers), "cpu_preprocess");
  });
  const std::string table = sweep_table(r);
  EXPECT_NE(table.find("workers"), std::string::npos) << table;
  for (const char* absent : {"prefetch", "pin", "batch", "host MiB"})
    EXPECT_EQ(table.find(absent), std::string::npos) << absent << "\n" << table;
  EXPECT_EQ(r.points[1].label(r.knobs), "num_workers=2");
  EXPECT_EQ(yaml_snippet(r.points[1], r.knobs), "num_workers: 2\n");
  const std::string csv = sweep_csv(r);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "num_workers,median_samples_per_s,repeats,samples_per_s,bottleneck,data_stall_ratio,pinned");
  const auto j = nlohmann::json::parse(sweep_json(r, base));
  EXPECT_EQ(j["knobs"], nlohmann::json::array({"num_workers"}));
  EXPECT_EQ(j["command"][3], "{num_workers}");
  EXPECT_FALSE(j.contains("base_config")) << "feedscope's own config is not the program's";
  EXPECT_FALSE(j["points"][0].contains("prefetch"));
  EXPECT_FALSE(j["points"][0].contains("batch_size"));
  EXPECT_TRUE(j["points"][0]["host_bytes"].is_null());
  const std::string html = sweep_report_html(r);
  EXPECT_EQ(html.find("pin_memory"), std::string::npos);
  EXPECT_EQ(html.find("batch 64"), std::string::npos);
}

TEST(SweepTest, ItersPerSecondAreNamedSoAndUnmeasuredStallsAreNull) {
  RunConfig base;
  const SweepGrid g = parse_grid({{"num_workers", "0,1"}});
  SweepOptions o;
  o.repeats = 1;
  o.knobs = {"num_workers"};
  o.by_iterations = true;
  const SweepResult r = run_sweep(base, g, o, [&](const RunConfig& c) {
    Report rep;
    rep.throughput.batches_per_s = 5.0 + static_cast<double>(c.num_workers);
    rep.diagnosis.bottleneck = "cpu_compute";  // a watch without spans: no stall measured
    return rep;
  });
  EXPECT_EQ(r.unit, "it/s");
  EXPECT_DOUBLE_EQ(r.points[1].median_samples_per_s, 6.0);
  EXPECT_FALSE(r.points[1].data_stall_ratio);
  EXPECT_NE(sweep_table(r).find("it/s"), std::string::npos);
  const auto j = nlohmann::json::parse(sweep_json(r, base));
  EXPECT_EQ(j["unit"], "it/s");
  EXPECT_DOUBLE_EQ(j["points"][1]["median_iterations_per_s"].get<double>(), 6.0);
  EXPECT_TRUE(j["points"][1]["data_stall_ratio"].is_null());
  EXPECT_NE(sweep_csv(r).find("median_iterations_per_s"), std::string::npos);
}

TEST(SweepTest, TheExpectedTimeSaysItsBasisAndWhatAgreementSaves) {
  const std::string text = expected_time(6, 3, 0.03, 20, "from --duration");
  EXPECT_NE(text.find("expected 6m00s at most: 6 points x 3 repeats x 20s a run (from --duration)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("4m00s where each point's first 2 repeats agree within 3 %"), std::string::npos) << text;
  EXPECT_EQ(expected_time(4, 1, 0.03, 10, "the first run's time").find("agree"), std::string::npos)
      << "one repeat: nothing to save";
}

}  // namespace
}  // namespace feedscope
