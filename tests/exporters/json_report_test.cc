#include "exporters/json_report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "exporters/console_report.h"
#include "exporters/detail/rank_json.h"

namespace feedscope {
namespace {

Report sample_report() {
  Report r;
  r.config = {{"num_workers", std::int64_t{2}}, {"lr", 0.05}, {"pin_memory", true},
              {"dataset", std::string("synthetic:784")}};
  r.environment.cpus = 2;
  r.environment.device = "cpu";
  r.throughput = {1000.0, 15.6, 100, 6400, 6.4, "", 0};
  StageStats wait;
  wait.name = "wait";
  wait.count = 100;
  wait.busy_s = 0.5;
  r.stages = {wait};
  r.training.first_loss = 2.3;
  r.diagnosis.bottleneck = "cpu_compute";
  r.diagnosis.verdict = "Not input-bound.";
  r.diagnosis.evidence = {"data stall 7.8%"};
  r.diagnosis.recommendations = {{"Use a GPU.", "device=cuda", 5000, 5.0, "upper bound"}};
  return r;
}

TEST(JsonReportTest, HasTheStableTopLevelKeysAndTypedConfig) {
  const auto j = nlohmann::json::parse(report_to_json(sample_report()));
  EXPECT_EQ(j["schema"], "feedscope.report/1");
  for (const char* key : {"config", "environment", "throughput", "stages", "utilization", "diagnosis",
                          "data_errors"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["config"]["num_workers"], 2);
  EXPECT_EQ(j["config"]["pin_memory"], true);
  EXPECT_EQ(j["config"]["dataset"], "synthetic:784");
  EXPECT_DOUBLE_EQ(j["throughput"]["samples_per_s"].get<double>(), 1000.0);
  EXPECT_EQ(j["stages"]["wait"]["count"], 100);
  EXPECT_TRUE(j["training"]["last_loss"].is_null());
  EXPECT_EQ(j["diagnosis"]["recommendations"][0]["setting"], "device=cuda");
  EXPECT_DOUBLE_EQ(j["diagnosis"]["recommendations"][0]["predicted_speedup"].get<double>(), 5.0);
}

TEST(JsonReportTest, GpuTraceIsTheReasonWhenThereIsNone) {
  Report r = sample_report();
  r.gpu_trace_unavailable = "the step runs on the CPU";
  const auto j = nlohmann::json::parse(report_to_json(r));
  ASSERT_TRUE(j.contains("gpu_trace"));
  EXPECT_EQ(j["gpu_trace"], nlohmann::json({{"unavailable", "the step runs on the CPU"}}));
}

TEST(JsonReportTest, GpuTraceCarriesKernelsGapsSyncsAndH2dByMemory) {
  Report r = sample_report();
  GpuTraceSummary g;
  g.steps = 10;
  g.kernels = 400;
  g.kernels_per_step = 40;
  g.mean_kernel_us = 5.5;
  g.gpu_busy_ratio = 0.2;
  g.launch_gaps = 390;
  g.mean_gap_us = 20;
  g.syncs = 10;
  g.syncs_per_step = 1;
  g.h2d_pinned_bytes = 1'000'000;
  g.h2d_pageable_bytes = 4'000'000'000;
  g.h2d_pinned_gbps = 20.0;
  g.dropped = 3;
  r.gpu_trace = g;
  const auto j = nlohmann::json::parse(report_to_json(r));
  const auto& t = j["gpu_trace"];
  EXPECT_FALSE(t.contains("unavailable"));
  EXPECT_EQ(t["kernels"], 400);
  EXPECT_DOUBLE_EQ(t["mean_kernel_us"].get<double>(), 5.5);
  EXPECT_DOUBLE_EQ(t["gpu_busy_ratio"].get<double>(), 0.2);
  EXPECT_EQ(t["launch_gaps"]["count"], 390);
  EXPECT_DOUBLE_EQ(t["launch_gaps"]["mean_us"].get<double>(), 20.0);
  EXPECT_EQ(t["syncs"]["count"], 10);
  EXPECT_DOUBLE_EQ(t["syncs"]["per_step"].get<double>(), 1.0);
  EXPECT_EQ(t["h2d"]["pinned_bytes"], 1'000'000);
  EXPECT_EQ(t["h2d"]["pageable_bytes"], 4'000'000'000u);
  EXPECT_DOUBLE_EQ(t["h2d"]["pinned_gbps"].get<double>(), 20.0);
  EXPECT_TRUE(t["h2d"]["pageable_gbps"].is_null());
  EXPECT_EQ(t["dropped"], 3);
  EXPECT_EQ(t["records_not_kept"], 0);
  EXPECT_EQ(t["records_bad_timestamps"], 0);
  EXPECT_EQ(t["buffers_incomplete"], 0);
  EXPECT_TRUE(t["covered_until_s"].is_null()) << "null: every measured step is summarized";
  EXPECT_TRUE(t["tracing"].is_null()) << "null: the source did not say how it traced";
}

TEST(JsonReportTest, GpuTraceSaysHowItWasTracedAndCountsLaunchesWithoutACall) {
  Report r = sample_report();
  GpuTraceSummary g;
  g.launch_calls = 12;
  g.launches_without_call = 2;
  TracingMode mode;
  mode.runtime_calls = TracingMode::Calls::selected;
  mode.runtime_callbacks = 41;
  mode.driver_calls = TracingMode::Calls::selected;
  mode.driver_callbacks = 8;
  mode.completed_syncs_only = true;
  g.tracing = mode;
  r.gpu_trace = g;
  auto t = nlohmann::json::parse(report_to_json(r))["gpu_trace"];
  EXPECT_EQ(t["launch_calls"]["count"], 12);
  EXPECT_EQ(t["launch_calls"]["without_call"], 2);
  EXPECT_EQ(t["tracing"], nlohmann::json::parse(R"({"runtime_calls": "selected",
      "runtime_callbacks": 41, "driver_calls": "selected", "driver_callbacks": 8,
      "sync_records": "completed only", "note": null, "sampling": "whole"})"));
  mode = TracingMode{};
  mode.note = "every runtime call traced: cuptiActivityEnableRuntimeApi is not in this CUPTI";
  r.gpu_trace->tracing = mode;
  t = nlohmann::json::parse(report_to_json(r))["gpu_trace"];
  EXPECT_EQ(t["tracing"]["runtime_calls"], "all");
  EXPECT_EQ(t["tracing"]["driver_calls"], "none");
  EXPECT_EQ(t["tracing"]["sync_records"], "all");
  EXPECT_EQ(t["tracing"]["note"], mode.note);
}

TEST(JsonReportTest, GpuTraceCarriesGraphsCollectivesDevicesAndBlockingCopies) {
  Report r = sample_report();
  GpuTraceSummary g;
  g.graph_kernels = 300;
  g.graphs = 2;
  g.graph_replays = 20;
  g.driver_launch_calls = 7;
  g.triton_kernels = 5;
  g.collective_s = 0.5;
  g.collective_share = 0.6;
  g.collective_alone_share = 0.4;
  g.syncs_after_h2d = 20;
  g.sync_after_h2d_wait_s = 0.25;
  g.devices = {{0, 100, 0.9, 0.9}, {1, 5, 0.05, 0.05}};
  r.gpu_trace = g;
  const auto t = nlohmann::json::parse(report_to_json(r))["gpu_trace"];
  EXPECT_EQ(t["graphs"]["kernels"], 300);
  EXPECT_EQ(t["graphs"]["graphs"], 2);
  EXPECT_EQ(t["graphs"]["replays"], 20);
  EXPECT_EQ(t["graphs"]["driver_launch_calls"], 7);
  EXPECT_EQ(t["graphs"]["triton_kernels"], 5);
  EXPECT_DOUBLE_EQ(t["collectives"]["share"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(t["collectives"]["alone_share"].get<double>(), 0.4);
  EXPECT_EQ(t["syncs"]["after_h2d"]["count"], 20);
  EXPECT_DOUBLE_EQ(t["syncs"]["after_h2d"]["wait_s"].get<double>(), 0.25);
  ASSERT_EQ(t["devices"].size(), 2u);
  EXPECT_EQ(t["devices"][1]["device"], 1);
  EXPECT_DOUBLE_EQ(t["devices"][1]["busy_ratio"].get<double>(), 0.05);
  r.gpu_trace = GpuTraceSummary{};
  EXPECT_TRUE(nlohmann::json::parse(report_to_json(r))["gpu_trace"]["devices"].empty());
}

TEST(JsonReportTest, GpuTraceCountsRecordsLeftOutForTheirTimesAndBuffersCutShort) {
  Report r = sample_report();
  GpuTraceSummary g;
  g.records_bad_timestamps = 17;
  g.buffers_incomplete = 2;
  r.gpu_trace = g;
  const auto t = nlohmann::json::parse(report_to_json(r))["gpu_trace"];
  EXPECT_EQ(t["records_bad_timestamps"], 17);
  EXPECT_EQ(t["buffers_incomplete"], 2);
}

TEST(JsonReportTest, GpuTraceSaysWhereAMemoryCapCutTheSummary) {
  Report r = sample_report();
  GpuTraceSummary g;
  g.records_not_kept = 1234;
  g.covered_until_s = 61.5;
  r.gpu_trace = g;
  const auto t = nlohmann::json::parse(report_to_json(r))["gpu_trace"];
  EXPECT_EQ(t["records_not_kept"], 1234);
  EXPECT_DOUBLE_EQ(t["covered_until_s"].get<double>(), 61.5);
}

TEST(JsonReportTest, TraceSaysHowManySpansTraceJsonHoldsAndWhichWereLeftOut) {
  Report r = sample_report();
  r.trace = {1000, 1000, 1000, std::nullopt, std::nullopt};
  auto t = nlohmann::json::parse(report_to_json(r))["trace"];
  EXPECT_EQ(t, nlohmann::json({{"max_spans", 1000}, {"spans_total", 1000}, {"spans_kept", 1000},
                               {"spans_not_kept", 0}, {"omitted", nullptr}}));
  r.trace = {1000, 5000, 990, 0.5, 12.25};
  t = nlohmann::json::parse(report_to_json(r))["trace"];
  EXPECT_EQ(t["spans_not_kept"], 4010);
  EXPECT_DOUBLE_EQ(t["omitted"]["from_s"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(t["omitted"]["to_s"].get<double>(), 12.25);
}

TEST(JsonReportTest, DataErrorsCarryCountsAndTheFirstExamples) {
  Report r = sample_report();
  EXPECT_EQ(nlohmann::json::parse(report_to_json(r))["data_errors"]["count"], 0);
  r.data_errors.policy = "skip";
  r.data_errors.max_bad_ratio = 0.01;
  r.data_errors.count = 2;
  r.data_errors.attempted = 400;
  r.data_errors.ratio = 0.005;
  r.data_errors.examples = {{17, "/d/shard-00000.rec record 17 at byte 88", "checksum mismatch"}};
  const auto j = nlohmann::json::parse(report_to_json(r))["data_errors"];
  EXPECT_EQ(j["policy"], "skip");
  EXPECT_EQ(j["count"], 2);
  EXPECT_EQ(j["attempted"], 400);
  EXPECT_DOUBLE_EQ(j["ratio"].get<double>(), 0.005);
  ASSERT_EQ(j["examples"].size(), 1u);
  EXPECT_EQ(j["examples"][0]["index"], 17);
  EXPECT_EQ(j["examples"][0]["file"], "/d/shard-00000.rec record 17 at byte 88");
  EXPECT_EQ(j["examples"][0]["message"], "checksum mismatch");
}

TEST(JsonReportTest, StoppedEarlyIsNullOrTheReasonWithItsMessage) {
  Report r = sample_report();
  EXPECT_TRUE(nlohmann::json::parse(report_to_json(r))["stopped_early"].is_null());
  r.stopped_early = {"bad_data", "sample 3 (/d/shard-00000.rec record 3 at byte 928): checksum mismatch"};
  const auto j = nlohmann::json::parse(report_to_json(r))["stopped_early"];
  EXPECT_EQ(j["reason"], "bad_data");
  EXPECT_EQ(j["message"], r.stopped_early.message);
}

TEST(JsonReportTest, AtomicWriteLeavesNoTemporaryAndNamesABadPath) {
  const auto dir = std::filesystem::temp_directory_path() / "feedscope-json-test";
  std::filesystem::create_directories(dir);
  const auto path = (dir / "report.json").string();
  write_file_atomically(path, "{}\n");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "{}\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  try {
    write_file_atomically("/nonexistent-dir/x/report.json", "{}");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x/report.json"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST(ConsoleReportTest, VerdictComesFirstAndEmptyStagesAreHidden) {
  const std::string text = format_console_report(sample_report(), false);
  EXPECT_EQ(text.rfind("feedscope: Not input-bound.", 0), 0u) << text;
  EXPECT_NE(text.find("wait"), std::string::npos);
  EXPECT_EQ(text.find("decode"), std::string::npos);
  EXPECT_EQ(text.find("\033["), std::string::npos) << "no color codes when not a terminal";
  EXPECT_NE(text.find("device=cuda"), std::string::npos);
  EXPECT_EQ(text.find("trace.json"), std::string::npos) << "nothing to say while it holds every span";
}

TEST(ConsoleReportTest, ATraceCutByItsCapIsSaid) {
  Report r = sample_report();
  r.trace = {1000, 5000, 990, 0.5, 12.25};
  const std::string text = format_console_report(r, false);
  EXPECT_NE(text.find("trace.json: 990 of 5000 stage spans: those that began from 0.50 s to 12.25 s "
                      "are left out (trace_max_spans 1000)"),
            std::string::npos)
      << text;
}

TEST(ConsoleReportTest, SkippedSamplesAreCountedListedAndTheRatioFloorSaid) {
  Report r = sample_report();
  EXPECT_EQ(format_console_report(r, false).find("bad samples"), std::string::npos) << "none: nothing said";
  r.data_errors.policy = "skip";
  r.data_errors.max_bad_ratio = 0.01;
  r.data_errors.count = 7;
  r.data_errors.attempted = 14;
  r.data_errors.ratio = 0.5;
  r.data_errors.ratio_floor = 1000;
  for (std::uint64_t i = 0; i < 7; ++i)
    r.data_errors.examples.push_back({i, "/d/a/" + std::to_string(i) + ".jpg",
                                      "sample " + std::to_string(i) + " (/d/a/" + std::to_string(i) + ".jpg): corrupt"});
  const std::string text = format_console_report(r, false);
  EXPECT_NE(text.find("bad samples: 7 of 14 skipped (50.00%)"), std::string::npos) << text;
  EXPECT_NE(text.find("more than 1% have failed (--max-bad-ratio), counted over at least 1000 samples: up to 10 "
                      "may fail among the first 1000"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    - sample 0 (/d/a/0.jpg): corrupt\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    - sample 4 (/d/a/4.jpg): corrupt\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("/d/a/5.jpg"), std::string::npos) << "the first five only: " << text;
  EXPECT_NE(text.find("(2 more; report.json lists the first 7 under data_errors)"), std::string::npos) << text;
}

TEST(ConsoleReportTest, ARecommendationWithoutAPredictionPrintsNone) {
  Report r = sample_report();
  r.diagnosis.recommendations = {{"Add loader workers.", "num_workers=4", std::nullopt, std::nullopt,
                                  "no prediction: loader only, no step"}};
  const std::string text = format_console_report(r, false);
  EXPECT_NE(text.find("setting num_workers=4 (no prediction: loader only, no step)"), std::string::npos) << text;
  EXPECT_EQ(text.find("predicted 0"), std::string::npos) << text;
  // report.json: null, never 0.
  const auto j = nlohmann::json::parse(report_to_json(r));
  EXPECT_TRUE(j["diagnosis"]["recommendations"][0]["predicted_speedup"].is_null());
  EXPECT_TRUE(j["diagnosis"]["recommendations"][0]["predicted_samples_per_s"].is_null());
}

// Each recommendation says what its number stands on; the console lists measured gains first.
TEST(ConsoleReportTest, MeasuredFirstThenPredictedThenNotMeasuredAsBasisKindSays) {
  Report r = sample_report();
  r.diagnosis.recommendations = {{"Try threads.", "", std::nullopt, std::nullopt, "no prediction: not seen"},
                                 {"Raise num_workers.", "num_workers=2", std::nullopt, 1.89, "what-if: the model"},
                                 {"Run with -j 2: 1.65x measured.", "-j 2", std::nullopt, 1.65,
                                  "measured, not predicted: --try"}};
  const auto j = nlohmann::json::parse(report_to_json(r));
  const auto& recs = j["diagnosis"]["recommendations"];
  EXPECT_EQ(recs[0]["basis_kind"], "not measured");
  EXPECT_EQ(recs[1]["basis_kind"], "predicted");
  EXPECT_EQ(recs[2]["basis_kind"], "measured");
  const std::string text = format_console_report(r, false);
  const std::size_t measured = text.find("Run with -j 2"), predicted = text.find("Raise num_workers"),
                    guess = text.find("Try threads");
  ASSERT_NE(guess, std::string::npos) << text;
  EXPECT_LT(measured, predicted) << text;
  EXPECT_LT(predicted, guess) << text;
  EXPECT_NE(text.find("setting -j 2 -> measured 1.65x"), std::string::npos) << text;
  EXPECT_NE(text.find("setting num_workers=2 -> predicted 1.89x"), std::string::npos) << text;
}

// A watched program that printed it/s without a batch size and no Time/Data lines: what was not
// measured is null, never 0.
// A rank's data stall over time: null where no window was measured, and read back as such by
// `feedscope merge`.
TEST(JsonReportTest, ARanksStallTimelineHasNullsWhereNotMeasuredAndReadsBack) {
  Report r = sample_report();
  RankSummary k;
  k.rank = 3;
  k.pid = 77;
  k.timeline_bucket_s = 2;
  k.timeline_workers_cores = {1.0, 1.5};
  k.timeline_data_stall = {0.25, std::nullopt};
  r.ranks = {k};
  const nlohmann::json j = nlohmann::json::parse(report_to_json(r));
  const nlohmann::json& timeline = j["ranks"][0]["timeline"];
  EXPECT_EQ(timeline["data_stall"], nlohmann::json::parse("[0.25, null]"));
  const std::vector<RankSummary> back = detail::ranks_from_json(j["ranks"]);
  ASSERT_EQ(back.size(), 1u);
  ASSERT_EQ(back[0].timeline_data_stall.size(), 2u);
  EXPECT_EQ(back[0].timeline_data_stall[0], 0.25);
  EXPECT_FALSE(back[0].timeline_data_stall[1]);
}

TEST(JsonReportTest, AWatchedProgramsUnmeasuredFiguresAreNull) {
  Report r;
  r.throughput.batches_per_s = 12.5;
  r.throughput.wall_s = 3;
  r.diagnosis.bottleneck = "cpu_compute";
  r.diagnosis.input_bound = "unknown";
  auto j = nlohmann::json::parse(report_to_json(r));
  EXPECT_TRUE(j["throughput"]["samples_per_s"].is_null());
  EXPECT_DOUBLE_EQ(j["throughput"]["batches_per_s"].get<double>(), 12.5);
  EXPECT_TRUE(j["diagnosis"]["data_stall_ratio"].is_null());
  EXPECT_TRUE(j["diagnosis"]["data_stall_source"].is_null());
  const std::string text = format_console_report(r, false);
  EXPECT_NE(text.find("data stall: not measured"), std::string::npos) << text;
  EXPECT_NE(text.find("12.50 it/s"), std::string::npos) << text;
  EXPECT_NE(text.find("samples/s not measured"), std::string::npos) << text;

  r.diagnosis.data_stall_ratio = 0.25;
  r.diagnosis.data_stall_source = "the program's own `Time ... Data ...` lines";
  j = nlohmann::json::parse(report_to_json(r));
  EXPECT_DOUBLE_EQ(j["diagnosis"]["data_stall_ratio"].get<double>(), 0.25);
  EXPECT_EQ(j["diagnosis"]["data_stall_source"], "the program's own `Time ... Data ...` lines");
  EXPECT_NE(format_console_report(r, false).find("data stall: 25.0%"), std::string::npos);
}

}  // namespace
}  // namespace feedscope

namespace feedscope {
namespace {

TEST(JsonReportTest, SamplesAreNullUntilMeasuredThenTheirTailAndFiles) {
  Report r = sample_report();
  EXPECT_TRUE(nlohmann::json::parse(report_to_json(r))["samples"].is_null());
  SampleCosts c;
  c.measured_by = "feedscope's loader";
  c.count = 1000;
  c.p50_ms = 3;
  c.p99_ms = 150;
  c.slowest_1pct_share = 0.45;
  c.slowest = {{"/d/a.jpg", 190, 9'800'000, 8000, 6000, "JPEG"}, {"/d/b.bin", 20, {}, {}, {}, ""}};
  c.wait_s = 2.0;
  c.wait_on_slowest_s = 1.5;
  r.samples = c;
  const auto j = nlohmann::json::parse(report_to_json(r))["samples"];
  EXPECT_EQ(j["measured_by"], "feedscope's loader");
  EXPECT_DOUBLE_EQ(j["load_ms"]["p99"].get<double>(), 150.0);
  EXPECT_DOUBLE_EQ(j["load_ms"]["slowest_1pct_share"].get<double>(), 0.45);
  EXPECT_EQ(j["slowest"][0]["pixels"], 48'000'000);
  EXPECT_EQ(j["slowest"][0]["bytes"], 9'800'000);
  EXPECT_TRUE(j["slowest"][1]["pixels"].is_null());
  EXPECT_TRUE(j["slowest"][1]["format"].is_null());
  EXPECT_DOUBLE_EQ(j["wait_on_slowest_share"].get<double>(), 0.75);
}

}  // namespace
}  // namespace feedscope
