#include "exporters/recording.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "tests/support/gpu_recording_cases.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;
using testing::RecordingCase;
using testing::TempDir;

nlohmann::json json_file(const fs::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

void write_json_file(const fs::path& file, const nlohmann::json& j) { std::ofstream(file) << j.dump(1); }

std::string error_of(const fs::path& dir) {
  try {
    read_recording(dir);
    read_expectation(dir);
  } catch (const RecordingError& e) {
    return e.what();
  }
  return "";
}

TEST(RecordingTest, EachFabricatedCaseReplaysToWhatItDiagnosedWordForWord) {
  for (const RecordingCase& c : testing::fabricated_recording_cases()) {
    SCOPED_TRACE(c.name);
    const TempDir dir;
    const RecordingWritten w = write_recording(dir.path(), c.recording, c.produced, 0);
    EXPECT_EQ(w.records_left_out, 0u);
    EXPECT_EQ(w.records_kept, c.recording.gpu->activity.records());
    EXPECT_TRUE(w.replay_differences.empty()) << w.replay_differences.front();
    const Recording read = read_recording(dir.path());
    ASSERT_EQ(read.run.has_value(), c.recording.run.has_value());
    const Replayed r = replay(read);
    EXPECT_TRUE(compare_replay(r, c.produced).empty());
    // Not only what compare_replay weighs: the same words, so the input lost nothing.
    EXPECT_EQ(r.diagnosis.verdict, c.produced.diagnosis.verdict);
    EXPECT_EQ(r.diagnosis.evidence, c.produced.diagnosis.evidence);
    ASSERT_EQ(r.diagnosis.recommendations.size(), c.produced.diagnosis.recommendations.size());
    for (std::size_t i = 0; i < r.diagnosis.recommendations.size(); ++i)
      EXPECT_EQ(r.diagnosis.recommendations[i].basis, c.produced.diagnosis.recommendations[i].basis);
    const Expectation e = read_expectation(dir.path());
    EXPECT_FALSE(e.run) << "nothing was left out: expect.json is what the run said";
    EXPECT_TRUE(compare_replay(e.expected, c.produced).empty());
  }
}

TEST(RecordingTest, TheFabricatedCasesAreTheShapesTheyAreNamedFor) {
  const std::vector<RecordingCase> cases = testing::fabricated_recording_cases();
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_EQ(cases[0].produced.diagnosis.bottleneck, "launch_overhead") << cases[0].produced.diagnosis.verdict;
  EXPECT_EQ(cases[1].produced.diagnosis.bottleneck, "host_to_device") << cases[1].produced.diagnosis.verdict;
  EXPECT_EQ(cases[2].produced.diagnosis.bottleneck, "launch_overhead") << cases[2].produced.diagnosis.verdict;
  EXPECT_GT(cases[2].recording.gpu->activity.records(), cases[2].max_records) << "the watch case is capped";
  // The sampled one: read in 4 windows after the 0.1-s lead (three of 20 ms and the last 10 ms),
  // the lead left out of the figures, its totals scaled to the 0.71 s after it (8 kernels a 1 ms
  // step), its verdict the whole trace's.
  const RecordingCase& sampled = cases[3];
  EXPECT_EQ(sampled.produced.diagnosis.bottleneck, "launch_overhead") << sampled.produced.diagnosis.verdict;
  ASSERT_TRUE(sampled.produced.gpu_trace && sampled.produced.gpu_trace->sampled);
  const GpuTraceSummary::Sampled& t = *sampled.produced.gpu_trace->sampled;
  EXPECT_EQ(t.windows, 4);
  EXPECT_FALSE(t.lead_in_figures);
  EXPECT_NEAR(t.read_s, 0.07, 0.001);
  EXPECT_NEAR(sampled.produced.gpu_trace->kernels, 8 * 710, 65);
  EXPECT_NEAR(sampled.produced.gpu_trace->gpu_busy_ratio, 0.08, 0.005);
  EXPECT_LE(sampled.recording.gpu->activity.records(), sampled.max_records) << "all of it is kept";
}

TEST(RecordingTest, ARunsCapKeepsWholeStepsFromTheFirstAndItsSummaryIsATracerCapsThere) {
  const RecordingCase c = testing::launch_bound_run_case();
  const GpuActivity& all = c.recording.gpu->activity;
  const TempDir dir;
  const RecordingWritten w = write_recording(dir.path(), c.recording, c.produced, 1000);
  EXPECT_GT(w.records_left_out, 0u);
  EXPECT_LE(w.records_kept, 1000u);
  EXPECT_EQ(w.records_kept + w.records_left_out, all.records());
  EXPECT_TRUE(w.replay_differences.empty()) << w.replay_differences.front();
  EXPECT_TRUE(w.verdict_kept);

  const Recording r = read_recording(dir.path());
  EXPECT_EQ(r.records_left_out, w.records_left_out);
  EXPECT_EQ(r.records_seen, all.records());
  // 82 records a step, 5 warm-up steps left out: 12 whole steps fit in 1000.
  ASSERT_EQ(r.gpu->steps.size(), 12u);
  EXPECT_EQ(r.gpu->activity.kept_until_ns, r.gpu->steps.back().end_ns);
  EXPECT_EQ(r.gpu->activity.not_kept, w.records_left_out);
  for (const KernelRecord& k : r.gpu->activity.kernels) EXPECT_GT(k.end_ns, r.gpu->steps.front().begin_ns);

  // The replay's summary is the one over the first 12 steps of every record.
  const std::vector<StepWindow> first(c.recording.gpu->steps.begin(), c.recording.gpu->steps.begin() + 12);
  const GpuTraceSummary twelve = summarize_gpu_trace(all, first);
  const Replayed replayed = replay(r);
  ASSERT_TRUE(replayed.gpu_trace);
  EXPECT_EQ(replayed.gpu_trace->steps, 12);
  EXPECT_EQ(replayed.gpu_trace->kernels, twelve.kernels);
  EXPECT_EQ(replayed.gpu_trace->syncs, twelve.syncs);
  EXPECT_DOUBLE_EQ(replayed.gpu_trace->gpu_busy_ratio, twelve.gpu_busy_ratio);
  EXPECT_DOUBLE_EQ(replayed.gpu_trace->device_s_per_step, twelve.device_s_per_step);
  EXPECT_EQ(replayed.gpu_trace->records_not_kept, w.records_left_out);
  EXPECT_TRUE(replayed.gpu_trace->covered_until_s);

  // expect.json: the capped replay, and under "run" what the run itself said.
  const Expectation e = read_expectation(dir.path());
  ASSERT_TRUE(e.run);
  EXPECT_TRUE(compare_replay(replayed, e.expected).empty());
  EXPECT_TRUE(compare_replay(*e.run, c.produced).empty());
  EXPECT_EQ(e.run->diagnosis.bottleneck, replayed.diagnosis.bottleneck);
  EXPECT_EQ(e.run->diagnosis.rules, replayed.diagnosis.rules);
}

TEST(RecordingTest, AWatchsCapKeepsTheRecordsThatEndedLastWhereASecondHoldsMore) {
  const RecordingCase c = testing::launch_bound_watch_case();
  const TempDir dir;
  const RecordingWritten w = write_recording(dir.path(), c.recording, c.produced, 500);
  EXPECT_LE(w.records_kept, 500u);
  EXPECT_GT(w.records_kept, 400u);
  EXPECT_TRUE(w.replay_differences.empty()) << w.replay_differences.front();
  EXPECT_TRUE(w.verdict_kept);
  const Recording r = read_recording(dir.path());
  std::int64_t last_end = 0, first_kept = std::numeric_limits<std::int64_t>::max();
  for (const RuntimeApiRecord& x : c.recording.gpu->activity.runtime) last_end = std::max(last_end, x.end_ns);
  for (const RuntimeApiRecord& x : r.gpu->activity.runtime) first_kept = std::min(first_kept, x.start_ns);
  EXPECT_GT(first_kept, last_end - 10 * testing::kCaseMs) << "the last 6 steps of 1 ms, not the first";
  EXPECT_FALSE(fs::exists(dir / "steps.json"));
}

// A watched program whose first second is start-up (a short kernel a millisecond, launch-bound
// in looks) and the rest its steady state (a 9 ms kernel every 10 ms): the cap keeps the last
// whole seconds that fit, whose summary is the steady state's, not the start-up's.
TEST(RecordingTest, AWatchsCapKeepsItsLastWholeSecondsTheSteadyState) {
  RecordingCase c = testing::launch_bound_watch_case();
  GpuActivity a;
  std::uint32_t corr = 1;
  const std::int64_t origin = testing::kCaseOrigin;
  const auto launch = [&](std::int64_t at, std::int64_t length) {
    a.runtime.push_back({"cudaLaunchKernel", at, at + 4 * testing::kCaseUs, 1, corr});
    a.kernels.push_back({"void at::native::vectorized_elementwise_kernel<4>()", at + 10 * testing::kCaseUs,
                         at + 10 * testing::kCaseUs + length, 0, 7, corr++});
  };
  for (int i = 0; i < 1000; ++i) launch(origin + i * testing::kCaseMs, 5 * testing::kCaseUs);
  for (int i = 0; i < 300; ++i) launch(origin + 1000 * testing::kCaseMs + i * 10 * testing::kCaseMs, 9 * testing::kCaseMs);
  c.recording.gpu->activity = a;
  c.produced = testing::produced_by_watch(*c.recording.watch, *c.recording.gpu);
  const TempDir dir;
  // 2600 records: 2000 in the first second, 200 in each of the next 3. Two seconds fit in 500.
  const RecordingWritten w = write_recording(dir.path(), c.recording, c.produced, 500);
  EXPECT_EQ(w.records_left_out, 2600u - w.records_kept);
  EXPECT_GE(w.records_kept, 398u);
  EXPECT_LE(w.records_kept, 402u);
  EXPECT_TRUE(w.replay_differences.empty()) << w.replay_differences.front();
  const Recording r = read_recording(dir.path());
  const std::int64_t last_end = a.kernels.back().end_ns;
  for (const KernelRecord& k : r.gpu->activity.kernels) EXPECT_GT(k.end_ns, last_end - 2000 * testing::kCaseMs);
  const Replayed replayed = replay(r);
  ASSERT_TRUE(replayed.gpu_trace);
  EXPECT_GT(replayed.gpu_trace->gpu_busy_ratio, 0.85) << "the steady state's 9 ms of every 10";
  EXPECT_EQ(replayed.gpu_trace->records_not_kept, w.records_left_out);
}

TEST(RecordingTest, ARunWithoutAGpuTraceReplaysWithoutOneAndSaysWhy) {
  DiagnosisInput in = scenario(1.0, 100, 0.004, 0.002, 0.004, 0.006, 2, 8, false);
  Recording rec;
  rec.run = in;
  rec.gpu_trace_unavailable = "no CUDA device (CPU run)";
  const Replayed produced{diagnose(in), std::nullopt};
  const TempDir dir;
  const RecordingWritten w = write_recording(dir.path(), rec, produced, kRecordMaxRecords);
  EXPECT_TRUE(w.replay_differences.empty()) << w.replay_differences.front();
  EXPECT_FALSE(fs::exists(dir / "gpu.fsgpu"));
  const Recording r = read_recording(dir.path());
  EXPECT_FALSE(r.gpu);
  EXPECT_EQ(r.gpu_trace_unavailable, "no CUDA device (CPU run)");
  const Replayed replayed = replay(r);
  EXPECT_FALSE(replayed.gpu_trace);
  EXPECT_EQ(replayed.diagnosis.bottleneck, produced.diagnosis.bottleneck);
  const std::string text = format_replay(dir.path(), r, replayed, read_expectation(dir.path()));
  EXPECT_NE(text.find("no GPU trace (no CUDA device (CPU run))"), std::string::npos) << text;
  EXPECT_NE(text.find("expect.json: the same"), std::string::npos) << text;
}

// slow_samples reads the per-sample costs: a replay must see the files and the tail the run saw.
TEST(RecordingTest, ARunsSampleCostsReplayToTheSameSlowSamples) {
  DiagnosisInput in = scenario(3.0, 100, 0.001, 0.029, 0.020, 0.010, 1, 4, false);
  SampleCosts c;
  c.measured_by = "feedscope's loader";
  c.count = 2000;
  c.total_s = 8.2;
  c.p50_ms = 3;
  c.slow_threshold_ms = 12;
  c.slow_count = 40;
  c.slow_excess_s = 4.4;
  c.slowest = {{"/d/class_0001/img_49.jpg", 180, 9'800'000, 8000, 6000, "JPEG"}, {"/d/x.bin", 170, {}, {}, {}, ""}};
  c.wait_s = 1.0;
  c.image_size = 224;
  in.samples = c;
  Recording rec;
  rec.run = in;
  const Replayed produced{diagnose(in), std::nullopt};
  ASSERT_NE(std::find(produced.diagnosis.rules.begin(), produced.diagnosis.rules.end(), "slow_samples"),
            produced.diagnosis.rules.end());
  const TempDir dir;
  const RecordingWritten w = write_recording(dir.path(), rec, produced, kRecordMaxRecords);
  EXPECT_TRUE(w.replay_differences.empty()) << w.replay_differences.front();
  const SampleCosts back = *read_recording(dir.path()).run->samples;
  EXPECT_EQ(back.slowest.size(), 2u);
  EXPECT_EQ(back.slowest[0].width, 8000);
  EXPECT_FALSE(back.slowest[1].bytes);
  EXPECT_FALSE(back.wait_on_slowest_s);
  EXPECT_EQ(back.image_size, 224);
}

TEST(RecordingTest, ALaterRecordingInTheSameDirectoryLeavesNoFileOfTheEarlierOne) {
  const TempDir dir;
  const RecordingCase c = testing::copy_bound_run_case();
  write_recording(dir.path(), c.recording, c.produced, 0);
  ASSERT_TRUE(fs::exists(dir / "gpu.fsgpu"));
  Recording cpu = c.recording;
  cpu.gpu.reset();
  cpu.run->gpu_trace.reset();
  const Replayed produced{diagnose(*cpu.run), std::nullopt};
  const RecordingWritten w = write_recording(dir.path(), cpu, produced, 0);
  EXPECT_TRUE(w.replay_differences.empty()) << w.replay_differences.front();
  EXPECT_FALSE(fs::exists(dir / "gpu.fsgpu"));
  EXPECT_FALSE(fs::exists(dir / "steps.json"));
}

TEST(RecordingTest, NumbersThatAreNotFiniteRoundTrip) {
  RecordingCase c = testing::copy_bound_run_case();
  c.recording.run->utilization.series["gpu0_util_ratio"].p95 = std::numeric_limits<double>::quiet_NaN();
  c.recording.run->utilization.series["gpu0_util_ratio"].max = std::numeric_limits<double>::infinity();
  const TempDir dir;
  write_recording(dir.path(), c.recording, c.produced, 0);
  const SeriesStats s = read_recording(dir.path()).run->utilization.series.at("gpu0_util_ratio");
  EXPECT_TRUE(std::isnan(s.p95));
  EXPECT_EQ(s.max, std::numeric_limits<double>::infinity());
}

TEST(RecordingTest, AMissingFileOrKeyOrACorruptFrameIsAnErrorNamingTheFileAndTheKey) {
  const RecordingCase c = testing::copy_bound_run_case();
  const auto fresh = [&](const TempDir& dir) { write_recording(dir.path(), c.recording, c.produced, 0); };
  {
    const TempDir dir;
    EXPECT_NE(error_of(dir / "nowhere").find("not a directory"), std::string::npos);
    fresh(dir);
    EXPECT_EQ(error_of(dir.path()), "");
    fs::remove(dir / "steps.json");
    const std::string e = error_of(dir.path());
    EXPECT_NE(e.find((dir / "steps.json").string() + ": missing"), std::string::npos) << e;
  }
  {
    const TempDir dir;
    fresh(dir);
    nlohmann::json input = json_file(dir / "input.json");
    input["utilization"].erase("series");
    write_json_file(dir / "input.json", input);
    const std::string e = error_of(dir.path());
    EXPECT_NE(e.find("input.json: utilization.series: missing"), std::string::npos) << e;
  }
  {
    const TempDir dir;
    fresh(dir);
    nlohmann::json input = json_file(dir / "input.json");
    input["stages"][1]["count"] = "many";
    write_json_file(dir / "input.json", input);
    const std::string e = error_of(dir.path());
    EXPECT_NE(e.find("input.json: stages[1].count: not an integer"), std::string::npos) << e;
  }
  {
    const TempDir dir;
    fresh(dir);
    nlohmann::json manifest = json_file(dir / "recording.json");
    manifest["kind"] = "sweep";
    write_json_file(dir / "recording.json", manifest);
    const std::string e = error_of(dir.path());
    EXPECT_NE(e.find("recording.json: kind: 'sweep', not run or watch"), std::string::npos) << e;
  }
  {
    const TempDir dir;
    fresh(dir);
    std::fstream f(dir / "gpu.fsgpu", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
    f.close();
    const std::string e = error_of(dir.path());
    EXPECT_NE(e.find("gpu.fsgpu: checksum mismatch"), std::string::npos) << e;
  }
  {
    const TempDir dir;
    fresh(dir);
    fs::resize_file(dir / "gpu.fsgpu", fs::file_size(dir / "gpu.fsgpu") - 3);
    const std::string e = error_of(dir.path());
    EXPECT_NE(e.find("gpu.fsgpu: ends inside a frame"), std::string::npos) << e;
  }
  {
    const TempDir dir;
    fresh(dir);
    std::ofstream(dir / "expect.json") << "{\"schema\": ";
    const std::string e = error_of(dir.path());
    EXPECT_NE(e.find("expect.json: not JSON"), std::string::npos) << e;
  }
}

TEST(RecordingTest, ADifferentReplayIsSaidLineByLine) {
  const RecordingCase c = testing::launch_bound_run_case();
  Replayed other = c.produced;
  other.diagnosis.bottleneck = "gpu_compute";
  other.diagnosis.rules.pop_back();
  other.gpu_trace->kernels_per_step *= 1.01;
  other.gpu_trace->kernels_per_step *= 1.0 + 1e-9;
  const std::vector<std::string> d = compare_replay(other, c.produced);
  ASSERT_EQ(d.size(), 3u) << ::testing::PrintToString(d);
  EXPECT_EQ(d[0], "bottleneck: gpu_compute, expected launch_overhead");
  EXPECT_EQ(d[1].rfind("rules: ", 0), 0u) << d[1];
  EXPECT_EQ(d[2].rfind("gpu_trace.kernels_per_step: 40.4", 0), 0u) << d[2];
  Replayed close = c.produced;
  close.gpu_trace->kernels_per_step *= 1.0 + 1e-9;
  EXPECT_TRUE(compare_replay(close, c.produced).empty());
}

TEST(RecordingTest, TheDirectoryIsTheFlagsElseTheEnvironmentsAndTheCapIsChecked) {
  ::unsetenv(kRecordDirEnv);
  EXPECT_EQ(recording_dir(""), "");
  ::setenv(kRecordDirEnv, "/tmp/rec", 1);
  EXPECT_EQ(recording_dir(""), "/tmp/rec");
  EXPECT_EQ(recording_dir("mine"), "mine");
  ::unsetenv(kRecordDirEnv);
  ::unsetenv(kRecordMaxRecordsEnv);
  EXPECT_EQ(recording_max_records(), kRecordMaxRecords);
  ::setenv(kRecordMaxRecordsEnv, "0", 1);
  EXPECT_EQ(recording_max_records(), 0u);
  ::setenv(kRecordMaxRecordsEnv, "2e5", 1);
  try {
    recording_max_records();
    ADD_FAILURE() << "2e5 taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("FEEDSCOPE_RECORD_MAX_RECORDS='2e5'"), std::string::npos);
  }
  ::unsetenv(kRecordMaxRecordsEnv);
}

}  // namespace
}  // namespace feedscope
