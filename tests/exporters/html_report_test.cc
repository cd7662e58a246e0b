#include "exporters/html_report.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace feedscope {
namespace {

Report report_with_a_recommendation() {
  Report r;
  r.diagnosis.bottleneck = "cpu_preprocess";
  r.diagnosis.verdict = "Input-bound <highly>: workers decode & transform";
  r.diagnosis.evidence = {"data stall 42% of wall time"};
  Recommendation rec;
  rec.action = "Raise num_workers";
  rec.setting = "num_workers=2";
  rec.predicted_samples_per_s = 900;
  rec.predicted_speedup = 1.8;
  rec.basis = "workers scale until the step";
  r.diagnosis.recommendations = {rec};
  StageStats decode;
  decode.name = "decode";
  decode.count = 10;
  decode.share = 0.7;
  decode.mean_ms = 3.5;
  StageStats idle;
  idle.name = "h2d";
  r.stages = {decode, idle};
  r.config = {{"num_workers", std::int64_t{1}}, {"pin_memory", true}, {"dataset", std::string("images:/d")}};
  r.gpu_trace_unavailable = "no CUDA device: none found";
  return r;
}

TEST(HtmlReportTest, VerdictFirstEscapedAndEverySectionPresent) {
  const std::string html = report_to_html(report_with_a_recommendation(), {}, 0);
  const auto verdict = html.find("Input-bound &lt;highly&gt;: workers decode &amp; transform");
  ASSERT_NE(verdict, std::string::npos);
  EXPECT_LT(verdict, html.find("Evidence")) << "the verdict comes first";
  EXPECT_EQ(html.find("<highly>"), std::string::npos);
  for (const char* part : {"Recommendations", "num_workers=2", "1.80x", "Stages", "decode",
                           "Utilization over time", "no CUDA device: none found", "images:/d"})
    EXPECT_NE(html.find(part), std::string::npos) << part;
  EXPECT_EQ(html.find(">h2d<"), std::string::npos) << "stages without spans are left out";
}

TEST(HtmlReportTest, SelfContainedWithChartsFromTheSamples) {
  std::vector<UtilizationSample> series(3);
  for (int i = 0; i < 3; ++i) {
    series[static_cast<std::size_t>(i)].time_ns = 1'000'000'000LL * (i + 1);
    series[static_cast<std::size_t>(i)].cpu_system_ratio = 0.25 * i;
    series[static_cast<std::size_t>(i)].cpu_process_ratio = 0.1;
    series[static_cast<std::size_t>(i)].threads = {{11, "worker 0", 0.9}, {12, "tbb_spare", 0.5}};
  }
  const std::string html = report_to_html(report_with_a_recommendation(), series, 0);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg")) << "no network fetch";
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_NE(html.find("CPU, all cores"), std::string::npos);
  EXPECT_NE(html.find(">worker 0<"), std::string::npos);
  EXPECT_EQ(html.find("tbb_spare"), std::string::npos) << "only loader lanes and training";
  EXPECT_NE(html.find("<path d=\"M"), std::string::npos) << "lines are drawn";
}

// Issue #25: a watched program's workers took a full core and the CPU chart had no line for them;
// its Stages section was an empty table where no spans came.
TEST(HtmlReportTest, AWatchedProgramsWorkersHaveACpuLineAndUnmeasuredStagesSaySo) {
  std::vector<UtilizationSample> series(3);
  for (int i = 0; i < 3; ++i) {
    UtilizationSample& u = series[static_cast<std::size_t>(i)];
    u.time_ns = 1'000'000'000LL * (i + 1);
    u.cpu_system_ratio = 0.7;
    u.cpu_core_ratio = {0.7, 0.7};
    ProcessCpu worker;
    worker.pid = 200;
    worker.cores = 1.0;
    u.children = {worker};
  }
  Report r = report_with_a_recommendation();
  for (StageStats& st : r.stages) st.count = 0;
  r.program = ProgramSummary{};
  r.program->torch = ProgramTorch{"1.13.0a0", "/usr/lib/python3/dist-packages/torch/version.py"};
  const std::string html = report_to_html(r, series, 0);
  EXPECT_NE(html.find("CPU, its child processes (loader workers)"), std::string::npos);
  EXPECT_NE(html.find("Not measured: the program sent no stage spans"), std::string::npos);
  EXPECT_NE(html.find("feedscope built with torch / CUDA"), std::string::npos);
  EXPECT_NE(html.find("the program's torch</td><td>1.13.0a0"), std::string::npos);
}

// The rank x time view draws the ranks' data stall where their Sessions streamed it (no cell for
// a window not measured), and their loader workers' CPU where none did.
TEST(HtmlReportTest, TheRankTimeViewShowsDataStallWhereMeasuredElseTheLoadersCpu) {
  Report r = report_with_a_recommendation();
  RankSummary a, b;
  a.rank = 0;
  b.rank = 1;
  for (RankSummary* k : {&a, &b}) {
    k->num_workers = 2;
    k->timeline_bucket_s = 1;
    k->timeline_workers_cores = {1.0, 2.0, 0.5};
  }
  r.ranks = {a, b};
  std::string html = report_to_html(r, {}, 0);
  EXPECT_NE(html.find("Loader workers over time"), std::string::npos);
  EXPECT_EQ(html.find("Data stall over time"), std::string::npos);
  const auto cells = [](const std::string& h) {
    std::size_t n = 0;
    const std::string cell = "fill=\"#D55E00\" fill-opacity=";
    for (auto at = h.find(cell); at != std::string::npos; at = h.find(cell, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(cells(html), 6u);
  r.ranks[0].timeline_data_stall = {0.5, std::nullopt, 0.1};
  r.ranks[1].timeline_data_stall = {0.0, 0.2, 0.3};
  html = report_to_html(r, {}, 0);
  EXPECT_NE(html.find("Data stall over time"), std::string::npos);
  EXPECT_EQ(cells(html), 5u) << "no cell where no window was measured";
}

TEST(HtmlReportTest, AGpuWhoseUtilizationNvmlCouldNotReadHasNoPointsAndSaysSo) {
  std::vector<UtilizationSample> series(3);
  for (int i = 0; i < 3; ++i) {
    series[static_cast<std::size_t>(i)].time_ns = 1'000'000'000LL * (i + 1);
    GpuSample g;  // nvmlDeviceGetUtilizationRates failed: a MIG instance
    g.unavailable["util_ratio"] = "nvmlDeviceGetUtilizationRates: status 3 (NOT_SUPPORTED)";
    series[static_cast<std::size_t>(i)].gpus = {g};
  }
  std::string html = report_to_html(report_with_a_recommendation(), series, 0);
  EXPECT_NE(html.find("GPU 0 (not measured)"), std::string::npos);
  EXPECT_EQ(html.find("<path d=\"M"), std::string::npos) << "no line at 0 %";

  series[0].gpus[0].util_ratio = 0.5;  // read at 1 s and 3 s only
  series[2].gpus[0].util_ratio = 0.5;
  html = report_to_html(report_with_a_recommendation(), series, 0);
  const auto path = html.find("<path d=\"M");
  ASSERT_NE(path, std::string::npos);
  const std::string d = html.substr(path, html.find('"', path + 9) - path);
  EXPECT_EQ(std::count(d.begin(), d.end(), 'L'), 1) << "two points, none at 2 s: " << d;
  EXPECT_EQ(html.find("(not measured)"), std::string::npos);
}

}  // namespace
}  // namespace feedscope

namespace feedscope {
namespace {

TEST(HtmlReportTest, SamplesDrawTheirQuantilesAndListTheSlowestFiles) {
  Report r;
  SampleCosts c;
  c.measured_by = "feedscope's loader";
  c.count = 1000;
  c.p50_ms = 1.1;
  c.p90_ms = 8;
  c.p99_ms = 95;
  c.max_ms = 330;
  c.slowest = {{"/d/class_0009/img_<249>.jpg", 329.5, 6'300'000, 4000, 3000, "JPEG"}};
  r.samples = c;
  const std::string html = report_to_html(r, {}, 0);
  EXPECT_NE(html.find("<h2>Samples</h2>"), std::string::npos);
  EXPECT_NE(html.find("95.00 ms"), std::string::npos);
  EXPECT_NE(html.find("/d/class_0009/img_&lt;249&gt;.jpg"), std::string::npos);
  EXPECT_NE(html.find("4000x3000"), std::string::npos);
  EXPECT_EQ(report_to_html(Report{}, {}, 0).find("<h2>Samples</h2>"), std::string::npos);
}

}  // namespace
}  // namespace feedscope
