#include "exporters/metrics_exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/http_client.h"
#include "tests/support/process_input.h"

namespace feedscope {
namespace {

// ---- A small reader of the text exposition format ---------------------------------------------

struct Series {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> types;  // "# TYPE name type"
  std::map<std::string, std::string> helps;
  std::vector<Series> series;
};

Exposition parse_exposition(const std::string& text) {
  Exposition out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0 || line.rfind("# HELP ", 0) == 0) {
      const auto rest = line.substr(7);
      const auto space = rest.find(' ');
      auto& table = line[2] == 'T' ? out.types : out.helps;
      table[rest.substr(0, space)] = space == std::string::npos ? "" : rest.substr(space + 1);
      continue;
    }
    if (line[0] == '#') continue;
    Series s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name += line[i++];
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::string key, value;
        while (i < line.size() && line[i] != '=') key += line[i++];
        i += 2;  // ="
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) {
            ++i;
            value += line[i] == 'n' ? '\n' : line[i];
          } else {
            value += line[i];
          }
          ++i;
        }
        ++i;  // closing quote
        if (i < line.size() && line[i] == ',') ++i;
        s.labels[key] = value;
      }
      ++i;  // }
    }
    s.value = std::stod(line.substr(i));
    out.series.push_back(std::move(s));
  }
  return out;
}

// The series of `name` carrying all of `labels` (others may be present too).
std::vector<Series> find(const Exposition& e, const std::string& name,
                         const std::map<std::string, std::string>& labels = {}) {
  std::vector<Series> found;
  for (const Series& s : e.series) {
    if (s.name != name) continue;
    const bool match = std::all_of(labels.begin(), labels.end(), [&](const auto& kv) {
      const auto it = s.labels.find(kv.first);
      return it != s.labels.end() && it->second == kv.second;
    });
    if (match) found.push_back(s);
  }
  return found;
}

// The value of the one series that matches; fails the test (and returns NaN) otherwise.
double value_of(const Exposition& e, const std::string& name,
                const std::map<std::string, std::string>& labels = {}) {
  const auto found = find(e, name, labels);
  EXPECT_EQ(found.size(), 1u) << name << " matched " << found.size() << " series";
  return found.size() == 1 ? found.front().value : std::nan("");
}

// ---- Helpers ---------------------------------------------------------------------------------

MetricsExporter::Options loopback_any_port() {
  MetricsExporter::Options o;
  o.address = "127.0.0.1:0";
  o.version = "0.1.0";
  o.torch_version = "2.1.2";
  o.cuda_version = "none";
  return o;
}

int port_of(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

UtilizationSample full_sample() {
  UtilizationSample s;
  s.time_ns = 1'000'000'000;
  s.cpu_system_ratio = 0.5;
  s.cpu_core_ratio = {0.25, 0.75};
  s.cpu_process_ratio = 0.4;
  s.threads = {{101, "worker 0", 0.9}, {102, "training", 0.3}, {103, "odd \"name\" \\ here", 0.1}};
  s.memory_available_bytes = 8'000'000'000ULL;
  s.rss_bytes = 1ULL << 30;
  s.pinned_bytes = 64ULL << 20;
  s.disks = {DiskSample{"vda", 4096, 100.0, 0.2}};
  s.io_pressure = PressureSample{0.05, 0.01, 1234};
  GpuSample gpu;
  gpu.index = 0;
  gpu.util_ratio = 0.8;
  gpu.memory_util_ratio = 0.3;
  gpu.memory_used_bytes = 2ULL << 30;
  s.gpus = {gpu};
  return s;
}

void update_everything(MetricsExporter& m) {
  m.add_batch(32);
  for (Stage stage : {Stage::read, Stage::decode, Stage::transform, Stage::collate, Stage::h2d,
                      Stage::wait, Stage::step})
    m.observe_stage(stage, 0.003);
  m.set_data_stall_ratio(0.12);
  m.set_queue_batches("ready", 2);
  m.set_queue_batches("in_flight", 4);
  m.add_h2d_bytes(true, 1024);
  m.add_h2d_bytes(false, 512);
  m.update_utilization(full_sample());
  m.set_bottleneck("cpu_preprocess");
  m.update_ranks({RankReading{0, 101, 0.3, 0.25, 2, 1.6, 0.7, 3ULL << 30},
                  RankReading{1, 102, 0.2, 0.1, 2, 0.4, std::nullopt, std::nullopt}});
  m.update_rank_windows({LiveWindow{101, 0, 1.0, 0.4, 6}, LiveWindow{103, std::nullopt, 1.0, 0.1, 9}});
  m.set_loader_setting(2, 4);
}

// DESIGN.md's metric list and this exporter's additions, with their types.
const std::map<std::string, std::string>& expected_metrics() {
  static const std::map<std::string, std::string> metrics = {
      {"feedscope_batches_total", "counter"},
      {"feedscope_samples_total", "counter"},
      {"feedscope_stage_seconds", "histogram"},
      {"feedscope_stage_busy_seconds_total", "counter"},
      {"feedscope_data_stall_ratio", "gauge"},
      {"feedscope_queue_batches", "gauge"},
      {"feedscope_pinned_bytes", "gauge"},
      {"feedscope_h2d_bytes_total", "counter"},
      {"feedscope_cpu_utilization_ratio", "gauge"},
      {"feedscope_thread_cpu_utilization_ratio", "gauge"},
      {"feedscope_memory_rss_bytes", "gauge"},
      {"feedscope_memory_available_bytes", "gauge"},
      {"feedscope_disk_read_bytes_total", "counter"},
      {"feedscope_disk_busy_ratio", "gauge"},
      {"feedscope_io_pressure_ratio", "gauge"},
      {"feedscope_gpu_utilization_ratio", "gauge"},
      {"feedscope_gpu_busy_ratio", "gauge"},
      {"feedscope_gpu_memory_used_bytes", "gauge"},
      {"feedscope_bottleneck_info", "gauge"},
      {"feedscope_build_info", "gauge"},
      {"feedscope_rank_cpu_cores", "gauge"},
      {"feedscope_rank_main_thread_busy_ratio", "gauge"},
      {"feedscope_rank_loader_workers", "gauge"},
      {"feedscope_rank_loader_workers_cpu_cores", "gauge"},
      {"feedscope_rank_data_stall_ratio", "gauge"},
      {"feedscope_rank_steps_per_second", "gauge"},
      {"feedscope_rank_gpu_sm_util_ratio", "gauge"},
      {"feedscope_rank_gpu_memory_bytes", "gauge"},
      {"feedscope_loader_workers", "gauge"},
      {"feedscope_loader_prefetch", "gauge"},
  };
  return metrics;
}

using HttpResponse = testing::HttpResult;
using testing::http_get;

// ---- Tests -----------------------------------------------------------------------------------

TEST(MetricsExporterTest, ExposesEveryMetricWithItsTypeAndHelpAfterUpdates) {
  MetricsExporter m(loopback_any_port());
  update_everything(m);
  const auto e = parse_exposition(m.scrape_text());
  for (const auto& [name, type] : expected_metrics()) {
    ASSERT_TRUE(e.types.count(name)) << name << " is not exposed";
    EXPECT_EQ(e.types.at(name), type) << name;
    EXPECT_FALSE(e.helps.at(name).empty()) << name;
    const std::string sample_name = type == "histogram" ? name + "_count" : name;
    EXPECT_FALSE(find(e, sample_name).empty()) << name << " has no series";
  }
  for (const auto& [name, type] : e.types)
    EXPECT_TRUE(expected_metrics().count(name)) << "unexpected metric " << name;
  for (const Series& s : e.series) EXPECT_EQ(s.name.rfind("feedscope_", 0), 0u) << s.name;
}

TEST(MetricsExporterTest, LoaderSettingSeriesAppearWithTheFirstSettingAndFollowItsMoves) {
  MetricsExporter m(loopback_any_port());
  EXPECT_TRUE(find(parse_exposition(m.scrape_text()), "feedscope_loader_workers").empty())
      << "no setting known yet: no series rather than a 0";
  m.set_loader_setting(1, 2);
  m.set_loader_setting(2, 4);  // num_workers=auto moved
  const auto e = parse_exposition(m.scrape_text());
  EXPECT_EQ(value_of(e, "feedscope_loader_workers"), 2);
  EXPECT_EQ(value_of(e, "feedscope_loader_prefetch"), 4);
}

// A rank's GPU series come from NVML's per-process readings: a rank NVML did not list has none,
// rather than a 0.
TEST(MetricsExporterTest, ARanksGpuSeriesAreThereOnlyWhereNvmlListedIt) {
  MetricsExporter m(loopback_any_port());
  m.update_ranks({RankReading{0, 101, 0.3, 0.25, 2, 1.6, 0.7, 3ULL << 30},
                  RankReading{1, 102, 0.2, 0.1, 2, 0.4, std::nullopt, std::nullopt}});
  const auto e = parse_exposition(m.scrape_text());
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_rank_gpu_sm_util_ratio", {{"rank", "0"}}), 0.7);
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_rank_gpu_memory_bytes", {{"rank", "0"}}), 3.0 * (1ULL << 30));
  EXPECT_TRUE(find(e, "feedscope_rank_gpu_sm_util_ratio", {{"rank", "1"}}).empty());
  EXPECT_TRUE(find(e, "feedscope_rank_gpu_memory_bytes", {{"rank", "1"}}).empty());
}

// A node's watch reads its launcher as a stand-in rank 0 until the ranks start (here 2 and 3, the
// second machine's): the stand-in's series go, as a rank's do when it ends, rather than stay at
// their last value as a rank that is not there (found by tests/python/test_two_hosts.py).
TEST(MetricsExporterTest, ARankNoLongerReadHasNoSeries) {
  MetricsExporter m(loopback_any_port());
  m.update_ranks({RankReading{0, 100, 0.6, 0.58, 0, 0, 0.5, 1ULL << 30}});
  m.update_ranks({RankReading{2, 101, 0.3, 0.25, 1, 0.2, std::nullopt, std::nullopt},
                  RankReading{3, 102, 0.3, 0.25, 1, 0.9, std::nullopt, std::nullopt}});
  auto e = parse_exposition(m.scrape_text());
  for (const char* name : {"feedscope_rank_cpu_cores", "feedscope_rank_main_thread_busy_ratio",
                           "feedscope_rank_loader_workers", "feedscope_rank_loader_workers_cpu_cores",
                           "feedscope_rank_gpu_sm_util_ratio", "feedscope_rank_gpu_memory_bytes"})
    EXPECT_TRUE(find(e, name, {{"rank", "0"}}).empty()) << name;
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_rank_loader_workers_cpu_cores", {{"rank", "3"}}), 0.9);
  m.update_ranks({RankReading{3, 102, 0.3, 0.25, 1, 0.8, std::nullopt, std::nullopt}});  // rank 2 ended
  e = parse_exposition(m.scrape_text());
  EXPECT_TRUE(find(e, "feedscope_rank_cpu_cores", {{"rank", "2"}}).empty());
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_rank_loader_workers_cpu_cores", {{"rank", "3"}}), 0.8);
}

TEST(MetricsExporterTest, CountersSumHistogramsBucketAndGaugesHoldTheLastValue) {
  MetricsExporter m(loopback_any_port());
  for (int i = 0; i < 3; ++i) m.add_batch(32);
  m.add_batch(-5);  // nonsense: counts a batch, no samples
  m.observe_stage(Stage::read, 0.25);
  m.observe_stage(Stage::read, 0.25);
  m.observe_stage(Stage::step, 0.004);
  m.observe_stage(Stage::step, -1.0);  // ignored
  m.add_h2d_bytes(true, 100);
  m.add_h2d_bytes(true, 50);
  m.add_h2d_bytes(false, 7);
  m.set_data_stall_ratio(0.3);
  m.set_queue_batches("ready", 3);
  m.set_queue_batches("ready", 1);
  m.set_queue_batches("spill", 9);
  const auto e = parse_exposition(m.scrape_text());
  EXPECT_EQ(value_of(e, "feedscope_batches_total"), 4);
  EXPECT_EQ(value_of(e, "feedscope_samples_total"), 96);
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_stage_busy_seconds_total", {{"stage", "read"}}), 0.5);
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_stage_busy_seconds_total", {{"stage", "step"}}), 0.004);
  EXPECT_EQ(value_of(e, "feedscope_stage_busy_seconds_total", {{"stage", "decode"}}), 0);
  EXPECT_EQ(value_of(e, "feedscope_stage_seconds_count", {{"stage", "read"}}), 2);
  EXPECT_EQ(value_of(e, "feedscope_stage_seconds_count", {{"stage", "step"}}), 1);
  EXPECT_EQ(value_of(e, "feedscope_stage_seconds_bucket", {{"stage", "read"}, {"le", "0.2"}}), 0);
  EXPECT_EQ(value_of(e, "feedscope_stage_seconds_bucket", {{"stage", "read"}, {"le", "0.5"}}), 2);
  EXPECT_EQ(value_of(e, "feedscope_stage_seconds_bucket", {{"stage", "step"}, {"le", "0.002"}}), 0);
  EXPECT_EQ(value_of(e, "feedscope_stage_seconds_bucket", {{"stage", "step"}, {"le", "0.005"}}), 1);
  EXPECT_EQ(value_of(e, "feedscope_stage_seconds_bucket", {{"stage", "step"}, {"le", "1e-05"}}), 0);
  EXPECT_EQ(value_of(e, "feedscope_stage_seconds_bucket", {{"stage", "step"}, {"le", "10"}}), 1);
  EXPECT_EQ(value_of(e, "feedscope_h2d_bytes_total", {{"memory", "pinned"}}), 150);
  EXPECT_EQ(value_of(e, "feedscope_h2d_bytes_total", {{"memory", "pageable"}}), 7);
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_data_stall_ratio"), 0.3);
  EXPECT_EQ(value_of(e, "feedscope_queue_batches", {{"queue", "ready"}}), 1);
  EXPECT_EQ(value_of(e, "feedscope_queue_batches", {{"queue", "in_flight"}}), 0);
  EXPECT_EQ(value_of(e, "feedscope_queue_batches", {{"queue", "spill"}}), 9);

  m.set_data_stall_ratio(1.7);  // ratios stay in 0..1
  EXPECT_EQ(value_of(parse_exposition(m.scrape_text()), "feedscope_data_stall_ratio"), 1);
}

TEST(MetricsExporterTest, UtilizationSampleLandsOnItsSeries) {
  MetricsExporter m(loopback_any_port());
  m.update_utilization(full_sample());
  auto e = parse_exposition(m.scrape_text());
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_cpu_utilization_ratio", {{"scope", "system"}}), 0.5);
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_cpu_utilization_ratio", {{"scope", "process"}}), 0.4);
  EXPECT_DOUBLE_EQ(
      value_of(e, "feedscope_cpu_utilization_ratio", {{"scope", "core"}, {"core", "1"}}), 0.75);
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_thread_cpu_utilization_ratio", {{"thread", "worker 0"}}),
                   0.9);
  EXPECT_DOUBLE_EQ(
      value_of(e, "feedscope_thread_cpu_utilization_ratio", {{"thread", "odd \"name\" \\ here"}}),
      0.1);
  EXPECT_EQ(value_of(e, "feedscope_memory_rss_bytes"), 1ULL << 30);
  EXPECT_EQ(value_of(e, "feedscope_memory_available_bytes"), 8'000'000'000ULL);
  EXPECT_EQ(value_of(e, "feedscope_pinned_bytes"), 64ULL << 20);
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_disk_busy_ratio", {{"device", "vda"}}), 0.2);
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_io_pressure_ratio"), 0.05);
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_gpu_utilization_ratio", {{"gpu", "0"}}), 0.8);
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_gpu_busy_ratio", {{"gpu", "0"}}), 0.8);
  EXPECT_EQ(value_of(e, "feedscope_gpu_memory_used_bytes", {{"gpu", "0"}}), 2ULL << 30);

  // A thread that is gone loses its series; threads sharing a name show their mean.
  UtilizationSample next = full_sample();
  next.threads = {{101, "worker 0", 0.2}, {201, "pool", 0.2}, {202, "pool", 0.6}};
  m.update_utilization(next);
  e = parse_exposition(m.scrape_text());
  EXPECT_EQ(find(e, "feedscope_thread_cpu_utilization_ratio").size(), 2u);
  EXPECT_TRUE(find(e, "feedscope_thread_cpu_utilization_ratio", {{"thread", "training"}}).empty());
  EXPECT_DOUBLE_EQ(value_of(e, "feedscope_thread_cpu_utilization_ratio", {{"thread", "pool"}}),
                   0.4);
}

// smaps_rollup's split by role, from a reading that read it: the sampled process is the trainer,
// a forked copy of it a loader worker (as watch tells them apart); a Session's and a watch's alike.
TEST(MetricsExporterTest, PrivateAndSharedMemoryAreSeriesByRole) {
  MetricsExporter m(loopback_any_port());
  UtilizationSample s = full_sample();
  s.pid = 100;
  s.threads = {{100, "python3", 0.5}};
  s.memory = MemoryRollup{0, 0, 1 << 20, 3 << 20, 0, 2 << 20};
  for (int pid : {101, 102}) {
    ProcessCpu w;
    w.pid = pid;
    w.ppid = 100;
    w.name = "python3";
    w.cmdline = "python3 train.py";
    w.memory = MemoryRollup{0, 0, 0, 5 << 20, 1 << 20, 7 << 20};
    s.children.push_back(w);
  }
  m.update_utilization(s);
  const auto e = parse_exposition(m.scrape_text());
  EXPECT_EQ(value_of(e, "feedscope_memory_private_bytes", {{"role", "trainer"}}), 4 << 20);
  EXPECT_EQ(value_of(e, "feedscope_memory_shared_bytes", {{"role", "trainer"}}), 2 << 20);
  EXPECT_EQ(value_of(e, "feedscope_memory_private_bytes", {{"role", "loader_worker"}}), 10 << 20);
  EXPECT_EQ(value_of(e, "feedscope_memory_shared_bytes", {{"role", "loader_worker"}}), 16 << 20);
}

TEST(MetricsExporterTest, AbsentSourcesAddNoSeries) {
  MetricsExporter m(loopback_any_port());
  m.update_utilization(UtilizationSample{});
  const auto e = parse_exposition(m.scrape_text());
  for (const char* name : {"feedscope_cpu_utilization_ratio", "feedscope_memory_rss_bytes",
                           "feedscope_io_pressure_ratio", "feedscope_gpu_utilization_ratio",
                           "feedscope_disk_read_bytes_total"})
    EXPECT_TRUE(find(e, name).empty()) << name;
  EXPECT_EQ(value_of(e, "feedscope_pinned_bytes"), 0);
}

TEST(MetricsExporterTest, AGpuReadingNvmlCouldNotTakeHasNoSeriesRatherThanZero) {
  MetricsExporter m(loopback_any_port());
  UtilizationSample s;
  GpuSample gpu;  // nvmlDeviceGetUtilizationRates failed; the memory reading is there
  gpu.memory_used_bytes = 2ULL << 30;
  gpu.unavailable["util_ratio"] = "nvmlDeviceGetUtilizationRates: status 3 (NOT_SUPPORTED)";
  s.gpus = {gpu};
  m.update_utilization(s);
  const auto e = parse_exposition(m.scrape_text());
  EXPECT_TRUE(find(e, "feedscope_gpu_utilization_ratio").empty());
  EXPECT_TRUE(find(e, "feedscope_gpu_busy_ratio").empty());
  EXPECT_EQ(value_of(e, "feedscope_gpu_memory_used_bytes", {{"gpu", "0"}}), 2ULL << 30);

  m.update_utilization(full_sample());  // utilization at 0.8 on gpu 0
  s.gpus[0].memory_used_bytes.reset();
  m.update_utilization(s);
  const auto later = parse_exposition(m.scrape_text());
  EXPECT_TRUE(find(later, "feedscope_gpu_utilization_ratio").empty()) << "not its last value";
  EXPECT_TRUE(find(later, "feedscope_gpu_busy_ratio").empty());
  EXPECT_TRUE(find(later, "feedscope_gpu_memory_used_bytes").empty());
}

TEST(MetricsExporterTest, DiskCounterFollowsTheCumulativeReadingByDelta) {
  MetricsExporter m(loopback_any_port());
  const auto disk_total = [&](std::uint64_t vda, std::uint64_t sdb) {
    UtilizationSample s;
    s.disks = {DiskSample{"vda", vda, 0, 0}, DiskSample{"sdb", sdb, 0, 0}};
    m.update_utilization(s);
    const auto e = parse_exposition(m.scrape_text());
    return std::pair{value_of(e, "feedscope_disk_read_bytes_total", {{"device", "vda"}}),
                     value_of(e, "feedscope_disk_read_bytes_total", {{"device", "sdb"}})};
  };
  EXPECT_EQ(disk_total(1000, 7), (std::pair{1000.0, 7.0}));   // first sight: the whole count
  EXPECT_EQ(disk_total(1500, 7), (std::pair{1500.0, 7.0}));   // + the delta
  EXPECT_EQ(disk_total(1500, 10), (std::pair{1500.0, 10.0}));  // unchanged stays
  EXPECT_EQ(disk_total(200, 10), (std::pair{1700.0, 10.0}));  // the device's counter restarted
  EXPECT_EQ(disk_total(300, 10), (std::pair{1800.0, 10.0}));
}

TEST(MetricsExporterTest, BottleneckIsOneHot) {
  MetricsExporter m(loopback_any_port());
  const std::vector<std::string> names = {"storage_io",  "cpu_preprocess",  "host_to_device",
                                          "gpu_compute", "launch_overhead", "cpu_compute"};
  auto e = parse_exposition(m.scrape_text());
  EXPECT_EQ(find(e, "feedscope_bottleneck_info").size(), names.size());
  for (const auto& name : names)
    EXPECT_EQ(value_of(e, "feedscope_bottleneck_info", {{"bottleneck", name}}), 0) << name;

  for (const auto& current : {std::string("storage_io"), std::string("gpu_compute")}) {
    m.set_bottleneck(current);
    e = parse_exposition(m.scrape_text());
    for (const auto& name : names)
      EXPECT_EQ(value_of(e, "feedscope_bottleneck_info", {{"bottleneck", name}}),
                name == current ? 1 : 0)
          << "current " << current << ", series " << name;
  }
  m.set_bottleneck("no_such_bottleneck");
  e = parse_exposition(m.scrape_text());
  EXPECT_EQ(find(e, "feedscope_bottleneck_info").size(), names.size());
  for (const Series& s : find(e, "feedscope_bottleneck_info")) EXPECT_EQ(s.value, 0);
}

TEST(MetricsExporterTest, ConstantLabelsGoOnEverySeriesAndEmptyOnesAreLeftOut) {
  auto options = loopback_any_port();
  options.const_labels = {{"rank", "3"}, {"host", "node1"}, {"job", ""}};
  MetricsExporter m(options);
  update_everything(m);
  const auto e = parse_exposition(m.scrape_text());
  ASSERT_GT(e.series.size(), 50u);
  for (const Series& s : e.series) {
    EXPECT_EQ(s.labels.count("rank") ? s.labels.at("rank") : "", "3") << s.name;
    EXPECT_EQ(s.labels.count("host") ? s.labels.at("host") : "", "node1") << s.name;
    EXPECT_EQ(s.labels.count("job"), 0u) << s.name;
  }
  EXPECT_EQ(value_of(e, "feedscope_build_info",
                     {{"version", "0.1.0"}, {"torch", "2.1.2"}, {"cuda", "none"}, {"rank", "3"}}),
            1);
}

TEST(MetricsExporterTest, BadConstantLabelNamesThrow) {
  for (const char* bad : {"bad-name", "__reserved", "stage", "gpu", "le"}) {
    auto options = loopback_any_port();
    options.const_labels = {{bad, "x"}};
    try {
      MetricsExporter m(options);
      ADD_FAILURE() << "constant label " << bad << " was accepted";
    } catch (const MetricsError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(MetricsExporterTest, PortZeroGivesTheRealPort) {
  MetricsExporter m(loopback_any_port());
  const std::string address = m.address();
  EXPECT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
  const int port = port_of(address);
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
}

TEST(MetricsExporterTest, HttpGetOfMetricsReturnsTheExposition) {
  auto options = loopback_any_port();
  options.const_labels = {{"rank", "0"}};
  MetricsExporter m(options);
  for (int i = 0; i < 5; ++i) m.add_batch(8);
  const HttpResponse r = http_get(port_of(m.address()), "/metrics");
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.status, 200);
  const auto e = parse_exposition(r.body);
  EXPECT_EQ(value_of(e, "feedscope_batches_total", {{"rank", "0"}}), 5);
  EXPECT_EQ(value_of(e, "feedscope_samples_total", {{"rank", "0"}}), 40);
  // The endpoint serves scrape_text()'s families and nothing else.
  const auto direct = parse_exposition(m.scrape_text());
  EXPECT_EQ(e.types, direct.types);
  EXPECT_EQ(http_get(port_of(m.address()), "/nothing-here").status, 404);
}

// The endpoint reuses its text until an update comes: every kind of update must be seen by the
// very next scrape.
TEST(MetricsExporterTest, EveryUpdateIsSeenByTheNextScrape) {
  MetricsExporter m(loopback_any_port());
  const int port = port_of(m.address());
  UtilizationSample sample;
  sample.pinned_bytes = 4096;
  const std::vector<std::pair<std::string, std::function<void()>>> updates = {
      {"add_batch", [&] { m.add_batch(8); }},
      {"observe_stage", [&] { m.observe_stage(Stage::decode, 0.25); }},
      {"set_data_stall_ratio", [&] { m.set_data_stall_ratio(0.5); }},
      {"set_queue_batches", [&] { m.set_queue_batches("ready", 3); }},
      {"add_h2d_bytes", [&] { m.add_h2d_bytes(true, 1024); }},
      {"update_utilization", [&] { m.update_utilization(sample); }},
      {"set_bottleneck", [&] { m.set_bottleneck("storage_io"); }}};
  std::string before = http_get(port, "/metrics").body;
  EXPECT_EQ(http_get(port, "/metrics").body, before) << "nothing changed, nothing differs";
  for (const auto& [name, update] : updates) {
    update();
    const std::string after = http_get(port, "/metrics").body;
    EXPECT_NE(after, before) << name << " was not seen by the next scrape";
    EXPECT_EQ(after, m.scrape_text()) << name;
    before = after;
  }
}

TEST(MetricsExporterTest, DestructionReleasesThePort) {
  std::string address;
  {
    MetricsExporter first(loopback_any_port());
    address = first.address();
  }
  EXPECT_NE(http_get(port_of(address), "/metrics").status, 200);
  auto options = loopback_any_port();
  options.address = address;
  MetricsExporter again(options);
  EXPECT_EQ(again.address(), address);
  EXPECT_EQ(http_get(port_of(address), "/metrics").status, 200);
}

TEST(MetricsExporterTest, SecondExporterOnTheSamePortThrowsNamingTheAddress) {
  MetricsExporter first(loopback_any_port());
  auto options = loopback_any_port();
  options.address = first.address();
  try {
    MetricsExporter second(options);
    FAIL() << "a second exporter bound " << options.address;
  } catch (const MetricsError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot listen on " + first.address()), std::string::npos) << what;
    EXPECT_NE(what.find("in use"), std::string::npos) << what;
  }
  // The first one still serves.
  EXPECT_EQ(http_get(port_of(first.address()), "/metrics").status, 200);
}

TEST(MetricsExporterTest, MalformedAddressesThrowNamingTheValue) {
  for (const std::string bad :
       {"", "9464", "127.0.0.1", "127.0.0.1:", "127.0.0.1:abc", "127.0.0.1:65536",
        "127.0.0.1:-1", "127.0.0.1:123456", "::1:9464", "[::1]9464", "[::1", "[::1]:",
        "[not-ipv6]:9464", "127.0.0.1:9464,9465", "127.0.0.1:9464s", ":9464", "my host:9464",
        " 127.0.0.1:9464"}) {
    auto options = loopback_any_port();
    options.address = bad;
    try {
      MetricsExporter m(options);
      ADD_FAILURE() << "\"" << bad << "\" was accepted as " << m.address();
    } catch (const MetricsError& e) {
      EXPECT_NE(std::string(e.what()).find("\"" + bad + "\""), std::string::npos) << e.what();
    }
  }
}

TEST(MetricsExporterTest, Ipv6LoopbackIsServedWhereTheKernelHasIpv6) {
  auto options = loopback_any_port();
  options.address = "[::1]:0";
  // /proc/net/if_inet6 lists the IPv6 addresses; ::1 is there unless IPv6 is off.
  std::ifstream inet6("/proc/net/if_inet6");
  const std::string addresses((std::istreambuf_iterator<char>(inet6)), {});
  if (addresses.find("00000000000000000000000000000001") == std::string::npos) {
    try {
      MetricsExporter m(options);
      ADD_FAILURE() << "bound " << m.address() << " without IPv6 loopback";
    } catch (const MetricsError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot listen on [::1]:0: "), std::string::npos)
          << e.what();
    }
    return;
  }
  MetricsExporter m(options);
  EXPECT_EQ(m.address().rfind("[::1]:", 0), 0u) << m.address();
  EXPECT_GT(port_of(m.address()), 0);
}

TEST(MetricsExporterTest, ConcurrentUpdatesLoseNothing) {
  MetricsExporter m(loopback_any_port());
  constexpr int kThreads = 4, kBatches = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kBatches; ++i) {
        m.add_batch(2);
        m.observe_stage(Stage::collate, 0.5);
      }
    });
  for (auto& t : threads) t.join();
  const auto e = parse_exposition(m.scrape_text());
  EXPECT_EQ(value_of(e, "feedscope_batches_total"), kThreads * kBatches);
  EXPECT_EQ(value_of(e, "feedscope_samples_total"), 2 * kThreads * kBatches);
  EXPECT_EQ(value_of(e, "feedscope_stage_seconds_count", {{"stage", "collate"}}),
            kThreads * kBatches);
  EXPECT_EQ(value_of(e, "feedscope_stage_busy_seconds_total", {{"stage", "collate"}}),
            0.5 * kThreads * kBatches);
}

// ---- promtool --------------------------------------------------------------------------------

constexpr const char* kPromtool = "/usr/bin/promtool";

testing::ProcessResult promtool_check_metrics(const std::string& text) {
  return testing::run_process_with_input({kPromtool, "check", "metrics"}, text);
}

TEST(MetricsExporterPromtoolTest, ReportsNoErrorsAndNoLintWarnings) {
  if (::access(kPromtool, X_OK) != 0) GTEST_SKIP() << kPromtool << " not found (Debian: prometheus)";
  auto options = loopback_any_port();
  options.const_labels = {{"rank", "1"}, {"host", "node-1.example"}};
  MetricsExporter m(options);
  const auto check = [](const std::string& what, const std::string& text) {
    ASSERT_FALSE(text.empty()) << what;
    const auto r = promtool_check_metrics(text);
    EXPECT_EQ(r.exit_code, 0) << what << ":\n" << r.out << r.err;
    EXPECT_EQ(r.out + r.err, "") << what;
  };
  check("scrape_text, fresh", m.scrape_text());
  update_everything(m);
  check("scrape_text, after updates", m.scrape_text());
  const HttpResponse r = http_get(port_of(m.address()), "/metrics");
  ASSERT_EQ(r.status, 200) << r.error;
  check("GET /metrics", r.body);
}

// The check above passes only on a clean exit and no output; this one shows that a problem
// reaches it.
TEST(MetricsExporterPromtoolTest, FlagsALintProblem) {
  if (::access(kPromtool, X_OK) != 0) GTEST_SKIP() << kPromtool << " not found (Debian: prometheus)";
  const auto r = promtool_check_metrics("# HELP demo_count x\n# TYPE demo_count counter\ndemo_count 1\n");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE((r.out + r.err).find("_total"), std::string::npos) << r.out << r.err;
}

// ---- Grafana dashboard -----------------------------------------------------------------------

const char* const kDashboardPath = FEEDSCOPE_SOURCE_DIR "/configs/grafana/feedscope-dashboard.json";

std::vector<std::string> panel_exprs(const nlohmann::json& dashboard) {
  std::vector<std::string> exprs;
  for (const auto& panel : dashboard.at("panels"))
    for (const auto& target : panel.value("targets", nlohmann::json::array()))
      if (target.contains("expr")) exprs.push_back(target["expr"]);
  return exprs;
}

nlohmann::json load_dashboard() {
  std::ifstream in(kDashboardPath);
  if (!in) throw std::runtime_error(std::string("cannot open ") + kDashboardPath);
  return nlohmann::json::parse(in);
}

void collect_queries(const nlohmann::json& node, std::vector<std::string>& out) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if ((key == "expr" || key == "query") && value.is_string()) out.push_back(value);
      if (key == "query" && value.is_object() && value.contains("query") &&
          value["query"].is_string())
        out.push_back(value["query"]);
      collect_queries(value, out);
    }
  } else if (node.is_array()) {
    for (const auto& item : node) collect_queries(item, out);
  }
}

TEST(GrafanaDashboardTest, QueriesUseOnlyExposedMetricsAndFilterByRank) {
  const auto dashboard = load_dashboard();

  // What a scrape exposes, with the series names a histogram adds.
  MetricsExporter m(loopback_any_port());
  update_everything(m);
  std::set<std::string> exposed;
  for (const auto& [name, type] : parse_exposition(m.scrape_text()).types) {
    exposed.insert(name);
    if (type == "histogram")
      for (const char* suffix : {"_bucket", "_sum", "_count"}) exposed.insert(name + suffix);
  }

  const std::vector<std::string> exprs = panel_exprs(dashboard);
  ASSERT_GE(exprs.size(), 6u);
  const std::regex metric_name("feedscope_[a-zA-Z0-9_]*");
  for (const std::string& expr : exprs) {
    EXPECT_NE(expr.find("rank=~\"$rank\""), std::string::npos) << "not filtered by rank: " << expr;
    bool any = false;
    for (auto it = std::sregex_iterator(expr.begin(), expr.end(), metric_name);
         it != std::sregex_iterator(); ++it) {
      any = true;
      EXPECT_TRUE(exposed.count(it->str())) << it->str() << " in " << expr;
    }
    EXPECT_TRUE(any) << "no feedscope metric in " << expr;
  }

  // Template variables: their queries name exposed metrics too.
  std::vector<std::string> variable_queries;
  std::set<std::string> variables;
  for (const auto& variable : dashboard.at("templating").at("list")) {
    variables.insert(variable.at("name"));
    collect_queries(variable, variable_queries);
  }
  EXPECT_TRUE(variables.count("rank"));
  EXPECT_TRUE(variables.count("datasource"));
  for (const std::string& query : variable_queries)
    for (auto it = std::sregex_iterator(query.begin(), query.end(), metric_name);
         it != std::sregex_iterator(); ++it)
      EXPECT_TRUE(exposed.count(it->str())) << it->str() << " in variable query " << query;
}

// Grafana substitutes $rank; with it replaced, every query must parse as PromQL. promtool checks
// expressions only inside a rules file.
TEST(GrafanaDashboardTest, QueriesAreValidPromQL) {
  if (::access(kPromtool, X_OK) != 0) GTEST_SKIP() << kPromtool << " not found (Debian: prometheus)";
  const std::vector<std::string> exprs = panel_exprs(load_dashboard());
  ASSERT_FALSE(exprs.empty());
  std::string rules = "groups:\n  - name: dashboard\n    rules:\n";
  for (std::size_t i = 0; i < exprs.size(); ++i) {
    std::string expr = std::regex_replace(exprs[i], std::regex("\\$rank"), ".*");
    ASSERT_EQ(expr.find('\''), std::string::npos) << expr;  // goes into a single-quoted scalar
    rules += "      - record: dashboard:query_" + std::to_string(i) + "\n        expr: '" + expr + "'\n";
  }
  const auto path = std::filesystem::temp_directory_path() /
                    ("feedscope-dashboard-rules-" + std::to_string(::getpid()) + ".yml");
  {
    std::ofstream out(path);
    out << rules;
  }
  const auto r = testing::run_process({kPromtool, "check", "rules", path.string()});
  std::filesystem::remove(path);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\n" << rules;
  EXPECT_NE(r.out.find("SUCCESS: " + std::to_string(exprs.size()) + " rules found"),
            std::string::npos)
      << r.out << r.err;
}

}  // namespace
}  // namespace feedscope
