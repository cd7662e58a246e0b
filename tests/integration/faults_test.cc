// Faults a real `feedscope run` meets: the metrics port taken, no NVML or CUPTI, bad data (exit 3
// still writes the partial report), and dataset files that vanish or shrink while it runs.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/background_process.h"
#include "tests/support/feedscope_binary.h"
#include "tests/support/http_client.h"
#include "tests/support/metrics_endpoint.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;
using testing::BackgroundProcess;
using testing::kBinary;
using testing::run_process;
using testing::TempDir;

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return nullptr;
  return nlohmann::json::parse(in);
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A listening socket on a loopback port the kernel picked; closed on destruction.
class TakenPort {
 public:
  TakenPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    socklen_t length = sizeof addr;
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
        ::listen(fd_, 1) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length) == 0)
      port_ = ntohs(addr.sin_port);
  }
  ~TakenPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(FaultsTest, MetricsPortInUseExits4NamingTheAddressBeforeAnyLoadingOrTraining) {
  TempDir dir;
  const TakenPort taken;
  ASSERT_GT(taken.port(), 0);
  const std::string address = "127.0.0.1:" + std::to_string(taken.port());
  const auto r = run_process({kBinary, "run", "--metrics-addr", address, "--dataset",
                              "synthetic:64", "--steps", "5", "--report-dir",
                              (dir / "report").string()});
  EXPECT_EQ(r.exit_code, 4) << r.err;  // DESIGN.md: 4 runtime failure (device, I/O)
  EXPECT_TRUE(has(r.err, "cannot listen on " + address)) << r.err;
  EXPECT_TRUE(has(r.err, "Address already in use")) << r.err;
  EXPECT_FALSE(has(r.err, " on synthetic:")) << "the run started loading:\n" << r.err;
  EXPECT_FALSE(fs::exists(dir / "report" / "report.json"));
}

TEST(FaultsTest, WithoutNvmlOrCuptiTheRunCompletesAndTheReportSaysWhy) {
  const auto probe = run_process({kBinary, "probe", "--json"});
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  const auto facts = nlohmann::json::parse(probe.out);
  const bool nvml = !facts["nvml"].contains("unavailable");
  const bool cupti = !facts["cupti"].contains("unavailable");
  if (nvml && cupti) GTEST_SKIP() << "NVML and CUPTI both work on this machine";
  // CUPTI is loaded at run time: a device without CUPTI installed is a case the run handles.
  if (!facts["cuda"].contains("unavailable"))
    EXPECT_TRUE(cupti || has(facts["cupti"]["unavailable"].get<std::string>(), "libcupti"))
        << "a CUDA device is present, yet: " << facts["cupti"].dump();
  else
    EXPECT_FALSE(cupti) << "no CUDA device, yet CUPTI is called available: " << facts["cupti"].dump();

  TempDir dir;
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:64", "--hidden", "16",
                              "--steps", "10", "--warmup", "1", "--sample-hz", "50",
                              "--report-dir", (dir / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = read_json(dir / "report" / "report.json");
  EXPECT_EQ(j["throughput"]["steps"], 10);
  if (!nvml) {
    ASSERT_TRUE(j["utilization"]["unavailable"].contains("gpu")) << j["utilization"].dump();
    EXPECT_EQ(j["utilization"]["unavailable"]["gpu"], facts["nvml"]["unavailable"]);
    EXPECT_TRUE(j["utilization"]["gpu_util_ratio"].is_null());
  }
  ASSERT_TRUE(j["gpu_trace"].contains("unavailable")) << j["gpu_trace"].dump();
  const std::string why = j["gpu_trace"]["unavailable"];
  if (facts["cuda"].contains("unavailable"))
    EXPECT_EQ(why, "no CUDA device: " + facts["cuda"]["unavailable"].get<std::string>());
  else
    EXPECT_FALSE(why.empty());
}

// 200 records of 256 bytes; `bad` gets a flipped payload byte (a checksum error).
fs::path records_with_a_bad_record(const TempDir& dir, int bad) {
  const fs::path data = dir / "records";
  const auto made = run_process({kBinary, "make-dataset", "records", "--out", data.string(),
                                 "--count", "200", "--sample-bytes", "256"});
  EXPECT_EQ(made.exit_code, 0) << made.err;
  // 88-byte shard header, then records of a 24-byte header and the payload.
  std::fstream f(data / "shard-00000.rec", std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(88 + bad * 280 + 24 + 100);
  f.put('\x5a');
  return data;
}

struct BadDataCase {
  const char* name;
  int bad_record;
  std::vector<std::string> policy;
  std::int64_t steps_measured;  // batches of 10 in order, 2 of warm-up
  const char* message;
};

void PrintTo(const BadDataCase& c, std::ostream* os) { *os << c.name; }

class BadDataTest : public ::testing::TestWithParam<BadDataCase> {};

TEST_P(BadDataTest, Exit3StillWritesThePartialReportSayingWhyItStopped) {
  const BadDataCase c = GetParam();
  TempDir dir;
  const fs::path data = records_with_a_bad_record(dir, c.bad_record);
  std::ofstream(dir / "run.yaml") << "shuffle: false\n";
  std::vector<std::string> args = {
      kBinary, "run", "--config", (dir / "run.yaml").string(), "--dataset",
      "records:" + data.string(), "--hidden", "16", "--steps", "100", "--warmup", "2",
      "--batch-size", "10", "--num-workers", "1", "--report-dir", (dir / "report").string()};
  args.insert(args.end(), c.policy.begin(), c.policy.end());
  const auto r = run_process(args);
  const std::string shard = (data / "shard-00000.rec").string();
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(has(r.err, shard + " record " + std::to_string(c.bad_record))) << r.err;
  EXPECT_TRUE(has(r.err, "writing the partial report")) << r.err;

  const auto j = read_json(dir / "report" / "report.json");
  ASSERT_FALSE(j.is_null()) << "no partial report\n" << r.err;
  ASSERT_TRUE(j["stopped_early"].is_object()) << j["stopped_early"];
  EXPECT_EQ(j["stopped_early"]["reason"], "bad_data");
  const std::string message = j["stopped_early"]["message"];
  EXPECT_TRUE(has(message, c.message)) << message;
  EXPECT_TRUE(has(message, shard + " record " + std::to_string(c.bad_record))) << message;
  EXPECT_TRUE(j["interrupted"].is_null());
  EXPECT_EQ(j["throughput"]["steps"], c.steps_measured);
  EXPECT_GT(j["throughput"]["wall_s"].get<double>(), 0);
  EXPECT_EQ(j["stages"]["step"]["count"], c.steps_measured);
  EXPECT_EQ(j["data_errors"]["count"], 1);
  ASSERT_EQ(j["data_errors"]["examples"].size(), 1u);
  EXPECT_EQ(j["data_errors"]["examples"][0]["index"], c.bad_record);
  EXPECT_FALSE(j["diagnosis"]["verdict"].get<std::string>().empty());
  for (const char* file : {"report.html", "trace.json", "timeseries.csv"})
    EXPECT_TRUE(fs::exists(dir / "report" / file)) << file;
}

INSTANTIATE_TEST_SUITE_P(
    Policies, BadDataTest,
    ::testing::Values(
        BadDataCase{"fail", 125, {}, 10, "checksum mismatch"},
        BadDataCase{"skip_over_ratio", 125, {"--bad-sample", "skip", "--max-bad-ratio", "0"}, 10,
                    "over max_bad_ratio"},
        // The very first batch: the report covers what ran (nothing measured), not a crash.
        BadDataCase{"fail_in_warmup", 3, {}, 0, "checksum mismatch"}),
    [](const auto& info) { return std::string(info.param.name); });

// Dataset files changed while `feedscope run` goes on, after its first epochs: a JPEG deleted and
// another truncated (images:DIR), or a shard cut short (records:DIR). The test pauses the run
// (SIGSTOP) while it changes them, so the change lands between two steps whatever the machine's
// speed; the run only has to outlast two epochs and the test's reaction to them.
struct MidRunCase {
  const char* name;
  bool images;
  bool skip;
};

void PrintTo(const MidRunCase& c, std::ostream* os) { *os << c.name; }

class FilesChangedMidRunTest : public ::testing::TestWithParam<MidRunCase> {};

TEST_P(FilesChangedMidRunTest, FailExits3NamingTheFileAndSkipFinishesListingIt) {
  const MidRunCase c = GetParam();
  TempDir dir;
  const fs::path data = dir / "data";
  const auto made =
      c.images ? run_process({kBinary, "make-dataset", "images", "--out", data.string(), "--count",
                              "16", "--size", "64x48", "--classes", "2"})
               : run_process({kBinary, "make-dataset", "records", "--out", data.string(),
                              "--count", "32", "--sample-bytes", "3072", "--shard-bytes", "64KiB"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const int samples = c.images ? 16 : 32;
  constexpr int kSkipSteps = 150;  // about 4 s: a 1024-wide mlp step is about 25 ms here
  std::vector<std::string> args = {
      kBinary, "run", "--dataset", (c.images ? "images:" : "records:") + data.string(),
      "--hidden", "1024", "--layers", "2", "--steps", c.skip ? std::to_string(kSkipSteps) : "100000",
      "--warmup", "0", "--batch-size", "4", "--num-workers", "1", "--sample-hz", "0",
      "--metrics-addr", "127.0.0.1:0", "--bad-sample", c.skip ? "skip" : "fail",
      "--max-bad-ratio", "0.5", "--report-dir", (dir / "report").string()};
  if (c.images) args.insert(args.end(), {"--image-size", "32"});
  BackgroundProcess run(args, (dir / "run.log").string());
  ASSERT_TRUE(run.started());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  const int port = testing::announced_metrics_port(run, deadline);
  ASSERT_GT(port, 0) << run.log();
  bool two_epochs = false;
  while (!two_epochs && run.running() && std::chrono::steady_clock::now() < deadline) {
    const auto scrape = testing::http_get(port, "/metrics");
    const auto delivered = testing::metric_value(scrape.body, "feedscope_samples_total");
    two_epochs = delivered && *delivered >= 2 * samples;
    if (!two_epochs) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  run.send_signal(SIGSTOP);
  if (!two_epochs || !run.running()) {
    run.send_signal(SIGCONT);
    FAIL() << "the run ended before its files changed (make it longer):\n" << run.log();
  }

  std::vector<std::string> changed;  // the files a bad sample may name
  if (c.images) {
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(data))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    fs::remove(files[3]);
    fs::resize_file(files[12], fs::file_size(files[12]) / 2);
    changed = {files[3].string(), files[12].string()};
  } else {
    // Shard 1 holds records 21..31 of 3096 bytes after its 88-byte header: keep 21..24 and a
    // piece of 25; 26..31 now start past the end.
    fs::resize_file(data / "shard-00001.rec", 88 + 4 * 3096 + 100);
    changed = {(data / "shard-00001.rec").string()};
  }
  run.send_signal(SIGCONT);
  const int code = run.wait_exit(std::chrono::seconds(120));
  const std::string log = run.log();
  const auto names_a_changed_file = [&](const std::string& text) {
    return std::any_of(changed.begin(), changed.end(), [&](const std::string& f) { return has(text, f); });
  };
  const auto j = read_json(dir / "report" / "report.json");
  ASSERT_FALSE(j.is_null()) << "no report\n" << log;
  const auto& errors = j["data_errors"];
  ASSERT_GE(errors["examples"].size(), 1u) << errors;
  if (!c.images) {
    EXPECT_TRUE(has(errors["examples"][0]["message"], "truncated shard")) << errors;
  }
  if (!c.skip) {
    EXPECT_EQ(code, 3) << log;
    EXPECT_TRUE(names_a_changed_file(log)) << log;
    EXPECT_EQ(j["stopped_early"]["reason"], "bad_data");
    EXPECT_GE(j["throughput"]["steps"].get<int>(), 2 * samples / 4) << "the epochs before the change";
    EXPECT_EQ(errors["count"], 1);
    EXPECT_TRUE(names_a_changed_file(errors["examples"][0]["file"])) << errors;
    return;
  }
  EXPECT_EQ(code, 0) << log;
  EXPECT_TRUE(j["stopped_early"].is_null()) << j["stopped_early"];
  EXPECT_EQ(j["throughput"]["steps"], kSkipSteps);
  // At least one whole epoch ran over the changed files: both images, or records 25..31.
  EXPECT_GE(errors["count"].get<int>(), c.images ? 2 : 7) << errors;
  std::set<std::string> named;
  for (const auto& e : errors["examples"]) {
    EXPECT_TRUE(names_a_changed_file(e["file"])) << e;
    named.insert(c.images ? e["file"].get<std::string>() : changed[0]);
  }
  EXPECT_EQ(named.size(), changed.size()) << errors;
}

INSTANTIATE_TEST_SUITE_P(Datasets, FilesChangedMidRunTest,
                         ::testing::Values(MidRunCase{"images_fail", true, false},
                                           MidRunCase{"images_skip", true, true},
                                           MidRunCase{"records_fail", false, false},
                                           MidRunCase{"records_skip", false, true}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace feedscope
