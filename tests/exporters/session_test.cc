#include <feedscope/session.h>

#include "exporters/session_access.h"
#include "exporters/metrics_exporter.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ranges>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"
#include "tests/support/http_client.h"

namespace feedscope {
namespace {

Session::Options quiet(const std::filesystem::path& dir) {
  Session::Options o;
  o.report_dir = dir.string();
  o.sample_hz = 0;
  o.print = false;
  o.trace_gpu = false;
  return o;
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(SessionTest, TheDestructorWritesTheReportsOfAWrappedLoop) {
  testing::TempDir dir;
  Session::Options o = quiet(dir.path());
  o.warmup = 2;
  o.batch_size = 4;
  {
    Session fs(o);
    for (int x : fs.wrap(std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8})) {
      auto step = fs.step(4);
      (void)x;
    }
  }
  const auto j = read_json(dir / "report.json");
  EXPECT_EQ(j["schema"], "feedscope.report/1");
  EXPECT_EQ(j["throughput"]["steps"], 6);
  EXPECT_EQ(j["throughput"]["samples"], 24);
  EXPECT_EQ(j["stages"]["wait"]["count"], 6);
  EXPECT_EQ(j["stages"]["step"]["count"], 6);
  EXPECT_EQ(j["config"]["warmup"], 2);
  EXPECT_EQ(j["gpu_trace"]["unavailable"], "not requested (trace_gpu off)");
  EXPECT_EQ(j["utilization"]["unavailable"]["sampler"], "sampling off (sample_hz 0)");
  EXPECT_FALSE(j["diagnosis"]["bottleneck"].get<std::string>().empty());
  EXPECT_TRUE(std::filesystem::exists(dir / "report.html"));
  EXPECT_TRUE(std::filesystem::exists(dir / "trace.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "timeseries.csv"));  // sampling off
}

TEST(SessionTest, FinishIsIdempotent) {
  testing::TempDir dir;
  Session fs(quiet(dir.path()));
  for (int x : fs.wrap(std::vector<int>{1, 2, 3})) {
    auto step = fs.step(x);
  }
  EXPECT_FALSE(fs.finished());
  const Report& first = SessionAccess::finish(fs);
  EXPECT_TRUE(fs.finished());
  EXPECT_EQ(first.throughput.samples, 6);
  std::filesystem::remove(dir / "report.json");
  const Report& second = SessionAccess::finish(fs);
  EXPECT_EQ(&first, &second);
  EXPECT_EQ(&fs.finish(), &fs.finish());
  // Neither the later calls nor the destructor write again.
  EXPECT_FALSE(std::filesystem::exists(dir / "report.json"));
}

// The public summary says what report.json says, with null where it does.
TEST(SessionTest, FinishSummarizesTheReportWithNullWhereNothingWasMeasured) {
  testing::TempDir dir;
  {
    Session fs(quiet(dir.path()));
    for (int x : fs.wrap(std::vector<int>{1, 2, 3})) {
      auto step = fs.step(x);
    }
    const Session::Summary& s = fs.finish();
    const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "report.json"));
    EXPECT_EQ(s.bottleneck, j["diagnosis"]["bottleneck"].get<std::string>());
    EXPECT_EQ(s.verdict, j["diagnosis"]["verdict"].get<std::string>());
    ASSERT_TRUE(s.samples_per_s.has_value());
    EXPECT_DOUBLE_EQ(*s.samples_per_s, j["throughput"]["samples_per_s"].get<double>());
    ASSERT_TRUE(s.data_stall_ratio.has_value());
    EXPECT_DOUBLE_EQ(*s.data_stall_ratio, j["diagnosis"]["data_stall_ratio"].get<double>());
    EXPECT_EQ(s.report_dir, fs.report_dir());
    EXPECT_EQ(std::filesystem::path(s.report_dir), dir.path());
  }
  const std::filesystem::path empty_dir = dir / "empty";
  Session fs(quiet(empty_dir));
  const Session::Summary& s = fs.finish();  // a loop that never ran measured nothing
  EXPECT_FALSE(s.samples_per_s.has_value());
}

TEST(SessionTest, CustomScopesAppearUnderCustomStages) {
  testing::TempDir dir;
  {
    Session fs(quiet(dir.path()));
    for (int x : fs.wrap(std::vector<int>{1, 2, 3, 4})) {
      (void)x;
      auto step = fs.step(1);
      auto augment = fs.scope("augment");
    }
    EXPECT_THROW(fs.scope("step"), std::invalid_argument);
  }
  const auto j = read_json(dir / "report.json");
  ASSERT_TRUE(j["custom_stages"].contains("augment")) << j["custom_stages"];
  EXPECT_EQ(j["custom_stages"]["augment"]["count"], 4);
  EXPECT_FALSE(j["stages"].contains("augment"));
  EXPECT_EQ(j["stages"].size(), 7u);
}

TEST(SessionTest, SamplingWritesTimeseriesCsv) {
  testing::TempDir dir;
  Session::Options o = quiet(dir.path());
  o.sample_hz = 50;
  {
    Session fs(o);
    for (int x : fs.wrap(std::vector<int>{1, 2})) {
      auto step = fs.step(x);
    }
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "timeseries.csv"));
  EXPECT_TRUE(read_json(dir / "report.json")["utilization"]["unavailable"].is_object());
}

TEST(SessionTest, TraceJsonKeepsAtMostTraceMaxSpansAndTheReportCountsTheRest) {
  testing::TempDir dir;
  Session::Options o = quiet(dir.path());
  o.trace_max_spans = 100;
  o.warmup = 5;
  {
    Session fs(o);
    std::vector<int> data(3000);
    for (int x : fs.wrap(data)) {
      auto step = fs.step(1);
      auto augment = fs.scope("augment");
      (void)x;
    }
  }
  const auto j = read_json(dir / "report.json");
  // Every span still counts in the statistics; only trace.json is capped.
  EXPECT_EQ(j["stages"]["wait"]["count"], 2995);
  EXPECT_EQ(j["stages"]["step"]["count"], 2995);
  EXPECT_EQ(j["custom_stages"]["augment"]["count"], 2995);
  EXPECT_EQ(j["config"]["trace_max_spans"], 100);
  const auto& t = j["trace"];
  EXPECT_EQ(t["max_spans"], 100);
  EXPECT_EQ(t["spans_total"], 2 * 3000) << "a wait and a step per batch, warm-up's too";
  EXPECT_LE(t["spans_kept"].get<int>(), 100);
  EXPECT_EQ(t["spans_not_kept"].get<int>(), t["spans_total"].get<int>() - t["spans_kept"].get<int>());
  EXPECT_TRUE(t["omitted"].is_object());
  const auto trace = read_json(dir / "trace.json");
  int events = 0;
  for (const auto& e : trace["traceEvents"]) events += e["ph"] == "X" ? 1 : 0;
  EXPECT_EQ(events, t["spans_kept"].get<int>());
}

TEST(SessionTest, BadOptionsThrowAtSetup) {
  testing::TempDir dir;
  Session::Options o = quiet(dir.path());
  o.warmup = -1;
  EXPECT_THROW(Session{o}, std::invalid_argument);
  o = quiet(dir.path());
  o.sample_hz = -1;
  EXPECT_THROW(Session{o}, std::invalid_argument);
  o = quiet(dir.path());
  o.metrics_addr = "not an address";
  EXPECT_THROW(Session{o}, MetricsError);
  o = quiet(dir.path());
  o.trace_max_spans = -1;
  EXPECT_THROW(Session{o}, std::invalid_argument);
  o = quiet(dir.path());
  o.prefetch_factor = 0;
  EXPECT_THROW(Session{o}, std::invalid_argument);
}

// The GPU trace's sampling is checked at setup, naming the option and the value, and the report's
// config says what was asked for.
TEST(SessionTest, TheGpuTracesSamplingIsCheckedAndWrittenToTheConfig) {
  testing::TempDir dir;
  const auto refused = [&](const std::string& spec, double lead) {
    Session::Options o = quiet(dir.path());
    o.gpu_trace = spec;
    o.gpu_trace_lead = lead;
    try {
      Session s{o};
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused("10/1", 5).find("gpu_trace: \"10/1\""), std::string::npos) << refused("10/1", 5);
  EXPECT_NE(refused("sometimes", 5).find("gpu_trace: \"sometimes\""), std::string::npos);
  EXPECT_NE(refused("1/10", -1).find("gpu_trace_lead"), std::string::npos) << refused("1/10", -1);
  EXPECT_EQ(refused("whole", 0), "");
  Session::Options o = quiet(dir.path());
  o.gpu_trace = "0.5/5";
  o.gpu_trace_lead = 2;
  {
    Session fs(o);
    for (int x : fs.wrap(std::vector<int>{1, 2, 3})) (void)x;
  }
  const auto j = read_json(dir / "report.json");
  EXPECT_EQ(j["config"]["gpu_trace"], "0.5/5");
  EXPECT_EQ(j["config"]["gpu_trace_lead"], 2.0);
}

TEST(SessionTest, LoaderSettingsToldAfterConstructionReachTheConfig) {
  testing::TempDir dir;
  Session::Options o = quiet(dir.path());
  o.num_workers = 1;  // replaced below
  Session fs(o);
  fs.set_loader_settings({.batch_size = 8, .num_workers = 2, .pin_memory = false,
                          .prefetch_factor = 4, .persistent_workers = true});
  fs.set_loader_settings({.num_workers = 3});  // the others stay as told
  for (int x : fs.wrap(std::vector<int>{1, 2, 3})) {
    auto step = fs.step(8);
    (void)x;
  }
  fs.finish();
  const auto config = read_json(dir / "report.json")["config"];
  EXPECT_EQ(config["batch_size"], 8);
  EXPECT_EQ(config["num_workers"], 3);
  EXPECT_EQ(config["pin_memory"], false);
  EXPECT_EQ(config["prefetch_factor"], 4);
  EXPECT_EQ(config["persistent_workers"], true);
}

TEST(SessionTest, LoaderSettingsNotToldAreNullInTheConfigNotFalse) {
  testing::TempDir dir;
  {
    Session fs(quiet(dir.path()));
    for (int x : fs.wrap(std::vector<int>{1, 2})) (void)x;
  }
  const auto config = read_json(dir / "report.json")["config"];
  ASSERT_TRUE(config.contains("pin_memory"));
  EXPECT_TRUE(config["pin_memory"].is_null());
  EXPECT_TRUE(config["prefetch_factor"].is_null());
  EXPECT_TRUE(config["persistent_workers"].is_null());
  EXPECT_EQ(config["num_workers"], 0);
}

TEST(SessionTest, BadLoaderSettingsThrowNamingTheValueAndChangeNothing) {
  testing::TempDir dir;
  Session fs(quiet(dir.path()));
  try {
    fs.set_loader_settings({.batch_size = 16, .num_workers = -1});
    FAIL() << "num_workers -1 was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("num_workers: must be >= 0, got -1"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(fs.set_loader_settings({.prefetch_factor = 0}), std::invalid_argument);
  fs.finish();
  EXPECT_EQ(read_json(dir / "report.json")["config"]["batch_size"], 0) << "nothing was changed";
  EXPECT_THROW(fs.set_loader_settings({.num_workers = 2}), std::logic_error);
}

// The series value of `name` with the given label, from the exposition text; -1 when absent.
double series_value(const std::string& text, const std::string& name) {
  const std::regex re("(^|\\n)" + name + "\\{[^}]*\\} ([0-9.e+]+)");
  std::smatch m;
  if (!std::regex_search(text, m, re)) return -1;
  return std::stod(m[2]);
}

TEST(SessionTest, TheMetricsEndpointServesBatchesWhileTheLoopRuns) {
  testing::TempDir dir;
  Session::Options o = quiet(dir.path());
  o.metrics_addr = "127.0.0.1:0";
  o.rank = 3;
  o.host = "node7";
  Session fs(o);
  const std::string address = fs.metrics_address();
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  std::vector<double> seen;
  for (int x : fs.wrap(std::vector<int>{1, 2, 3, 4, 5})) {
    { auto step = fs.step(10); }
    if (x == 3 || x == 5) {
      const auto r = testing::http_get(port, "/metrics");
      ASSERT_EQ(r.status, 200) << r.error;
      EXPECT_NE(r.body.find("rank=\"3\""), std::string::npos);
      EXPECT_NE(r.body.find("host=\"node7\""), std::string::npos);
      seen.push_back(series_value(r.body, "feedscope_batches_total"));
    }
  }
  EXPECT_EQ(seen, (std::vector<double>{3, 5}));
  fs.finish();
  const auto r = testing::http_get(port, "/metrics");
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(series_value(r.body, "feedscope_samples_total"), 50);
  EXPECT_NE(r.body.find("feedscope_bottleneck_info"), std::string::npos);
}

// The bottleneck series at 1 in the exposition text, or empty while none is.
std::string bottleneck_set(const std::string& text) {
  static const std::regex re(
      R"re((^|\n)feedscope_bottleneck_info\{[^}]*bottleneck="([a-z_]+)"[^}]*\} 1(\n|$))re");
  std::smatch m;
  return std::regex_search(text, m, re) ? m[2].str() : "";
}

// As in `feedscope run`, the endpoint names the bottleneck of each window while the loop goes on,
// not only at finish(). A window is 5 s; the deadline leaves a slow machine room.
TEST(SessionTest, TheBottleneckMetricIsSetWhileTheLoopRuns) {
  testing::TempDir dir;
  Session::Options o = quiet(dir.path());
  o.metrics_addr = "127.0.0.1:0";
  o.batch_size = 8;
  Session fs(o);
  const std::string address = fs.metrics_address();
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::string named;
  for (int x : fs.wrap(std::views::iota(0))) {
    {
      auto step = fs.step(8);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a step that takes time
    }
    if (x % 50 != 0) continue;
    const auto r = testing::http_get(port, "/metrics");
    ASSERT_EQ(r.status, 200) << r.error;
    named = bottleneck_set(r.body);
    if (!named.empty() || std::chrono::steady_clock::now() > deadline) break;
  }
  // Read before finish(), which sets the metric too. The step takes all the time and the data is at hand: the step, on the CPU, is the limit.
  EXPECT_EQ(named, "cpu_compute");
}

// The live windows and the live data-stall ratio are measured on the session's clock, as its
// spans are. Under a clock that runs 100 ms per reading, waiting is a large share of the loop's
// clock time; measured against the real clock since the (fake) start, it would read about 0.
std::atomic<std::int64_t> fast_clock_ns{0};
std::int64_t fast_clock() noexcept { return fast_clock_ns.fetch_add(100'000'000); }

TEST(SessionTest, LiveWindowsRunOnTheSessionsClock) {
  testing::TempDir dir;
  Session::Options o = quiet(dir.path());
  o.metrics_addr = "127.0.0.1:0";
  o.batch_size = 8;
  o.clock = &fast_clock;
  Session fs(o);
  const std::string address = fs.metrics_address();
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::string named;
  double stall = -1;
  for (int x : fs.wrap(std::views::iota(0))) {
    { auto step = fs.step(8); }
    if (x % 20 != 0) continue;
    const std::string text = testing::http_get(port, "/metrics").body;
    named = bottleneck_set(text);
    stall = series_value(text, "feedscope_data_stall_ratio");
    if ((!named.empty() && stall > 0) || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(named.empty()) << "no live window closed within 3 real seconds";
  EXPECT_GT(stall, 0.1) << "the live stall ratio is wait time over the session clock's elapsed time";
}

// An srun task's variables in this process's environment while it lives (rank `rank` of 2, one node).
class SrunTaskEnvironment {
 public:
  explicit SrunTaskEnvironment(int rank) {
    for (const auto& [key, value] : {std::pair{"SLURM_JOB_ID", "7"}, std::pair{"SLURM_STEP_ID", "0"},
                                     std::pair{"SLURM_STEP_NUM_TASKS", "2"}, std::pair{"SLURM_NODEID", "0"}})
      ::setenv(key, value, 1);
    ::setenv("SLURM_PROCID", std::to_string(rank).c_str(), 1);
    ::setenv("SLURM_LOCALID", std::to_string(rank).c_str(), 1);
  }
  ~SrunTaskEnvironment() {
    for (const char* key : {"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS", "SLURM_NODEID",
                            "SLURM_PROCID", "SLURM_LOCALID"})
      ::unsetenv(key);
  }
};

// A free loopback port whose next port is free too.
int free_port_pair() {
  for (int i = 0; i < 50; ++i) {
    const int port = testing::free_loopback_port();
    if (port <= 0 || port >= 65535) continue;
    try {
      MetricsExporter::Options probe;
      probe.address = "127.0.0.1:" + std::to_string(port + 1);
      const MetricsExporter next(probe);
      return port;
    } catch (const MetricsError&) {
    }
  }
  return 0;
}

// Two ranks of one machine given the README's one address: without the offset the second could
// not listen. Each writes its own rank folder, and says where it listened and why.
TEST(SessionTest, RanksOfOneMachineListenOnThePortPlusTheirLocalRank) {
  testing::TempDir dir;
  const int port = free_port_pair();
  ASSERT_GT(port, 0);
  Session::Options o = quiet(dir.path());
  o.metrics_addr = "127.0.0.1:" + std::to_string(port);
  std::optional<Session> ranks[2];
  for (int rank : {0, 1}) {
    const SrunTaskEnvironment task(rank);
    ranks[rank].emplace(o);  // the environment is read at construction
  }
  EXPECT_EQ(ranks[0]->metrics_address(), "127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(ranks[1]->metrics_address(), "127.0.0.1:" + std::to_string(port + 1));
  for (int rank : {0, 1}) {
    ranks[rank]->finish();
    const auto j = read_json(dir / ("rank-" + std::to_string(rank)) / "report.json");
    EXPECT_EQ(j["config"]["rank"], rank);
    EXPECT_EQ(j["config"]["rank_source"], "slurm");
    EXPECT_EQ(j["config"]["metrics_port_offset"], rank);
    EXPECT_EQ(j["config"]["metrics_address"], "127.0.0.1:" + std::to_string(port + rank));
  }
}

TEST(SessionTest, APortTheLocalRankTakesPast65535IsABadOptionNamingIt) {
  testing::TempDir dir;
  const SrunTaskEnvironment task(1);
  Session::Options o = quiet(dir.path());
  o.metrics_addr = "127.0.0.1:65535";
  try {
    const Session fs(o);
    FAIL() << "a port past 65535 was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("\"127.0.0.1:65535\" of local rank 1 listens on port 65535 + 1 = "
                                         "65536, past 65535"),
              std::string::npos)
        << e.what();
  }
  o.metrics_addr = "127.0.0.1:0";  // any free port: no offset to add
  EXPECT_NO_THROW(Session{o});
}

}  // namespace
}  // namespace feedscope
