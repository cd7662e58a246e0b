// Planted bottlenecks, run for real: the diagnosis must name each one, and its predicted
// speed-up for more workers must match what more workers measure. These run serially (ctest
// RUN_SERIAL): a concurrent test would take the second core the prediction counts on.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "loader/image_dataset_maker.h"
#include "loader/jpeg_encoder.h"
#include "loader/tar_archive.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/feedscope_binary.h"

namespace feedscope {
namespace {

using testing::run_process;
using testing::TempDir;

using testing::kBinary;

nlohmann::json run_report(std::vector<std::string> args, const std::filesystem::path& report_dir) {
  args.insert(args.begin(), {kBinary, "run"});
  // Every scenario here is planted on the CPU; `auto` would pick a GPU where there is one.
  if (std::find(args.begin(), args.end(), "--device") == args.end())
    args.insert(args.end(), {"--device", "cpu"});
  args.insert(args.end(), {"--report-dir", report_dir.string()});
  const auto r = run_process(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(report_dir / "report.json");
  return nlohmann::json::parse(in);
}

// Busy share of all CPUs over `window`, from /proc/stat: how much of the machine other
// processes are using right now.
double machine_busy(std::chrono::milliseconds window) {
  const auto read = [] {
    std::ifstream stat("/proc/stat");
    std::string cpu;
    std::uint64_t v, total = 0, idle = 0;
    stat >> cpu;
    for (int i = 0; i < 8 && stat >> v; ++i) {
      total += v;
      if (i == 3 || i == 4) idle += v;  // idle, iowait
    }
    return std::pair(total, idle);
  };
  const auto [t0, i0] = read();
  std::this_thread::sleep_for(window);
  const auto [t1, i1] = read();
  return t1 > t0 ? 1.0 - static_cast<double>(i1 - i0) / static_cast<double>(t1 - t0) : 0.0;
}

TEST(PlantedScenarioTest, LargeJpegsOnOneWorkerAreCpuPreprocessAndThePredictionHolds) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs 2 CPUs to add a worker";
  TempDir dir;
  const auto data = dir / "images";
  ASSERT_EQ(run_process({kBinary, "make-dataset", "images", "--out", data.string(), "--count",
                         "64", "--size", "1000x750", "--classes", "4"}).exit_code, 0);
  const std::vector<std::string> common = {"--dataset", "images:" + data.string(), "--model", "mlp",
                                           "--hidden", "16", "--layers", "1", "--batch-size", "16",
                                           "--steps", "48", "--warmup", "3", "--image-size", "64"};
  auto one = common;
  one.insert(one.end(), {"--num-workers", "1"});
  auto two = common;
  two.insert(two.end(), {"--num-workers", "2"});
  const auto predicted_by = [](const nlohmann::json& report) {
    for (const auto& rec : report["diagnosis"]["recommendations"])
      if (rec["setting"] == "num_workers=2") return rec["predicted_speedup"].get<double>();
    return 0.0;
  };
  const auto rate = [](const nlohmann::json& report) {
    return report["throughput"]["samples_per_s"].get<double>();
  };
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const auto r1 = run_report(one, dir / "one-0");
  EXPECT_EQ(r1["diagnosis"]["bottleneck"], "cpu_preprocess") << r1["diagnosis"].dump(2);
  ASSERT_GT(predicted_by(r1), 1.0) << "a recommendation to raise num_workers to 2, with a "
                                   << "prediction\n" << r1["diagnosis"].dump(2);

  // The comparison needs the machine to itself: with another process on a core, 2 workers
  // cannot show what they would.
  const double busy = machine_busy(std::chrono::milliseconds(500));
  if (busy > 0.25) GTEST_SKIP() << "other processes use " << 100 * busy << " % of the CPUs";
  // This machine's speed drifts by 20 % over seconds: each 2-worker run sits between two 1-worker
  // runs and is measured against their geometric mean, three times over; the median is compared
  // with the median prediction of the 1-worker runs. A round that misses is measured again, and
  // the medians of both rounds decide: a model that is wrong misses twice, a slow minute once.
  std::vector<double> ones = {rate(r1)}, predictions = {predicted_by(r1)}, speedups;
  std::string runs = std::to_string(rate(r1));
  double predicted = 0, measured = 0;
  for (int k = 1; k <= 6; ++k) {
    const auto r2 = run_report(two, dir / ("two-" + std::to_string(k)));
    const auto after = run_report(one, dir / ("one-" + std::to_string(k)));
    ASSERT_GT(predicted_by(after), 1.0) << after["diagnosis"].dump(2);
    speedups.push_back(rate(r2) / std::sqrt(ones.back() * rate(after)));
    ones.push_back(rate(after));
    predictions.push_back(predicted_by(after));
    runs += ", " + std::to_string(rate(r2)) + " (2 workers), " + std::to_string(rate(after));
    if (k % 3 != 0) continue;
    predicted = median(predictions);
    measured = median(speedups);
    if (std::abs(predicted / measured - 1.0) <= 0.25) break;
  }
  EXPECT_NEAR(predicted / measured, 1.0, 0.25)
      << "predicted " << predicted << "x, measured " << measured << "x; samples/s: " << runs;
  RecordProperty("predicted_speedup", std::to_string(predicted));
  RecordProperty("measured_speedup", std::to_string(measured));
}

TEST(PlantedScenarioTest, LightDataAndAHeavyMlpAreCpuCompute) {
  TempDir dir;
  const auto r = run_report({"--dataset", "synthetic:3x32x32", "--model", "mlp", "--hidden", "1024",
                             "--layers", "3", "--num-workers", "2", "--batch-size", "64", "--steps",
                             "15", "--warmup", "2"},
                            dir / "report");
  EXPECT_EQ(r["diagnosis"]["bottleneck"], "cpu_compute") << r["diagnosis"].dump(2);
  EXPECT_LT(r["diagnosis"]["data_stall_ratio"].get<double>(), 0.05);
}

// A tiny CPU step given a thread per core beside a worker per core: its intra-op and OpenBLAS
// pools fight the workers for the cores, and the step's thread runs a fraction of the step. The
// diagnosis must say to cap the step's threads, predicting a gain. Checked for the advice and the
// direction of its prediction, not for a measured speed-up (docs/wrap.md gives the measured one).
TEST(PlantedScenarioTest, ACpuStepOnEveryCoreBesideAWorkerPerCoreIsToldToCapItsThreads) {
  const auto cpus = static_cast<int>(std::thread::hardware_concurrency());
  if (cpus < 2) GTEST_SKIP() << "needs 2 CPUs for workers beside the step";
  if (cpus > 8) GTEST_SKIP() << "on " << cpus << " CPUs the planted step is too small to fill them";
  const double busy = machine_busy(std::chrono::milliseconds(500));
  if (busy > 0.25) GTEST_SKIP() << "other processes use " << 100 * busy << " % of the CPUs";
  TempDir dir;
  const auto data = dir / "images";
  ASSERT_EQ(run_process({kBinary, "make-dataset", "images", "--out", data.string(), "--count",
                         "64", "--classes", "4"}).exit_code, 0);
  const std::string n = std::to_string(cpus);
  const auto r = run_report({"--dataset", "images:" + data.string(), "--model", "mlp", "--hidden",
                             "16", "--layers", "1", "--image-size", "112", "--batch-size", "64",
                             "--num-workers", n, "--cpu-threads", n, "--steps", "30", "--warmup",
                             "3", "--device", "cpu"},
                            dir / "crowded");
  const nlohmann::json* cap = nullptr;
  for (const auto& rec : r["diagnosis"]["recommendations"])
    if (rec["setting"] == "torch::set_num_threads(1)") cap = &rec;
  ASSERT_NE(cap, nullptr) << r["diagnosis"].dump(2) << "\nthreads: " << r["utilization"]["threads"]
                          << "\nseries: " << r["utilization"]["series"];
  EXPECT_GT((*cap)["predicted_speedup"].get<double>(), 1.0) << cap->dump(2);
}

TEST(PlantedScenarioTest, ColdReadsOfARecordsDatasetAreStorageIo) {
  TempDir dir;
  const auto data = dir / "records";
  // 256 MB: more than the run reads at once, and dropped from the page cache before each epoch.
  ASSERT_EQ(run_process({kBinary, "make-dataset", "records", "--out", data.string(), "--count",
                         "2000", "--sample-bytes", "131072", "--shard-bytes", "64MiB"}).exit_code, 0);
  const std::vector<std::string> common = {"--dataset", "records:" + data.string(), "--loader-only",
                                           "--num-workers", "2", "--batch-size", "32", "--steps",
                                           "60", "--warmup", "2"};
  auto cold = common;
  cold.push_back("--cold-cache");
  const auto r = run_report(cold, dir / "cold");
  EXPECT_EQ(r["diagnosis"]["bottleneck"], "storage_io") << r["diagnosis"].dump(2);
  EXPECT_GT(r["stages"]["read"]["share"].get<double>(), r["stages"]["decode"]["share"].get<double>());
  // The same data warm is not storage-bound: the page cache, not the disk, serves it.
  const auto warm = run_report(common, dir / "warm");
  EXPECT_NE(warm["diagnosis"]["bottleneck"], "storage_io") << warm["diagnosis"].dump(2);
}

TEST(PlantedScenarioTest, ColdReadsOfWebdatasetShardsAreStorageIo) {
  TempDir dir;
  const auto data = dir / "shards";
  std::filesystem::create_directories(data);
  // 256 MB again, in 4 tar shards of 64 samples: a small JPEG, its label, and 1 MiB of other
  // bytes each (a feature array, say), which the reader reads past. The disk, not decode, is the
  // limit when cold.
  const std::vector<std::uint8_t> jpeg = encode_jpeg(synthetic_photo(64, 48, 0, 1, 0, 0), 64, 48);
  std::vector<std::uint8_t> extra(std::size_t{1} << 20);
  std::uint64_t state = 1;
  for (int s = 0; s < 4; ++s) {
    TarWriter tar((data / ("s-" + std::to_string(s) + ".tar")).string());
    for (int i = 0; i < 64; ++i) {
      for (std::uint8_t& b : extra) b = static_cast<std::uint8_t>((state = state * 6364136223846793005ULL + 1) >> 56);
      const std::string key = std::to_string(s * 64 + i);
      tar.add(key + ".jpg", jpeg);
      tar.add(key + ".cls", std::vector<std::uint8_t>{'1'});
      tar.add(key + ".bin", extra);
    }
    tar.finish();
  }
  const std::vector<std::string> common = {"--dataset", "webdataset:" + data.string(), "--loader-only",
                                           "--image-size", "64", "--num-workers", "2", "--batch-size", "16",
                                           "--steps", "40", "--warmup", "2"};
  auto cold = common;
  cold.push_back("--cold-cache");
  const auto r = run_report(cold, dir / "cold");
  EXPECT_EQ(r["diagnosis"]["bottleneck"], "storage_io") << r["diagnosis"].dump(2);
  EXPECT_GT(r["stages"]["read"]["share"].get<double>(), 0.3) << r["stages"].dump(2);
  const auto warm = run_report(common, dir / "warm");
  EXPECT_NE(warm["diagnosis"]["bottleneck"], "storage_io") << warm["diagnosis"].dump(2);
}

}  // namespace
}  // namespace feedscope
