// What lent GPUs left behind, checked on CPUs: every recording under tests/fixtures/gpu/ (a run or
// watch recorded with FEEDSCOPE_RECORD_DIR, docs/gpu.md#recordings) goes through today's GPU
// summary and diagnosis and must give the verdict, the rules, the advice and the GPU figures its
// expect.json holds. A rule changed on purpose changes a fixture's expectation on purpose:
// `feedscope replay DIR --json` shows the new one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "exporters/recording.h"
#include "profiler/rules/rule.h"
#include "tests/support/gpu_rule_cases.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(FEEDSCOPE_TEST_FIXTURES) / "fixtures" / "gpu";

std::vector<fs::path> recordings() {
  std::vector<fs::path> out;
  for (const fs::directory_entry& e : fs::directory_iterator(kFixtures))
    if (e.is_directory()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(GpuFixturesTest, EveryRecordingReplaysToItsExpectation) {
  const std::vector<fs::path> dirs = recordings();
  ASSERT_FALSE(dirs.empty()) << "no recording under " << kFixtures;
  for (const fs::path& dir : dirs) {
    SCOPED_TRACE(dir.filename().string());
    const Recording r = read_recording(dir);
    const Replayed replayed = replay(r);
    const Expectation e = read_expectation(dir);
    for (const std::string& line : compare_replay(replayed, e.expected)) ADD_FAILURE() << line;
    // Where the recording's cap left records out, what was kept must still say what today's rules
    // say of the run's own summary (its verdict then is expect.json's, for the record).
    if (e.run) {
      const Diagnosis run = diagnose_with(r, e.run->gpu_trace).diagnosis;
      EXPECT_EQ(replayed.diagnosis.bottleneck, run.bottleneck);
      EXPECT_EQ(replayed.diagnosis.rules, run.rules);
    }
    if (fs::exists(dir / "gpu.fsgpu")) {
      EXPECT_LE(fs::file_size(dir / "gpu.fsgpu") / 1'000'000, 2u) << "a fixture stays small";
    }
  }
}

// The fabricated fixtures are their generator's output (tests/support/gpu_recording_cases.h), not
// numbers typed in: regenerated, the inputs are the same bytes and the expectation the same
// diagnosis. FEEDSCOPE_WRITE_FIXTURES=1 writes them into the source tree instead.
TEST(GpuFixturesTest, TheFabricatedRecordingsAreWhatTheirGeneratorWrites) {
  const bool write = std::getenv("FEEDSCOPE_WRITE_FIXTURES") != nullptr;
  for (const testing::RecordingCase& c : testing::all_fabricated_recording_cases()) {
    SCOPED_TRACE(c.name);
    const fs::path committed = kFixtures / c.name;
    if (write) {
      fs::remove_all(committed);
      const RecordingWritten w = write_recording(committed, c.recording, c.produced, c.max_records);
      EXPECT_TRUE(w.replay_differences.empty());
      continue;
    }
    const testing::TempDir fresh;
    write_recording(fresh.path(), c.recording, c.produced, c.max_records);
    for (const char* file : {"recording.json", "input.json", "gpu.fsgpu", "steps.json"}) {
      ASSERT_EQ(fs::exists(fresh / file), fs::exists(committed / file)) << file;
      if (fs::exists(fresh / file)) {
        EXPECT_TRUE(bytes_of(fresh / file) == bytes_of(committed / file))
            << file << " differs from the generator's: FEEDSCOPE_WRITE_FIXTURES=1 rewrites it";
      }
    }
    const Expectation generated = read_expectation(fresh.path());
    const Expectation kept = read_expectation(committed);
    for (const std::string& line : compare_replay(kept.expected, generated.expected)) ADD_FAILURE() << line;
    EXPECT_EQ(kept.run.has_value(), generated.run.has_value());
  }
  if (write) GTEST_SKIP() << "wrote the fabricated fixtures under " << kFixtures;
}

// A GPU rule: one that reads the CUDA trace, NVML's view of the GPU or the device copy.
bool gpu_rule(const Rule& rule) {
  const auto named = [&rule](std::string_view word) { return rule.name.find(word) != std::string_view::npos; };
  return (rule.needs & kNeedsGpuTrace) != 0 || named("gpu") || (named("copy") && !named("memory"));
}

// Every GPU rule fires on at least one fixture, and tree_gpu_trace with each of its findings (by
// the verdict's first words): recorded on a lent GPU, or fabricated (expect.json's fabricated_by)
// until one is. A GPU rule added without a fixture fails here.
TEST(GpuFixturesTest, EveryGpuRuleFiresOnAFixture) {
  std::set<std::string> fired, findings;
  for (const fs::path& dir : recordings()) {
    const Expectation e = read_expectation(dir);
    const Diagnosis& d = e.expected.diagnosis;
    fired.insert(d.rules.begin(), d.rules.end());
    if (std::find(d.rules.begin(), d.rules.end(), "tree_gpu_trace") != d.rules.end())
      findings.insert(d.verdict.substr(0, d.verdict.find(':')));
    const bool named_fabricated = dir.filename().string().starts_with("fabricated-");
    EXPECT_EQ(named_fabricated, !e.fabricated_by.empty())
        << dir.filename() << ": a fabricated fixture says so in its expect.json, a recorded one does not";
  }
  for (const Rule& rule : diagnosis_rules())
    if (gpu_rule(rule)) {
      EXPECT_TRUE(fired.contains(std::string(rule.name)))
          << "GPU rule " << rule.name << " fires on no fixture under " << kFixtures
          << ": add a recording, or a fabricated case to tests/support/gpu_rule_cases.h";
    }
  for (const char* finding : {"Copy-bound", "GPU-bound", "Sync-bound", "Launch-bound", "Host-bound"})
    EXPECT_TRUE(findings.contains(finding)) << "tree_gpu_trace's '" << finding << "' on no fixture";
}

}  // namespace
}  // namespace feedscope
