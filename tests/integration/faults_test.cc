// Faults a real `feedscope run` meets: the metrics port taken, no NVML or CUPTI.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/feedscope_binary.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;
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
  if (!facts["cuda"].contains("unavailable"))
    EXPECT_TRUE(cupti) << "a CUDA device is present, yet: " << facts["cupti"].dump();
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

}  // namespace
}  // namespace feedscope
