#include "exporters/timeseries_csv.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

using testing::TempDir;

// Sample n is taken at n/10 s (10 Hz) with 2 cores.
UtilizationSample sample(std::uint64_t n) {
  UtilizationSample s;
  s.time_ns = static_cast<std::int64_t>(n) * 100'000'000;
  s.cpu_system_ratio = 0.5;
  s.cpu_core_ratio = {0.25, 0.75};
  s.rss_bytes = 123456789;
  return s;
}

std::vector<std::string> lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

double time_s(const std::string& row) { return std::stod(row.substr(0, row.find(','))); }

TEST(TimeseriesCsvTest, WithoutALimitEverySampleIsARow) {
  TempDir dir;
  const auto path = dir / "timeseries.csv";
  TimeseriesCsv csv(path.string(), 0, 0);
  for (std::uint64_t n = 0; n < 1000; ++n) csv.write(sample(n));
  const auto rows = lines(path);
  ASSERT_EQ(rows.size(), 1001u);
  EXPECT_EQ(rows[0].rfind("time_s,", 0), 0u);
  EXPECT_NE(rows[0].find(",core1_ratio"), std::string::npos);
  EXPECT_EQ(csv.stride(), 1u);
  EXPECT_EQ(csv.bytes(), std::filesystem::file_size(path));
}

// However many samples arrive, the file stays under its limit (plus one row), covers the run from
// its first sample to within one stride of its last, and its rows are evenly spaced.
TEST(TimeseriesCsvTest, AFullFileThinsToEveryOtherRowAndKeepsCoveringTheWholeRun) {
  TempDir dir;
  const auto path = dir / "timeseries.csv";
  const std::uint64_t limit = 16 * 1024;
  TimeseriesCsv csv(path.string(), 0, limit);
  const std::string header = TimeseriesCsv::header(sample(0));
  const std::size_t row_bytes = TimeseriesCsv::row(sample(1), 0, 2, 0).size();
  constexpr std::uint64_t kSamples = 100'000;  // 10,000 s at 10 Hz; ~4 MB unthinned
  for (std::uint64_t n = 0; n < kSamples; ++n) {
    csv.write(sample(n));
    ASSERT_LE(std::filesystem::file_size(path), limit + row_bytes) << "after sample " << n;
  }
  EXPECT_EQ(csv.bytes(), std::filesystem::file_size(path));
  const auto rows = lines(path);
  ASSERT_GT(rows.size(), 1u + (limit - header.size()) / row_bytes / 4) << "thinned too far";
  EXPECT_EQ(rows[0] + "\n", header);
  const std::uint64_t stride = csv.stride();
  EXPECT_GT(stride, 1u);
  EXPECT_EQ(stride & (stride - 1), 0u) << "a power of two";
  const double step_s = 0.1 * static_cast<double>(stride);
  for (std::size_t k = 1; k < rows.size(); ++k)
    EXPECT_NEAR(time_s(rows[k]), step_s * static_cast<double>(k - 1), 1e-6) << rows[k];
  EXPECT_GT(time_s(rows.back()), 0.1 * static_cast<double>(kSamples) - step_s - 1e-6)
      << "the latest samples are there";
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
}

}  // namespace
}  // namespace feedscope
