#include "sampler/proc_fs.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

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

// NVML's PIDs are the host's: inside a container (a nested PID namespace) they are not ours.
TEST(ProcFsTest, ANestedPidNamespaceIsToldByItsNSpidLine) {
  EXPECT_FALSE(in_nested_pid_namespace("Name:\tpython3\nNSpid:\t1234\nVmRSS:\t1 kB\n"));
  EXPECT_TRUE(in_nested_pid_namespace("Name:\tpython3\nNSpid:\t81234\t17\nVmRSS:\t1 kB\n"));
  EXPECT_TRUE(in_nested_pid_namespace("Name:\tx\nNSpid:\t9\t8\t1"));  // the last line
  EXPECT_FALSE(in_nested_pid_namespace("Name:\tx\nPid:\t12\n"));  // a kernel before 4.1
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
  a.storage_read_bytes = 1000;
  b.storage_read_bytes = 1000 + 8'000'000;
  EXPECT_FALSE(r.storage_read_bytes_per_s) << "no /proc/self/io readings, no figure";
  EXPECT_DOUBLE_EQ(*usage_between(a, b, 2).storage_read_bytes_per_s, 4e6);
  b.process_ticks.reset();
  EXPECT_DOUBLE_EQ(usage_between(a, b, 2).process, 0.0) << "missing data reads as 0, not garbage";
}

// /proc/self/stat with utime, stime, cutime and cstime as given.
std::string self_stat(int utime, int stime, int cutime, int cstime) {
  return "42 (python3) S 1 1 1 0 -1 0 0 0 0 0 " + std::to_string(utime) + " " +
         std::to_string(stime) + " " + std::to_string(cutime) + " " + std::to_string(cstime) +
         " 20 0 1 0\n";
}

TEST(ProcFsTest, DescendantsCpuCountsTheLiveTreeAndTheReapedAlike) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / "feedscope-proc-descendants";
  fs::remove_all(root);
  const auto write = [&](const std::string& path, const std::string& text) {
    fs::create_directories((root / path).parent_path());
    std::ofstream(root / path) << text;
  };
  // self reaped workers worth 30 ticks; child 7 (10+5, and 4 it reaped), grandchild 8 (2).
  write("proc/self/stat", self_stat(100, 10, 20, 10));
  write("proc/self/task/42/children", "7 ");
  write("proc/7/stat", self_stat(10, 5, 3, 1));
  write("proc/7/task/7/children", "8 ");
  write("proc/8/stat", self_stat(2, 0, 0, 0));
  write("proc/8/task/8/children", "");
  const ProcFs proc(root.string());
  bool readable = false;
  EXPECT_EQ(descendant_pids(proc, &readable), (std::vector<int>{7, 8}));
  EXPECT_TRUE(readable);
  EXPECT_EQ(parse_reaped_children_cpu_ticks(self_stat(1, 2, 3, 4)), 7u);
  EXPECT_EQ(descendants_cpu_ticks(proc), 30u + 15 + 4 + 2);
  // Child 7 exits and is reaped: its ticks move into self's cutime; the total does not drop.
  fs::remove_all(root / "proc/7");
  fs::remove_all(root / "proc/8");
  write("proc/self/task/42/children", "");
  write("proc/self/stat", self_stat(100, 10, 20 + 15 + 4 + 2, 10));
  EXPECT_EQ(descendants_cpu_ticks(proc), 30u + 15 + 4 + 2);
  fs::remove_all(root);
}

TEST(CpuUsageTest, AChildThatLivesAndDiesInsideTheWindowStillCounts) {
  // A real forked child burns CPU and is reaped between the two snapshots: no sample ever saw it
  // alive, yet the window holds its CPU (a DataLoader's workers of a short epoch).
  const ProcFs proc;
  const auto now = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  const UsageSnapshot begin = take_usage_snapshot(proc, now());
  ASSERT_TRUE(begin.descendants_ticks);
  const pid_t child = ::fork();
  if (child == 0) {  // burns 200 ms of its own CPU, however busy the machine (10 s at most)
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    timespec cpu{};
    volatile unsigned x = 0;
    do {
      for (int i = 0; i < 100000; ++i) x = x + 1;
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    } while (cpu.tv_sec * 1000 + cpu.tv_nsec / 1000000 < 200 &&
             std::chrono::steady_clock::now() < give_up);
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const UsageSnapshot end = take_usage_snapshot(proc, now());
  const UsageRatios r = usage_between(begin, end, 2);
  ASSERT_TRUE(r.descendants_cores);
  // 200 ms of the child's CPU, in 10 ms clock ticks, over a window at least as long.
  const double cpu_s = *r.descendants_cores * static_cast<double>(end.time_ns - begin.time_ns) / 1e9;
  EXPECT_GE(cpu_s, 0.18);
  EXPECT_LE(*r.descendants_cores, 1.05) << "one single-threaded child: one core at most";
}

TEST(CpuUsageTest, SnapshotOfTheRealProc) {
  const UsageSnapshot s = take_usage_snapshot(ProcFs(), 0);
  EXPECT_TRUE(s.process_ticks);
  EXPECT_TRUE(s.system);
}

TEST(ProcFsTest, SchedstatRunDelayIsTheSecondField) {
  EXPECT_EQ(parse_schedstat_run_delay_ns("61882794 6010726 134\n"), 6010726u);
  EXPECT_FALSE(parse_schedstat_run_delay_ns("61882794\n"));
  EXPECT_FALSE(parse_schedstat_run_delay_ns("a b c"));
}

TEST(ProcFsTest, LoadavgsLastFieldIsTheLastPidGivenOut) {
  EXPECT_EQ(parse_loadavg_last_pid("0.52 0.58 0.59 3/402 12345\n"), 12345);
  EXPECT_FALSE(parse_loadavg_last_pid("0.52 0.58 0.59 3/402\n")) << "no last pid";
  EXPECT_FALSE(parse_loadavg_last_pid("0.52 0.58 0.59 3 12345\n")) << "not loadavg's fourth field";
  EXPECT_FALSE(parse_loadavg_last_pid(""));
}

TEST(ProcFsTest, IoSyscallsAreReadsAndWritesTogether) {
  EXPECT_EQ(parse_io_syscalls("rchar: 10\nwchar: 3\nsyscr: 4\nsyscw: 2\nread_bytes: 0\n"), 6u);
  EXPECT_FALSE(parse_io_syscalls("rchar: 10\nsyscr: 4\n")) << "no syscw: not a count";
}

TEST(ProcFsTest, TaskStatNamesTheTaskAsItsCommFileDoes) {
  const auto task = parse_task_stat("42 (pt_data worker) S 1 1 1 0 -1 0 5 0 2 0 3 4 0 0 20 0 1 0 0 0 7\n");
  ASSERT_TRUE(task);
  EXPECT_EQ(task->name, "pt_data worker");
  EXPECT_EQ(task->cpu_ticks, 7u);
  EXPECT_EQ(task->system_ticks, 4u);
  EXPECT_EQ(task->faults, 7u) << "minflt 5 + majflt 2";
  const auto odd = parse_task_stat("42 (a) b)) R 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 0 0 7\n");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->name, "a) b)");
  const std::string self = "/proc/self/task/" + std::to_string(::gettid());
  std::ifstream comm(self + "/comm");
  std::string expected;
  std::getline(comm, expected);
  EXPECT_EQ(parse_task_stat(*ProcFs().read(self + "/stat"))->name, expected);
}

}  // namespace
}  // namespace feedscope
