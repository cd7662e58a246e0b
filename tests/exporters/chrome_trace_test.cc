#include "exporters/chrome_trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace feedscope {
namespace {

constexpr std::int64_t kOrigin = 5'000'000'000;

std::vector<LaneInfo> lanes() {
  return {{0, LaneRole::worker, "worker 0", 100},
          {1, LaneRole::worker, "worker 1", 101},
          {2, LaneRole::training, "training", 102},
          {3, LaneRole::copy, "copy stream", 103}};
}

std::vector<Span> spans() {
  return {{kOrigin + 1'000, kOrigin + 3'500, 0, Stage::decode, 0},
          {kOrigin + 2'000, kOrigin + 9'000, 1, Stage::read, 1},
          {kOrigin + 4'000, kOrigin + 4'200, 0, Stage::h2d, 3},
          {kOrigin + 5'000, kOrigin + 7'000, 0, Stage::step, 2},
          // Before the run's start: left out, or clipped when it reaches into the run.
          {kOrigin - 9'000, kOrigin - 8'000, 0, Stage::wait, 2},
          {kOrigin - 1'000, kOrigin + 500, 0, Stage::wait, 2}};
}

GpuActivity activity() {
  GpuActivity a;
  a.kernels.push_back({"void gemm<float, \"tile\\128\">(\x01)", kOrigin + 5'100, kOrigin + 6'000,
                       0, 7, 11});
  a.kernels.push_back({"elementwise", kOrigin + 6'100, kOrigin + 6'200, 0, 9, 12});
  a.memcpys.push_back({MemcpyKind::h2d, MemoryKind::pinned, 1 << 20, kOrigin + 4'000,
                       kOrigin + 4'100, 0, 13, 10});
  a.memsets.push_back({4096, kOrigin + 5'000, kOrigin + 5'050, 0, 7, 9});
  return a;
}

nlohmann::json trace(const GpuActivity* gpu) {
  std::ostringstream out;
  write_chrome_trace(out, spans(), lanes(), gpu, kOrigin);
  return nlohmann::json::parse(out.str());
}

std::string escaped(std::string_view text) {
  std::ostringstream out;
  write_json_string(out, text);
  return out.str();
}

TEST(ChromeTraceTest, SaysInUnixTimeWhereItsTimeZeroIs) {
  // ts 0 two seconds ago on the now_ns() clock is two seconds ago in Unix time: traces written
  // by different processes of one job (attach beside a Session, the ranks) line up by it.
  std::ostringstream out;
  write_chrome_trace(out, {}, {}, nullptr, now_ns() - 2'000'000'000);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  ASSERT_TRUE(j["baseTimeNanoseconds"].is_number_integer()) << out.str();
  const double unix_s = std::chrono::duration<double>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(j["baseTimeNanoseconds"].get<std::int64_t>() / 1e9, unix_s - 2, 30);
}

TEST(ChromeTraceTest, ParsesAndEveryEventHasTheRequiredFields) {
  const GpuActivity gpu = activity();
  const nlohmann::json j = trace(&gpu);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  ASSERT_TRUE(j["traceEvents"].is_array());
  int complete = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name"))
        << e.dump();
    if (e["ph"] == "X") {
      ++complete;
      ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number()) << e.dump();
      EXPECT_GE(e["ts"].get<double>(), 0) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0) << e.dump();
      EXPECT_TRUE(e["args"].is_object());
    } else {
      EXPECT_EQ(e["ph"], "M") << e.dump();
      EXPECT_TRUE(e["args"].is_object());
    }
  }
  // 5 spans in the run (one clipped), 2 kernels, 1 memcpy, 1 memset.
  EXPECT_EQ(complete, 9);
}

TEST(ChromeTraceTest, EveryLaneIsANamedSortedTrackAndSpansLandOnTheirLane) {
  const nlohmann::json j = trace(nullptr);
  std::map<int, std::string> names;
  std::map<int, int> order;
  std::set<int> pids;
  for (const auto& e : j["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] != "M") continue;
    if (e["name"] == "thread_name") names[e["tid"]] = e["args"]["name"];
    if (e["name"] == "thread_sort_index") order[e["tid"]] = e["args"]["sort_index"];
  }
  EXPECT_EQ(pids, std::set<int>{kHostPid}) << "no GPU process without a GPU trace";
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[1], "worker 0");
  EXPECT_EQ(names[3], "training");
  EXPECT_EQ(names[4], "copy stream");
  EXPECT_LT(order[3], order[4]) << "training above the copy stream";
  EXPECT_LT(order[4], order[1]) << "the copy stream above the workers";
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["name"] == "step") {
      EXPECT_EQ(names[e["tid"]], "training");
      EXPECT_EQ(e["args"]["batch"], 0);
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 5.0);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 2.0);
    }
    if (e["name"] == "decode") {
      EXPECT_EQ(names[e["tid"]], "worker 0");
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.0);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 2.5);
    }
    if (e["name"] == "wait") {
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.0) << "clipped to the run's start";
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.5);
    }
  }
}

TEST(ChromeTraceTest, GpuProcessHasATrackPerDeviceStream) {
  const GpuActivity gpu = activity();
  const nlohmann::json j = trace(&gpu);
  std::map<int, std::string> gpu_tracks;
  std::string process;
  for (const auto& e : j["traceEvents"]) {
    if (e["pid"] != kGpuPid || e["ph"] != "M") continue;
    if (e["name"] == "process_name") process = e["args"]["name"];
    if (e["name"] == "thread_name") gpu_tracks[e["tid"]] = e["args"]["name"];
  }
  EXPECT_EQ(process, "GPU");
  EXPECT_EQ(gpu_tracks, (std::map<int, std::string>{
                            {1, "GPU 0 stream 7"}, {2, "GPU 0 stream 9"}, {3, "GPU 0 stream 13"}}));
  bool saw_copy = false, saw_kernel = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["pid"] != kGpuPid || e["ph"] != "X") continue;
    if (e["name"] == "Memcpy HtoD (pinned)") {
      saw_copy = true;
      EXPECT_EQ(gpu_tracks[e["tid"]], "GPU 0 stream 13");
      EXPECT_EQ(e["args"]["bytes"], 1 << 20);
    }
    if (e["cat"] == "kernel" && e["args"]["correlation"] == 11) {
      saw_kernel = true;
      EXPECT_EQ(e["name"], "void gemm<float, \"tile\\128\">(\x01)") << "escaped and parsed back";
      EXPECT_EQ(gpu_tracks[e["tid"]], "GPU 0 stream 7");
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.9);
    }
  }
  EXPECT_TRUE(saw_copy);
  EXPECT_TRUE(saw_kernel);
}

// A sampled trace shows its windows on a track of their own, so the streams' empty stretches
// between them do not read as an idle GPU.
TEST(ChromeTraceTest, ASampledTracesWindowsHaveATrackOfTheirOwn) {
  GpuActivity gpu = activity();
  TracingMode mode;
  mode.sampling = TraceSampling{1'000'000'000, 10'000'000'000, 5'000'000'000};
  gpu.tracing = mode;
  gpu.traced_windows = {{kOrigin + 1'000'000, kOrigin + 2'000'000},
                        {kOrigin + 5'000'000, kOrigin + 6'000'000}};
  const nlohmann::json j = trace(&gpu);
  int windows_tid = -1;
  for (const auto& e : j["traceEvents"])
    if (e["pid"] == kGpuPid && e["ph"] == "M" && e["name"] == "thread_name" &&
        e["args"]["name"] == "traced (sampled: 1 s of every 10 s after the first 5 s)")
      windows_tid = e["tid"];
  ASSERT_GT(windows_tid, 3) << "after the three streams' tracks";
  std::vector<double> begins;
  for (const auto& e : j["traceEvents"])
    if (e["pid"] == kGpuPid && e["ph"] == "X" && e["tid"] == windows_tid) {
      EXPECT_EQ(e["name"], "traced");
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1000.0);
      begins.push_back(e["ts"].get<double>());
    }
  EXPECT_EQ(begins.size(), 2u);
  // Whole tracing has no such track.
  const GpuActivity whole = activity();
  const nlohmann::json whole_trace = trace(&whole);
  for (const auto& e : whole_trace["traceEvents"])
    EXPECT_FALSE(e["ph"] == "X" && e["cat"] == "sampling");
}

TEST(ChromeTraceTest, StringsAreEscapedForStrictJson) {
  EXPECT_EQ(escaped("plain"), "\"plain\"");
  EXPECT_EQ(escaped("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(escaped("\n\t\r\b\f"), "\"\\n\\t\\r\\b\\f\"");
  EXPECT_EQ(escaped(std::string_view("\x01\x1f\0", 3)), "\"\\u0001\\u001f\\u0000\"");
  EXPECT_EQ(escaped("caf\xc3\xa9"), "\"caf\xc3\xa9\"") << "valid UTF-8 passes through";
  EXPECT_EQ(escaped("bad\xff\xc3"), "\"bad\\ufffd\\ufffd\"") << "invalid bytes are replaced";
  EXPECT_EQ(escaped("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"") << "no UTF-16 surrogates";
  for (const std::string& text : {std::string("x\"\\\x7f\x02"), std::string("\xe2\x82\xac ok")})
    EXPECT_EQ(nlohmann::json::parse(escaped(text)).get<std::string>(), text);
}

TEST(ChromeTraceTest, FileIsWrittenWholeAndABadPathIsNamed) {
  // The pid keeps concurrent runs of the suite (other checkouts on this machine) apart.
  const auto dir = std::filesystem::temp_directory_path() /
                   ("feedscope-chrome-trace-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "trace.json").string();
  write_chrome_trace_file(path, spans(), lanes(), nullptr, kOrigin);
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  EXPECT_FALSE(j.is_discarded());
  EXPECT_TRUE(j.contains("traceEvents"));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  try {
    write_chrome_trace_file("/nonexistent-dir/x/trace.json", spans(), lanes(), nullptr, kOrigin);
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x/trace.json"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace feedscope
