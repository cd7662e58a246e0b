// `feedscope run --num-workers auto` end to end: the report, the console, and what sweep and tune
// say to auto.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/feedscope_binary.h"
#include "tests/support/process.h"

namespace feedscope {
namespace autotune_cli_test {

using testing::kBinary;
using testing::run_process;

class AutotuneCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("feedscope-autotune-" + std::to_string(::getpid()) + "-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  nlohmann::json report() {
    std::ifstream in(dir_ / "report.json");
    return nlohmann::json::parse(in);
  }
  std::filesystem::path dir_;
};

TEST_F(AutotuneCli, AutoRunReportsItsMovesAndTheSettingItEndedAt) {
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:64", "--hidden", "16",
                              "--duration", "3", "--warmup", "3", "--batch-size", "16",
                              "--num-workers", "auto", "--prefetch", "auto", "--max-workers", "2",
                              "--ram-budget-mib", "64", "--device", "cpu", "--sample-hz", "0",
                              "--report-dir", dir_.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("workers auto (1, up to 2)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("to run at this setting without tuning, put in the config:"), std::string::npos)
      << r.out;
  const auto j = report();
  EXPECT_EQ(j["config"]["num_workers"], "auto");
  EXPECT_EQ(j["config"]["prefetch"], "auto");
  const auto& a = j["autotune"];
  ASSERT_TRUE(a.is_object()) << j.dump(2);
  EXPECT_TRUE(a["moves"].is_array());
  EXPECT_GE(a["final"]["num_workers"].get<int>(), 1);
  EXPECT_LE(a["final"]["num_workers"].get<int>(), 2);
  EXPECT_EQ(a["bounds"]["max_workers"], 2);
  EXPECT_EQ(a["bounds"]["ram_budget_mib"], 64);
  const std::string yaml = "num_workers: " + std::to_string(a["final"]["num_workers"].get<int>());
  EXPECT_NE(r.out.find(yaml), std::string::npos) << r.out;
  for (const auto& m : a["moves"]) {
    for (const char* key : {"t_s", "from", "to", "why", "before", "after", "kept"})
      EXPECT_TRUE(m.contains(key)) << key;
    // A move is a console line once judged; the final report lists every move, a trial the run
    // ended before measuring too.
    const bool judged = !m["after"].is_null() || m["why"].get<std::string>().rfind("back:", 0) == 0;
    if (judged) {
      EXPECT_NE(r.err.find("feedscope: autotune "), std::string::npos) << r.err;
    }
    EXPECT_NE(r.out.find("    autotune "), std::string::npos) << r.out;
  }
  bool said = false;
  for (const auto& e : j["diagnosis"]["evidence"])
    said = said || e.get<std::string>().find("the loader tuned itself") != std::string::npos;
  EXPECT_TRUE(said) << j["diagnosis"]["evidence"];
}

TEST_F(AutotuneCli, AFixedRunHasNoAutotune) {
  const auto r = run_process({kBinary, "run", "--dataset", "synthetic:64", "--hidden", "16",
                              "--steps", "10", "--warmup", "1", "--num-workers", "1", "--device",
                              "cpu", "--sample-hz", "0", "--report-dir", dir_.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(report()["autotune"].is_null());
}

TEST_F(AutotuneCli, SweepAndTuneMeasureFixedSettingsAndSaySo) {
  for (const char* command : {"sweep", "tune"}) {
    const auto r = run_process({kBinary, command, "--dataset", "synthetic:64", "--num-workers",
                                "auto", "--report-dir", dir_.string()});
    EXPECT_EQ(r.exit_code, 2) << command;
    EXPECT_NE(r.err.find("num_workers: 'auto'"), std::string::npos) << r.err;
  }
}

}  // namespace autotune_cli_test
}  // namespace feedscope
