// Runs the real feedscope binary end to end: exit codes, messages, report.json.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/support/process.h"
#include "tests/support/feedscope_binary.h"

namespace feedscope {
namespace {

using testing::run_process;

using testing::kBinary;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("feedscope-cli-" + std::to_string(::getpid()) + "-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  nlohmann::json read_report(const std::string& sub = "report") {
    std::ifstream in(dir_ / sub / "report.json");
    return nlohmann::json::parse(in);
  }
  std::filesystem::path dir_;
};

TEST_F(CliTest, RunWritesAReportWithTheSchemaAndStages) {
  // --device cpu: the expectations below are a CPU step's; `auto` is the GPU where there is one.
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:64", "--hidden", "32",
                              "--steps", "30", "--warmup", "3", "--batch-size", "16",
                              "--num-workers", "2", "--device", "cpu", "--report-dir",
                              (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("feedscope: "), std::string::npos);
  EXPECT_NE(r.out.find("bottleneck:"), std::string::npos);
  const auto j = read_report();
  EXPECT_EQ(j["schema"], "feedscope.report/1");
  EXPECT_EQ(j["throughput"]["steps"], 30);
  EXPECT_EQ(j["throughput"]["samples"], 30 * 16);
  EXPECT_GT(j["throughput"]["samples_per_s"].get<double>(), 0);
  EXPECT_EQ(j["stages"]["wait"]["count"], 30);
  EXPECT_EQ(j["stages"]["step"]["count"], 30);
  EXPECT_EQ(j["config"]["num_workers"], 2);
  EXPECT_EQ(j["environment"]["device"], "cpu");
  EXPECT_FALSE(j["environment"]["torch_version"].get<std::string>().empty());
  const std::string bottleneck = j["diagnosis"]["bottleneck"];
  EXPECT_TRUE(bottleneck == "cpu_compute" || bottleneck == "cpu_preprocess") << bottleneck;
  EXPECT_FALSE(j["diagnosis"]["verdict"].get<std::string>().empty());
}

TEST_F(CliTest, CpuRunWritesASpanTraceAndSaysWhyThereIsNoGpuTrace) {
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:64", "--hidden", "32",
                              "--steps", "20", "--warmup", "2", "--batch-size", "16",
                              "--num-workers", "1", "--device", "cpu",
                              "--report-dir", (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = read_report();
  ASSERT_TRUE(j["gpu_trace"].contains("unavailable")) << j["gpu_trace"].dump();
  const std::string reason = j["gpu_trace"]["unavailable"];
  EXPECT_TRUE(reason == "the step runs on the CPU" || reason.rfind("no CUDA device: ", 0) == 0 ||
              reason == "built without CUDA")
      << reason;
  std::ifstream in(dir_ / "report" / "trace.json");
  const auto trace = nlohmann::json::parse(in);
  std::map<int, std::string> lanes;
  int steps = 0;
  for (const auto& e : trace["traceEvents"]) {
    EXPECT_EQ(e["pid"], 1) << "host only without a GPU trace: " << e.dump();
    if (e["ph"] == "M" && e["name"] == "thread_name") lanes[e["tid"]] = e["args"]["name"];
    if (e["ph"] == "X" && e["name"] == "step") {
      ++steps;
      EXPECT_GE(e["ts"].get<double>(), 0);
    }
  }
  EXPECT_EQ(steps, 22) << "warm-up steps are in the trace too";
  std::set<std::string> names;
  for (const auto& [tid, name] : lanes) names.insert(name);
  EXPECT_TRUE(names.contains("training"));
  EXPECT_TRUE(names.contains("worker 0"));
}

TEST_F(CliTest, TrainingLowersTheLoss) {
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:3x8x8", "--steps", "150",
                              "--warmup", "0", "--hidden", "64", "--num-workers", "1",
                              "--report-dir", (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = read_report();
  EXPECT_LT(j["training"]["last_loss"].get<double>(), 0.7 * j["training"]["first_loss"].get<double>());
}

// A CPU step runs on the cores the workers leave unless --cpu-threads says how many; the report's
// model line says which it ran on.
TEST_F(CliTest, ACpuStepRunsOnTheCoresTheWorkersLeaveOrOnCpuThreads) {
  const auto report = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {kBinary, "run", "--dataset", "synthetic:3x8x8", "--steps",
                                     "2", "--warmup", "0", "--num-workers", "1", "--device", "cpu",
                                     "--sample-hz", "0", "--json", "--report-dir",
                                     (dir_ / "report").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_process(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  };
  const auto auto_threads = report({});
  ASSERT_TRUE(auto_threads.contains("training"));
  const int left = std::max(1, auto_threads["environment"]["cpus"].get<int>() - 1);
  EXPECT_NE(auto_threads["training"]["model"].get<std::string>().find(
                ", " + std::to_string(left) + (left == 1 ? " CPU thread" : " CPU threads")),
            std::string::npos)
      << "cpus - num_workers, at least 1: " << auto_threads["training"]["model"];
  const auto three = report({"--cpu-threads", "3"});
  ASSERT_TRUE(three.contains("training"));
  EXPECT_NE(three["training"]["model"].get<std::string>().find(", 3 CPU threads"),
            std::string::npos)
      << three["training"]["model"];
  EXPECT_EQ(three["config"]["cpu_threads"], 3);
}

TEST_F(CliTest, JsonFlagPrintsTheReportOnStdout) {
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:32", "--steps", "5",
                              "--warmup", "0", "--loader-only", "--json", "--report-dir",
                              (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "feedscope.report/1");
  EXPECT_EQ(j["config"]["loader_only"], true);
  EXPECT_EQ(j["stages"]["step"]["count"], 0);
}

// A boolean option alone means on, and takes on/off after a space or an '=', as docs/loader.md
// says.
TEST_F(CliTest, BooleanOptionsTakeAValueAfterASpaceOrAnEquals) {
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:32", "--steps", "3",
                              "--warmup", "0", "--loader-only", "--shuffle", "off", "--drop-last=on",
                              "--json", "--report-dir", (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["loader_only"], true);
  EXPECT_EQ(j["config"]["shuffle"], false);
  EXPECT_EQ(j["config"]["drop_last"], true);
  const auto bad = run_process({kBinary, "run", "--shuffle", "maybe"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("shuffle: 'maybe'"), std::string::npos) << bad.err;
}

TEST_F(CliTest, ConfigFileWithCommandLineOverride) {
  std::ofstream(dir_ / "run.yaml") << "dataset: synthetic:16\nsteps: 4\nwarmup: 0\nnum_workers: 1\n";
  const auto r = run_process({kBinary, "run", "--config", (dir_ / "run.yaml").string(),
                              "--num-workers", "0", "--report-dir", (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_report()["config"]["num_workers"], 0) << "the command line wins";
}

TEST_F(CliTest, BadConfigValuesExit2NamingKeyAndValue) {
  const auto neg = run_process({kBinary, "run", "--num-workers", "-3"});
  EXPECT_EQ(neg.exit_code, 2);
  EXPECT_NE(neg.err.find("num_workers: '-3'"), std::string::npos) << neg.err;
  const auto dev = run_process({kBinary, "run", "--device", "gpu7"});
  EXPECT_EQ(dev.exit_code, 2);
  EXPECT_NE(dev.err.find("auto | cpu | cuda | cuda:N"), std::string::npos) << dev.err;
  std::ofstream(dir_ / "bad.yaml") << "batch_size: 0\n";
  const auto zero = run_process({kBinary, "run", "--config", (dir_ / "bad.yaml").string()});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("bad.yaml:1"), std::string::npos) << zero.err;
  const auto both = run_process({kBinary, "run", "--steps", "3", "--duration", "2"});
  EXPECT_EQ(both.exit_code, 2) << "steps and duration exclude each other";
  const auto unknown = run_process({kBinary, "run", "--num-wrokers", "2"});
  EXPECT_EQ(unknown.exit_code, 2);
  struct Bad {
    const char* flag;
    const char* key;
    const char* value;
  };
  for (const Bad& b : {Bad{"--trace-max-spans", "trace_max_spans", "-1"},
                       Bad{"--trace-max-spans", "trace_max_spans", "abc"},
                       Bad{"--trace-max-spans", "trace_max_spans", "1.5"},
                       Bad{"--gpu-trace", "gpu_trace", "5/2"},
                       Bad{"--gpu-trace-lead", "gpu_trace_lead", "-1"}}) {
    const auto r = run_process({kBinary, "run", b.flag, b.value});
    EXPECT_EQ(r.exit_code, 2) << b.flag << " " << b.value;
    EXPECT_NE(r.err.find(std::string(b.key) + ": '" + b.value + "' (from " + b.flag + ")"),
              std::string::npos)
        << r.err;
  }
}

TEST_F(CliTest, ALongLoaderRunWritesATraceCappedAtTraceMaxSpansAndSaysWhatItLeftOut) {
  // Loader only, synthetic: hundreds of thousands of spans a second, far past the cap.
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:3x32x32", "--loader-only",
                              "--num-workers", "2", "--batch-size", "64", "--duration", "2",
                              "--sample-hz", "0", "--trace-max-spans", "5000",
                              "--report-dir", (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = read_report();
  const auto& t = j["trace"];
  EXPECT_EQ(j["config"]["trace_max_spans"], 5000);
  EXPECT_EQ(t["max_spans"], 5000);
  const auto total = t["spans_total"].get<std::int64_t>();
  const auto kept = t["spans_kept"].get<std::int64_t>();
  EXPECT_LE(kept, 5000);
  EXPECT_GT(total, 5000) << "a 2 s loader run makes more spans than the cap";
  EXPECT_EQ(t["spans_not_kept"].get<std::int64_t>(), total - kept);
  ASSERT_TRUE(t["omitted"].is_object()) << t.dump();
  const double from = t["omitted"]["from_s"], to = t["omitted"]["to_s"];
  EXPECT_LT(from, to);
  // The statistics still count every span in the window, far more than the trace holds.
  EXPECT_GT(j["stages"]["collate"]["count"].get<std::int64_t>(), 5000);
  std::ifstream in(dir_ / "report" / "trace.json");
  const auto trace = nlohmann::json::parse(in);
  std::int64_t spans = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++spans;
    const double ts_s = e["ts"].get<double>() / 1e6;
    // Nothing from the gap: the trace has the start and the end of the run, cleanly cut.
    EXPECT_FALSE(ts_s >= from + 1e-6 && ts_s <= to - 1e-6) << e.dump();
  }
  EXPECT_EQ(spans, kept);
  EXPECT_NE(r.out.find("trace.json: "), std::string::npos) << "the summary says so too";
  std::ifstream html(dir_ / "report" / "report.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("of " + std::to_string(total) + " stage spans"), std::string::npos);
}

TEST_F(CliTest, MissingGpuIsExit4WithTheReason) {
  const auto probe = run_process({kBinary, "probe", "--json"});
  ASSERT_EQ(probe.exit_code, 0);
  if (nlohmann::json::parse(probe.out)["torch"]["cuda_available"].get<bool>())
    GTEST_SKIP() << "a CUDA device is present";
  const auto r = run_process({kBinary, "run", "--device", "cuda", "--steps", "1",
                              "--report-dir", (dir_ / "report").string()});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("device 'cuda' is not available"), std::string::npos) << r.err;
}

TEST_F(CliTest, ProbeNamesEveryFacility) {
  const auto r = run_process({kBinary, "probe"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* key : {"cpus:", "memory:", "block devices:", "torch:", "cuda:", "cupti:", "nvml:"})
    EXPECT_NE(r.out.find(key), std::string::npos) << key;
  const auto j = nlohmann::json::parse(run_process({kBinary, "probe", "--json"}).out);
  EXPECT_GE(j["cpus"].get<int>(), 1);
  EXPECT_TRUE(j["cuda"].contains("devices"));
}

TEST_F(CliTest, DemoRunsOnEmbeddedDefaults) {
  const auto r = run_process({kBinary, "demo", "--steps", "10", "--warmup", "2"}, dir_.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("bottleneck:"), std::string::npos);
  EXPECT_NE(r.err.find("writing 512 JPEG files"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "feedscope-demo" / "report.json"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "feedscope-demo" / "report.html"));
  std::ifstream in(dir_ / "feedscope-demo" / "report.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_GT(j["stages"]["decode"]["count"].get<int>(), 0) << "the demo decodes JPEGs";
  // The second demo reuses the images.
  const auto again = run_process({kBinary, "demo", "--steps", "3", "--warmup", "1"}, dir_.string());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.err.find("writing 512 JPEG files"), std::string::npos) << again.err;
}

TEST_F(CliTest, HelpAndVersionExit0) {
  EXPECT_EQ(run_process({kBinary, "--help"}).exit_code, 0);
  const auto v = run_process({kBinary, "--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("feedscope "), std::string::npos);
  EXPECT_EQ(run_process({kBinary}).exit_code, 2) << "a subcommand is required";
}

std::vector<std::string> records_run(const std::filesystem::path& data, const std::filesystem::path& report) {
  return {kBinary, "run", "--dataset", "records:" + data.string(), "--loader-only", "--steps", "20",
          "--warmup", "0", "--batch-size", "16", "--sample-hz", "0", "--report-dir", report.string()};
}

TEST_F(CliTest, MakeDatasetRecordsThenRunLoadsIt) {
  const auto data = dir_ / "records";
  const auto made = run_process({kBinary, "make-dataset", "records", "--out", data.string(),
                                 "--count", "300", "--sample-bytes", "256", "--shard-bytes",
                                 "16KiB", "--variable", "--classes", "3", "--seed", "5"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_NE(made.out.find("300 records in 5 shard(s)"), std::string::npos) << made.out;
  EXPECT_TRUE(std::filesystem::exists(data / "records.index"));
  EXPECT_TRUE(std::filesystem::exists(data / "shard-00004.rec"));
  const auto r = run_process(records_run(data, dir_ / "report"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = read_report();
  EXPECT_EQ(j["config"]["dataset"], "records:" + data.string());
  EXPECT_GT(j["stages"]["read"]["count"].get<int>(), 0);
  EXPECT_GE(j["data_errors"]["attempted"].get<int>(), j["throughput"]["samples"].get<int>());
  EXPECT_EQ(j["data_errors"]["count"], 0);
  EXPECT_EQ(j["data_errors"]["policy"], "fail");
}

TEST_F(CliTest, CorruptRecordIsExit3NamingTheShardOrSkippedWithinTheRatio) {
  const auto data = dir_ / "records";
  ASSERT_EQ(run_process({kBinary, "make-dataset", "records", "--out", data.string(), "--count",
                         "200", "--sample-bytes", "256"}).exit_code, 0);
  {
    // Record 3 spans bytes 928..1207 of shard 0 (88-byte header, 280-byte records).
    std::fstream f(data / "shard-00000.rec", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('\x5a');
  }
  const std::string shard = (data / "shard-00000.rec").string();
  const auto fail = run_process(records_run(data, dir_ / "report"));
  EXPECT_EQ(fail.exit_code, 3) << fail.err;
  EXPECT_NE(fail.err.find(shard + " record 3"), std::string::npos) << fail.err;
  EXPECT_NE(fail.err.find("checksum mismatch"), std::string::npos) << fail.err;

  auto skip_args = records_run(data, dir_ / "report");
  skip_args.insert(skip_args.end(), {"--bad-sample", "skip"});
  const auto skip = run_process(skip_args);
  ASSERT_EQ(skip.exit_code, 0) << skip.err;
  const auto j = read_report();
  EXPECT_GE(j["data_errors"]["count"].get<int>(), 1);
  EXPECT_EQ(j["data_errors"]["examples"][0]["index"], 3);
  EXPECT_NE(j["data_errors"]["examples"][0]["file"].get<std::string>().find(shard), std::string::npos);

  skip_args.insert(skip_args.end(), {"--max-bad-ratio", "0"});
  const auto over = run_process(skip_args);
  EXPECT_EQ(over.exit_code, 3) << over.err;
  EXPECT_NE(over.err.find("over max_bad_ratio"), std::string::npos) << over.err;
  EXPECT_NE(over.err.find(shard), std::string::npos) << over.err;
}

TEST_F(CliTest, MakeDatasetRecordsBadValuesExit2NamingTheOption) {
  const auto out = (dir_ / "r").string();
  const auto zero = run_process({kBinary, "make-dataset", "records", "--out", out, "--count", "0",
                                 "--sample-bytes", "8"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--count"), std::string::npos) << zero.err;
  const auto text = run_process({kBinary, "make-dataset", "records", "--out", out, "--count", "4",
                                 "--sample-bytes", "many"});
  EXPECT_EQ(text.exit_code, 2);
  EXPECT_NE(text.err.find("--sample-bytes"), std::string::npos) << text.err;
  const auto missing = run_process({kBinary, "make-dataset", "records", "--count", "4"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--out"), std::string::npos) << missing.err;
  ASSERT_EQ(run_process({kBinary, "make-dataset", "records", "--out", out, "--count", "4",
                         "--sample-bytes", "8"}).exit_code, 0);
  const auto again = run_process({kBinary, "make-dataset", "records", "--out", out, "--count", "4",
                                  "--sample-bytes", "8"});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("--out"), std::string::npos) << again.err;
}

TEST_F(CliTest, RankLoadsItsShareOfTheDataset) {
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:16", "--synthetic-samples",
                              "1000", "--loader-only", "--steps", "3", "--warmup", "0",
                              "--batch-size", "50", "--rank", "1", "--world-size", "4",
                              "--sample-hz", "0", "--report-dir", (dir_ / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rank 1 of 4 (5 batches per epoch)"), std::string::npos) << r.err;
  EXPECT_EQ(read_report()["config"]["world_size"], 4);
  const auto bad = run_process({kBinary, "run", "--rank", "4", "--world-size", "4"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("rank: 4 is not below world_size 4"), std::string::npos) << bad.err;
}

TEST_F(CliTest, AnEpochWithoutABatchIsExit2SayingWhy) {
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:16", "--synthetic-samples",
                              "10", "--loader-only", "--steps", "1", "--batch-size", "4",
                              "--drop-last", "--sampler-drop-last", "--rank", "1", "--world-size", "4",
                              "--sample-hz", "0", "--report-dir", (dir_ / "report").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("rank 1 of 4: no batch of batch_size 4 in an epoch: the sampler's share is "
                       "2 of the dataset's 10 samples, and drop_last drops a partial batch"),
            std::string::npos)
      << r.err;
}

TEST_F(CliTest, MakeDatasetImagesThenLoadAndTrainOnIt) {
  const std::string data = (dir_ / "images").string();
  const auto made = run_process({kBinary, "make-dataset", "images", "--out", data, "--count", "12",
                                 "--size", "64x48", "--classes", "3", "--seed", "2"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_NE(made.out.find("wrote 12 JPEG files"), std::string::npos) << made.out;
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(data)) files += e.is_regular_file();
  EXPECT_EQ(files, 12);

  std::filesystem::create_directory_symlink(".", std::filesystem::path(data) / "class_0000" / "loop");
  const auto loaded = run_process({kBinary, "run", "--dataset", "images:" + data, "--loader-only",
                                   "--steps", "4", "--warmup", "0", "--batch-size", "4",
                                   "--image-size", "32", "--report-dir", (dir_ / "report").string()});
  ASSERT_EQ(loaded.exit_code, 0) << loaded.err;
  EXPECT_NE(loaded.err.find("1 symlink loop(s) in images:" + data + " not entered"), std::string::npos) << loaded.err;
  const auto j = read_report();
  EXPECT_EQ(j["throughput"]["samples"], 16);
  EXPECT_GE(j["stages"]["decode"]["count"].get<int>(), 16);
  EXPECT_GE(j["stages"]["transform"]["count"].get<int>(), 16);
  EXPECT_EQ(j["config"]["image_pipeline"], "train");

  const auto trained = run_process({kBinary, "run", "--dataset", "images:" + data, "--model", "cnn",
                                    "--hidden", "8", "--layers", "2", "--steps", "3", "--warmup", "0",
                                    "--batch-size", "4", "--image-size", "64", "--image-pipeline", "eval",
                                    "--report-dir", (dir_ / "cnn").string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_NE(trained.err.find("stem/2"), std::string::npos) << "a 64x64 input gets a stride-2 stem: " << trained.err;
}

TEST_F(CliTest, MakeDatasetBadOptionsExit2NamingTheOption) {
  const std::string out = (dir_ / "x").string();
  const auto count = run_process({kBinary, "make-dataset", "images", "--out", out, "--count", "0"});
  EXPECT_EQ(count.exit_code, 2);
  EXPECT_NE(count.err.find("--count: 0"), std::string::npos) << count.err;
  const auto size = run_process({kBinary, "make-dataset", "images", "--out", out, "--count", "2", "--size", "0x5"});
  EXPECT_EQ(size.exit_code, 2);
  EXPECT_NE(size.err.find("--size: 0x5"), std::string::npos) << size.err;
  const auto quality =
      run_process({kBinary, "make-dataset", "images", "--out", out, "--count", "2", "--quality", "101"});
  EXPECT_EQ(quality.exit_code, 2);
  EXPECT_NE(quality.err.find("--quality: 101"), std::string::npos) << quality.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(run_process({kBinary, "make-dataset", "images", "--count", "2"}).exit_code, 2) << "--out is required";
  EXPECT_EQ(run_process({kBinary, "make-dataset"}).exit_code, 2) << "a kind is required";
}

TEST_F(CliTest, CorruptImageIsExit3NamingTheFile) {
  const std::string data = (dir_ / "images").string();
  ASSERT_EQ(run_process({kBinary, "make-dataset", "images", "--out", data, "--count", "4", "--size", "64x48",
                         "--classes", "2"}).exit_code, 0);
  const auto victim = std::filesystem::path(data) / "class_0001" / "img_00000001.jpg";
  std::filesystem::resize_file(victim, std::filesystem::file_size(victim) * 6 / 10);
  const auto r = run_process({kBinary, "run", "--dataset", "images:" + data, "--loader-only", "--steps", "2",
                              "--warmup", "0", "--batch-size", "4", "--num-workers", "1",
                              "--image-size", "32", "--report-dir", (dir_ / "report").string()});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find(victim.string()), std::string::npos) << r.err;
  const auto missing = run_process({kBinary, "run", "--dataset", "images:" + (dir_ / "nope").string(),
                                    "--loader-only", "--steps", "1"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no such directory"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace feedscope
