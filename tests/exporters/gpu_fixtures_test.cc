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
#include <sstream>

#include "exporters/recording.h"
#include "tests/support/gpu_recording_cases.h"
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
    // Where the recording's cap left records out, what was kept must still say what the run said.
    if (e.run) {
      EXPECT_EQ(replayed.diagnosis.bottleneck, e.run->diagnosis.bottleneck);
      EXPECT_EQ(replayed.diagnosis.rules, e.run->diagnosis.rules);
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
  for (const testing::RecordingCase& c : testing::fabricated_recording_cases()) {
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

}  // namespace
}  // namespace feedscope
