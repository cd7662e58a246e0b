#include "sampler/proc_fs.h"

#include <gtest/gtest.h>

#include "sampler/cpu_usage.h"

namespace feedscope {
namespace {

const std::string kFixtures = FEEDSCOPE_TEST_FIXTURES "/sampler/fixtures";

TEST(ProcFsTest, ReadsFixtureRoot) {
  const ProcFs fs(kFixtures + "/basic");
  ASSERT_TRUE(fs.read("/proc/stat"));
  EXPECT_FALSE(fs.read("/proc/does-not-exist"));
  EXPECT_EQ(online_cpus(fs), 2);
  EXPECT_EQ(block_devices(fs), std::vector<std::string>{"vda"}) << "loop devices are skipped";
}

TEST(ProcFsTest, ParsesCpuTimes) {
  const auto times = parse_cpu_times(*ProcFs(kFixtures + "/basic").read("/proc/stat"));
  ASSERT_TRUE(times);
  EXPECT_EQ(times->busy, 1000u + 50 + 300 + 20 + 30 + 0);
  EXPECT_EQ(times->total, times->busy + 8000 + 100);
}

TEST(ProcFsTest, ParsesTaskTicksWithSpacesInTheName) {
  const auto ticks = parse_task_cpu_ticks(*ProcFs(kFixtures + "/basic").read("/proc/self/stat"));
  ASSERT_TRUE(ticks);
  EXPECT_EQ(*ticks, 325u);
}

TEST(ProcFsTest, ParsesMemory) {
  const ProcFs fs(kFixtures + "/basic");
  const auto mem = parse_meminfo(*fs.read("/proc/meminfo"));
  ASSERT_TRUE(mem);
  EXPECT_EQ(mem->total_bytes, 24576000ull * 1024);
  EXPECT_EQ(mem->available_bytes, 20480000ull * 1024);
  const auto self = parse_process_status(*fs.read("/proc/self/status"));
  ASSERT_TRUE(self);
  EXPECT_EQ(self->rss_bytes, 102400ull * 1024);
  EXPECT_EQ(self->rss_peak_bytes, 204800ull * 1024);
}

TEST(ProcFsTest, MalformedFilesAreUnavailableNotACrash) {
  const ProcFs fs(kFixtures + "/malformed");
  EXPECT_FALSE(parse_cpu_times(*fs.read("/proc/stat")));
  EXPECT_FALSE(parse_meminfo(*fs.read("/proc/meminfo")));
  EXPECT_FALSE(parse_task_cpu_ticks(*fs.read("/proc/self/stat")));
  EXPECT_FALSE(parse_process_status(*fs.read("/proc/self/status")));
  EXPECT_FALSE(parse_cpu_times(""));
  EXPECT_FALSE(parse_task_cpu_ticks("(unterminated"));
  EXPECT_TRUE(block_devices(fs).empty());
}

TEST(CpuUsageTest, RatiosBetweenTwoSnapshots) {
  UsageSnapshot a, b;
  a.time_ns = 0;
  b.time_ns = 2'000'000'000;  // 2 s, passed in: no sleeping
  a.process_ticks = 0;
  b.process_ticks = 2 * clock_ticks_per_second();  // 2 CPU-seconds over 2 s on 2 cpus
  a.system = CpuTimes{100, 1000};
  b.system = CpuTimes{400, 1400};
  const UsageRatios r = usage_between(a, b, 2);
  EXPECT_DOUBLE_EQ(r.process, 0.5);
  EXPECT_DOUBLE_EQ(r.system, 0.75);
  b.process_ticks.reset();
  EXPECT_DOUBLE_EQ(usage_between(a, b, 2).process, 0.0) << "missing data reads as 0, not garbage";
}

TEST(CpuUsageTest, SnapshotOfTheRealProc) {
  const UsageSnapshot s = take_usage_snapshot(ProcFs(), 0);
  EXPECT_TRUE(s.process_ticks);
  EXPECT_TRUE(s.system);
}

}  // namespace
}  // namespace feedscope
