// webdataset:PATTERN and tfrecord:PATTERN through the real feedscope binary: make-dataset, run,
// exit codes.
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

using testing::kBinary;
using testing::run_process;
using testing::TempDir;
namespace fs = std::filesystem;

nlohmann::json report(const fs::path& dir) {
  std::ifstream in(dir / "report.json");
  return nlohmann::json::parse(in);
}

std::vector<std::string> loader_run(const std::string& dataset, const fs::path& report_dir) {
  return {kBinary, "run", "--dataset", dataset, "--loader-only", "--image-size", "32", "--batch-size", "8",
          "--num-workers", "2", "--steps", "12", "--warmup", "1", "--shuffle-buffer", "16",
          "--report-dir", report_dir.string()};
}

TEST(WebDatasetCliTest, MakeDatasetWebdatasetThenRunLoadsItColdAndPerRank) {
  TempDir dir;
  const auto data = dir / "shards";
  const auto made = run_process({kBinary, "make-dataset", "webdataset", "--out", data.string(), "--count", "40",
                                 "--shard-samples", "10", "--size", "64x48", "--classes", "4"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_NE(made.out.find("40 samples in 4 shard(s)"), std::string::npos) << made.out;
  ASSERT_TRUE(fs::exists(data / "shard-000003.tar"));

  const std::string dataset = "webdataset:" + (data / "shard-{000000..000003}.tar").string();
  auto args = loader_run(dataset, dir / "r");
  args.insert(args.end(), {"--cold-cache", "--classes", "4"});
  const auto r = run_process(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("(4 shards)"), std::string::npos) << r.out << r.err;
  const auto j = report(dir / "r");
  EXPECT_EQ(j["config"]["dataset"], dataset);
  // Each worker's stream ends an epoch with its own partial batch (20 samples: 8 + 8 + 4).
  EXPECT_EQ(j["throughput"]["steps"], 12);
  EXPECT_LE(j["throughput"]["samples"].get<int>(), 12 * 8);
  EXPECT_GE(j["throughput"]["samples"].get<int>(), 12 * 4);
  EXPECT_GT(j["stages"]["read"]["count"].get<int>(), 0);
  EXPECT_GT(j["stages"]["decode"]["count"].get<int>(), 0);
  EXPECT_EQ(j["data_errors"]["count"], 0);

  // Two shards per rank of two; a rank of five gets none and says so.
  args = loader_run("webdataset:" + data.string(), dir / "rank");
  args.insert(args.end(), {"--rank", "1", "--world-size", "2", "--classes", "4"});
  EXPECT_EQ(run_process(args).exit_code, 0);
  args = loader_run("webdataset:" + data.string(), dir / "rank");
  args.insert(args.end(), {"--rank", "4", "--world-size", "5", "--classes", "4"});
  const auto none = run_process(args);
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("rank 4 of 5 gets no shard"), std::string::npos) << none.err;
}

TEST(WebDatasetCliTest, APatternMatchingNothingIsExit2NamingIt) {
  TempDir dir;
  const std::string pattern = (dir / "train-{000000..000146}.tar").string();
  const auto missing = run_process(loader_run("webdataset:" + pattern, dir / "r"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("train-000000.tar' (from pattern '" + pattern + "') does not exist"),
            std::string::npos) << missing.err;
  const auto empty = run_process(loader_run("webdataset:" + dir.path().string(), dir / "r"));
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("pattern '" + dir.path().string() + "' matches no shard"), std::string::npos) << empty.err;
  const auto bad = run_process({kBinary, "make-dataset", "webdataset", "--out", (dir / "w").string(), "--count",
                                "4", "--shard-samples", "0"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--shard-samples"), std::string::npos) << bad.err;
}

TEST(WebDatasetCliTest, ATruncatedShardIsExit3NamingShardAndMemberOrSkippedAndListed) {
  TempDir dir;
  const auto data = dir / "shards";
  ASSERT_EQ(run_process({kBinary, "make-dataset", "webdataset", "--out", data.string(), "--count", "30",
                         "--shard-samples", "10", "--size", "64x48", "--classes", "4"}).exit_code, 0);
  const fs::path shard = data / "shard-000001.tar";
  fs::resize_file(shard, fs::file_size(shard) / 2);
  auto args = loader_run("webdataset:" + data.string(), dir / "fail");
  args.insert(args.end(), {"--classes", "4"});
  const auto fail = run_process(args);
  EXPECT_EQ(fail.exit_code, 3) << fail.err;
  EXPECT_NE(fail.err.find(shard.string() + " member '0000001"), std::string::npos) << fail.err;
  EXPECT_NE(fail.err.find("truncated"), std::string::npos) << fail.err;
  EXPECT_TRUE(report(dir / "fail").contains("stopped_early"));

  args = loader_run("webdataset:" + data.string(), dir / "skip");
  args.insert(args.end(), {"--classes", "4", "--bad-sample", "skip"});
  const auto skip = run_process(args);
  ASSERT_EQ(skip.exit_code, 0) << skip.err;
  const auto j = report(dir / "skip");
  EXPECT_GE(j["data_errors"]["count"].get<int>(), 1);
  EXPECT_NE(j["data_errors"]["examples"][0]["file"].get<std::string>().find(shard.string() + " member '"),
            std::string::npos) << j["data_errors"].dump();
}

TEST(TfRecordCliTest, MakeDatasetTfrecordThenRunLoadsItAndACorruptRecordIsExit3) {
  TempDir dir;
  const auto data = dir / "tf";
  const auto made = run_process({kBinary, "make-dataset", "tfrecord", "--out", data.string(), "--count", "24",
                                 "--shard-samples", "8", "--size", "64x48", "--classes", "4"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_NE(made.out.find("24 samples in 3 shard(s)"), std::string::npos) << made.out;
  const fs::path shard = data / "train-00001-of-00003";
  ASSERT_TRUE(fs::exists(shard));
  auto args = loader_run("tfrecord:" + (data / "train-{00000..00002}-of-00003").string(), dir / "r");
  args.insert(args.end(), {"--classes", "4"});
  const auto r = run_process(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(report(dir / "r")["data_errors"]["count"], 0);

  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);  // inside record 0's JPEG
    f.put('\x5a');
  }
  args = loader_run("tfrecord:" + data.string(), dir / "fail");
  args.insert(args.end(), {"--classes", "4"});
  const auto fail = run_process(args);
  EXPECT_EQ(fail.exit_code, 3) << fail.err;
  EXPECT_NE(fail.err.find(shard.string() + " record 0 at byte 0"), std::string::npos) << fail.err;
  EXPECT_NE(fail.err.find("data checksum mismatch"), std::string::npos) << fail.err;
  args.insert(args.end(), {"--bad-sample", "skip"});
  EXPECT_EQ(run_process(args).exit_code, 0);

  // Labels are 0..3: with --classes 3 the label 3 is a bad sample naming the value.
  args = loader_run("tfrecord:" + data.string(), dir / "classes");
  args.insert(args.end(), {"--classes", "3", "--bad-sample", "skip", "--max-bad-ratio", "1"});
  ASSERT_EQ(run_process(args).exit_code, 0);
  const auto j = report(dir / "classes");
  bool named = false;
  for (const auto& e : j["data_errors"]["examples"])
    named |= e["message"].get<std::string>().find("label 3 is outside 0..2") != std::string::npos;
  EXPECT_TRUE(named) << j["data_errors"].dump();
}

}  // namespace
}  // namespace feedscope
