// `feedscope run` and `feedscope watch` with FEEDSCOPE_RECORD_DIR (or --record-dir) write a
// recording, and `feedscope replay` gives back the verdict they printed: on a CPU, without GPU
// records, the whole path a lent GPU's runs take.
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

nlohmann::json report_of(const fs::path& dir) {
  std::ifstream in(dir / "report.json");
  return nlohmann::json::parse(in);
}

TEST(RecordingCliTest, ARunRecordedThroughTheEnvironmentReplaysToItsVerdict) {
  const testing::TempDir dir;
  const auto r = run_process({"/usr/bin/env", "FEEDSCOPE_RECORD_DIR=" + (dir / "rec").string(), kBinary,
                              "run", "--dataset", "synthetic:64", "--hidden", "32", "--steps", "20",
                              "--warmup", "2", "--batch-size", "16", "--num-workers", "1", "--device",
                              "cpu", "--report-dir", (dir / "report").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("feedscope: recording in " + (dir / "rec").string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("it replays to the same diagnosis"), std::string::npos) << r.err;
  for (const char* file : {"recording.json", "input.json", "expect.json"}) EXPECT_TRUE(fs::exists(dir / "rec" / file)) << file;
  EXPECT_FALSE(fs::exists(dir / "rec" / "gpu.fsgpu")) << "a CPU run has no GPU records";

  const auto replayed = run_process({kBinary, "replay", (dir / "rec").string(), "--json"});
  ASSERT_EQ(replayed.exit_code, 0) << replayed.err;
  const nlohmann::json j = nlohmann::json::parse(replayed.out);
  const nlohmann::json report = report_of(dir / "report");
  EXPECT_EQ(j["kind"], "run");
  EXPECT_EQ(j["diagnosis"]["bottleneck"], report["diagnosis"]["bottleneck"]);
  EXPECT_EQ(j["diagnosis"]["rules"], report["diagnosis"]["rules"]);
  EXPECT_EQ(j["diagnosis"]["verdict"], report["diagnosis"]["verdict"]);
  EXPECT_TRUE(j["expect"]["differences"].empty()) << j["expect"].dump();

  const auto text = run_process({kBinary, "replay", (dir / "rec").string()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("bottleneck: " + report["diagnosis"]["bottleneck"].get<std::string>()), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("expect.json: the same"), std::string::npos) << text.out;
}

TEST(RecordingCliTest, AWatchRecordedThroughTheFlagReplaysToItsVerdict) {
  const testing::TempDir dir;
  const auto r = run_process({kBinary, "watch", "--record-dir", (dir / "rec").string(), "--report-dir",
                              (dir / "report").string(), "--no-try-loader", "--", "/bin/sh", "-c",
                              "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("it replays to the same diagnosis"), std::string::npos) << r.err;
  const auto replayed = run_process({kBinary, "replay", (dir / "rec").string(), "--json"});
  ASSERT_EQ(replayed.exit_code, 0) << replayed.err;
  const nlohmann::json j = nlohmann::json::parse(replayed.out);
  EXPECT_EQ(j["kind"], "watch");
  EXPECT_EQ(j["diagnosis"]["bottleneck"], report_of(dir / "report")["diagnosis"]["bottleneck"]);
  EXPECT_TRUE(j["expect"]["differences"].empty()) << j["expect"].dump();
}

TEST(RecordingCliTest, ABrokenRecordingIsExit2NamingTheFileAndTheKey) {
  const testing::TempDir dir;
  const auto missing = run_process({kBinary, "replay", (dir / "none").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("feedscope replay: " + (dir / "none").string() + ": not a directory"),
            std::string::npos) << missing.err;
  fs::create_directories(dir / "rec");
  std::ofstream(dir / "rec" / "recording.json") << R"({"schema": "feedscope.recording/1", "kind": "run"})";
  std::ofstream(dir / "rec" / "input.json") << "{}";
  const auto broken = run_process({kBinary, "replay", (dir / "rec").string()});
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.err.find("input.json: stages: missing"), std::string::npos) << broken.err;
}

TEST(RecordingCliTest, SweepRefusesToRecordItsManyPoints) {
  const testing::TempDir dir;
  const auto r = run_process({kBinary, "sweep", "--num-workers", "0,1", "--record-dir", (dir / "rec").string(),
                              "--report-dir", (dir / "sweep").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("record_dir: is for run and watch"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace feedscope
