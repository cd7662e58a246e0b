// 200 scrapers at once against the Prometheus endpoint of a training `feedscope run`: every
// scrape is answered 200 with the whole exposition, and training completes its steps. Own client
// threads (tests/support/metrics_endpoint.h), so it never skips for want of wrk; no timing is
// asserted (bench/scrape_load.sh measures the cost).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <latch>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/background_process.h"
#include "tests/support/feedscope_binary.h"
#include "tests/support/metrics_endpoint.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

using testing::BackgroundProcess;
using testing::HttpConnection;

// The metric families of an exposition, or why it is not a whole one: every line a comment or
// "series value", the last one ended.
std::set<std::string> exposition_families(const std::string& body, std::string& broken) {
  std::set<std::string> families;
  if (body.empty() || body.back() != '\n') {
    broken = "does not end with a newline";
    return families;
  }
  std::istringstream lines(body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      families.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const std::size_t space = line.rfind(' ');
    std::size_t used = 0;
    try {
      if (space == std::string::npos) throw std::invalid_argument("no value");
      std::stod(line.substr(space + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (space == std::string::npos || used != line.size() - space - 1) {
      broken = "malformed line: " + line;
      return families;
    }
  }
  return families;
}

TEST(ScrapeLoadTest, TwoHundredConcurrentScrapersAreAllServedAndTrainingCompletes) {
  testing::TempDir dir;
  constexpr int kSteps = 600;  // about 5 s on 2 idle cores: well past the scrapes
  BackgroundProcess run({testing::kBinary, "run", "--dataset", "synthetic:3x32x32", "--hidden",
                         "256", "--batch-size", "64", "--num-workers", "1", "--steps",
                         std::to_string(kSteps), "--warmup", "5", "--metrics-addr", "127.0.0.1:0",
                         "--report-dir", (dir / "report").string()},
                        (dir / "run.log").string());
  ASSERT_TRUE(run.started());
  const int port =
      testing::announced_metrics_port(run, std::chrono::steady_clock::now() + std::chrono::seconds(60));
  ASSERT_GT(port, 0) << run.log();
  std::string broken;
  std::set<std::string> families;
  {
    HttpConnection first(port);
    const auto r = first.get("/metrics");
    ASSERT_EQ(r.status, 200) << r.error;
    families = exposition_families(r.body, broken);
    ASSERT_TRUE(broken.empty()) << broken;
    ASSERT_TRUE(families.contains("feedscope_batches_total")) << r.body;
  }

  // Every client opens a keep-alive connection and waits for the others, so all 200 are open at
  // once; then each scrapes 5 times on it, and twice more on a fresh connection each.
  constexpr int kClients = 200, kKeepAlive = 5, kFresh = 2;
  std::latch all_connected(kClients);
  std::atomic<int> served{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  const auto check = [&](const HttpConnection::Response& r) {
    std::string why;
    if (r.status != 200) {
      why = r.status == 0 ? r.error : "status " + std::to_string(r.status);
    } else {
      const std::set<std::string> got = exposition_families(r.body, why);
      if (why.empty())
        for (const std::string& f : families)
          if (!got.contains(f)) why = "family " + f + " missing";
    }
    if (why.empty()) {
      ++served;
      return;
    }
    std::lock_guard lock(failures_mutex);
    failures.push_back(why);
  };
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&] {
      HttpConnection connection(port);
      all_connected.arrive_and_wait();
      for (int i = 0; i < kKeepAlive; ++i) check(connection.get("/metrics"));
      for (int i = 0; i < kFresh; ++i) check(HttpConnection(port).get("/metrics"));
    });
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(served.load(), kClients * (kKeepAlive + kFresh));
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed scrapes; the first: "
                                << failures.front() << "\n" << run.log();

  EXPECT_EQ(run.wait_exit(std::chrono::seconds(300)), 0) << run.log();
  std::ifstream in(dir / "report" / "report.json");
  ASSERT_TRUE(in.good()) << run.log();
  const auto report = nlohmann::json::parse(in);
  EXPECT_EQ(report["throughput"]["steps"], kSteps);
  EXPECT_TRUE(report["stopped_early"].is_null());
}

}  // namespace
}  // namespace feedscope
