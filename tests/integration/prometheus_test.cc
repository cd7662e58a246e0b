// A real Prometheus server (Debian's package) scrapes a running `feedscope run` on loopback, and
// its HTTP API must then answer for feedscope's series. Bounded in time; stops what it started.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/background_process.h"
#include "tests/support/http_client.h"
#include "tests/support/feedscope_binary.h"

namespace feedscope {
namespace {

using testing::BackgroundProcess;
using testing::http_get;

using testing::kBinary;
const std::string kPrometheus = "/usr/bin/prometheus";
constexpr auto kBound = std::chrono::seconds(90);

// Polls `probe` every 250 ms until it returns true or the bound passes.
// A PromQL query as a URL's query value.
std::string url_encoded(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// Every query of the Grafana dashboard's panels, with its $rank variable at "All".
std::vector<std::string> dashboard_queries() {
  std::ifstream in(FEEDSCOPE_SOURCE_DIR "/configs/grafana/feedscope-dashboard.json");
  const nlohmann::json dashboard = nlohmann::json::parse(in);
  std::vector<std::string> out;
  for (const auto& panel : dashboard.at("panels"))
    for (const auto& target : panel.value("targets", nlohmann::json::array()))
      if (target.contains("expr"))
        out.push_back(std::regex_replace(target["expr"].get<std::string>(), std::regex("\\$rank"), ".*"));
  return out;
}

template <typename Probe>
bool eventually(Probe probe, std::chrono::steady_clock::time_point deadline) {
  while (std::chrono::steady_clock::now() < deadline) {
    if (probe()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return false;
}

TEST(PrometheusIntegrationTest, RealServerScrapesARunningFeedscope) {
  if (::access(kPrometheus.c_str(), X_OK) != 0)
    GTEST_SKIP() << kPrometheus << " not found (Debian: prometheus)";
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("feedscope-prometheus-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  // A run long enough to outlast the test; the test stops it.
  BackgroundProcess feedscope({kBinary, "run", "--metrics-addr", "127.0.0.1:0", "--rank", "3",
                               "--world-size", "4", "--host", "testhost", "--duration", "300", "--hidden", "64",
                               "--device", "cpu",  // the bottlenecks expected below are a CPU step's
                               "--report-dir", (dir / "report").string()},
                              (dir / "feedscope.log").string());
  ASSERT_TRUE(feedscope.started());
  int port = 0;
  const std::regex announced(R"(metrics on http://127\.0\.0\.1:(\d+)/metrics)");
  ASSERT_TRUE(eventually(
      [&] {
        std::smatch m;
        const std::string log = feedscope.log();
        if (std::regex_search(log, m, announced)) port = std::stoi(m[1]);
        return port > 0 || !feedscope.running();
      },
      deadline));
  ASSERT_GT(port, 0) << "feedscope did not announce its endpoint:\n" << feedscope.log();

  const int prometheus_port = testing::free_loopback_port();
  {
    std::ofstream config(dir / "prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n"
           << "scrape_configs:\n  - job_name: feedscope\n    static_configs:\n"
           << "      - targets: [\"127.0.0.1:" << port << "\"]\n";
  }
  BackgroundProcess prometheus(
      {kPrometheus, "--config.file=" + (dir / "prometheus.yml").string(),
       "--storage.tsdb.path=" + (dir / "tsdb").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port), "--log.level=warn"},
      (dir / "prometheus.log").string());
  ASSERT_TRUE(prometheus.started());

  nlohmann::json result;
  const bool scraped = eventually(
      [&] {
        const auto r = http_get(prometheus_port,
                                "/api/v1/query?query=feedscope_samples_total%20%3E%200");
        if (r.status != 200) return false;
        const auto body = nlohmann::json::parse(r.body, nullptr, false);
        if (body.is_discarded() || body.value("status", "") != "success") return false;
        result = body["data"]["result"];
        return !result.empty();
      },
      deadline);
  ASSERT_TRUE(scraped) << "Prometheus never saw feedscope_samples_total > 0\nfeedscope:\n"
                       << feedscope.log() << "\nprometheus:\n" << prometheus.log();
  ASSERT_EQ(result.size(), 1u) << result.dump();
  const auto& metric = result[0]["metric"];
  EXPECT_EQ(metric.value("rank", ""), "3") << metric.dump();
  EXPECT_EQ(metric.value("host", ""), "testhost") << metric.dump();
  EXPECT_EQ(metric.value("job", ""), "feedscope") << metric.dump();

  // The scrape itself was healthy: Prometheus' own `up` for the target.
  const auto up = http_get(prometheus_port, "/api/v1/query?query=up%7Bjob%3D%22feedscope%22%7D");
  ASSERT_EQ(up.status, 200) << up.error;
  const auto up_json = nlohmann::json::parse(up.body);
  ASSERT_EQ(up_json["data"]["result"].size(), 1u) << up.body;
  EXPECT_EQ(up_json["data"]["result"][0]["value"][1], "1") << up.body;

  // The live diagnosis names one bottleneck while the run goes on (its first window ends 5 s
  // after the start).
  nlohmann::json bottleneck;
  ASSERT_TRUE(eventually(
      [&] {
        const auto r = http_get(prometheus_port,
                                "/api/v1/query?query=feedscope_bottleneck_info%20%3D%3D%201");
        if (r.status != 200) return false;
        const auto body = nlohmann::json::parse(r.body, nullptr, false);
        if (body.is_discarded()) return false;
        bottleneck = body["data"]["result"];
        return !bottleneck.empty();
      },
      deadline))
      << "no bottleneck at 1 during the run\n" << feedscope.log();
  ASSERT_EQ(bottleneck.size(), 1u) << bottleneck.dump();
  const std::string name = bottleneck[0]["metric"].value("bottleneck", "");
  EXPECT_TRUE(name == "cpu_compute" || name == "cpu_preprocess" || name == "storage_io") << name;

  // The real server answers every query the dashboard asks (a rank's series are `watch`'s, so
  // some answer with no series here; what matters is that each is a query Prometheus runs).
  for (const std::string& query : dashboard_queries()) {
    const auto r = http_get(prometheus_port, "/api/v1/query?query=" + url_encoded(query));
    EXPECT_EQ(r.status, 200) << query << "\n" << r.body;
    const auto body = nlohmann::json::parse(r.body, nullptr, false);
    EXPECT_TRUE(!body.is_discarded() && body.value("status", "") == "success") << query << "\n" << r.body;
  }

  prometheus.stop();
  feedscope.stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace feedscope
