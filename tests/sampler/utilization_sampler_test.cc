#include "sampler/utilization_sampler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include "tests/support/durations.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;
using testing::kSecond;

// A /proc and /sys tree in a temp folder that a test rewrites between two samples.
class FakeProc {
 public:
  FakeProc() {
    root_ = fs::temp_directory_path() /
            ("feedscope-proc-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    for (const char* d : {"proc/self/task/101", "proc/self/task/102", "proc/pressure", "sys/block/sda",
                          "sys/block/loop0"})
      fs::create_directories(root_ / d);
  }
  ~FakeProc() { fs::remove_all(root_); }
  void write(const std::string& path, const std::string& text) {
    std::ofstream(root_ / path) << text;
  }
  void remove(const std::string& path) { fs::remove_all(root_ / path); }
  // utime+stime = ticks, for /proc/<...>/stat.
  static std::string task_stat(const std::string& name, int ticks) {
    return "101 (" + name + ") S 1 1 1 0 -1 0 0 0 0 0 " + std::to_string(ticks) +
           " 0 0 0 20 0 1 0 0 0 0\n";
  }
  // utime, stime and minflt apart.
  static std::string task_stat(const std::string& name, int utime, int stime, int faults) {
    return "101 (" + name + ") S 1 1 1 0 -1 0 " + std::to_string(faults) + " 0 0 0 " +
           std::to_string(utime) + " " + std::to_string(stime) + " 0 0 20 0 1 0 0 0 0\n";
  }
  // cpu totals: busy user ticks and idle ticks on two cores.
  void cpu(int busy0, int idle0, int busy1, int idle1) {
    write("proc/stat", "cpu  " + std::to_string(busy0 + busy1) + " 0 0 " +
                           std::to_string(idle0 + idle1) + " 0 0 0 0 0 0\n" +
                           "cpu0 " + std::to_string(busy0) + " 0 0 " + std::to_string(idle0) +
                           " 0 0 0 0 0 0\ncpu1 " + std::to_string(busy1) + " 0 0 " +
                           std::to_string(idle1) + " 0 0 0 0 0 0\n");
  }
  void baseline() {
    cpu(0, 0, 0, 0);
    write("proc/self/stat", task_stat("feedscope", 0));
    write("proc/self/task/101/stat", task_stat("feedscope", 0));
    write("proc/self/task/101/comm", "feedscope\n");
    write("proc/self/task/102/stat", task_stat("tbb_worker", 0));
    write("proc/self/task/102/comm", "tbb_worker\n");
    write("proc/meminfo", "MemTotal: 1000 kB\nMemAvailable: 600 kB\n");
    write("proc/self/status", "VmHWM: 300 kB\nVmRSS: 200 kB\n");
    write("proc/diskstats", "   8 0 sda 10 0 2048 5 0 0 0 0 0 100 0\n   8 1 sda1 10 0 2048 5 0 0 0 0 0 100 0\n"
                            "   7 0 loop0 1 0 8 0 0 0 0 0 0 1 0\n");
    write("proc/self/io", "rchar: 10\nread_bytes: 4096\n");
    write("proc/pressure/io", "some avg10=12.50 avg60=1.00 avg300=0.10 total=5000\n"
                              "full avg10=2.00 avg60=0.00 avg300=0.00 total=100\n");
    write("proc/pressure/cpu", "some avg10=50.00 avg60=1.00 avg300=0.10 total=9000\n");
    write("proc/pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  }
  ProcFs fs() const { return ProcFs(root_.string()); }
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

class FakeGpu final : public GpuSource {
 public:
  std::vector<GpuSample> read() override {
    ++reads;
    GpuSample g;
    g.util_ratio = 0.75;
    g.memory_used_bytes = 1 << 30;
    return {g};
  }
  std::string unavailable_reason() const override { return ""; }
  int reads = 0;
};

TEST(UtilizationSamplerTest, RatiosFromTwoReadingsWithThePassedClock) {
  FakeProc proc;
  proc.baseline();
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  o.thread_names = [] { return std::map<int, std::string>{{102, "worker 0"}}; };
  o.pinned_bytes = [] { return std::uint64_t{1 << 20}; };
  UtilizationSampler sampler(std::move(o));
  const UtilizationSample first = sampler.sample(1 * kSecond);
  EXPECT_FALSE(first.cpu_system_ratio) << "the first reading is only a baseline";

  const long hz = clock_ticks_per_second();
  proc.cpu(75, 25, 25, 75);  // core 0 75 % busy, core 1 25 %
  proc.write("proc/self/stat", FakeProc::task_stat("feedscope", static_cast<int>(hz)));
  proc.write("proc/self/task/101/stat", FakeProc::task_stat("feedscope", static_cast<int>(hz / 4)));
  proc.write("proc/self/task/102/stat", FakeProc::task_stat("tbb_worker", static_cast<int>(hz / 2)));
  proc.write("proc/diskstats", "   8 0 sda 20 0 6144 5 0 0 0 0 0 350 0\n");  // +2 MiB, +250 ms
  const UtilizationSample s = sampler.sample(2 * kSecond);  // one second later

  ASSERT_TRUE(s.cpu_system_ratio);
  EXPECT_DOUBLE_EQ(*s.cpu_system_ratio, 0.5);
  ASSERT_EQ(s.cpu_core_ratio.size(), 2u);
  EXPECT_DOUBLE_EQ(s.cpu_core_ratio[0], 0.75);
  EXPECT_DOUBLE_EQ(s.cpu_core_ratio[1], 0.25);
  ASSERT_TRUE(s.cpu_process_ratio);
  EXPECT_NEAR(*s.cpu_process_ratio, 0.5, 1e-9) << "1 CPU-second over 1 s on 2 cores";
  bool saw_worker = false;
  for (const ThreadCpu& t : s.threads) {
    if (t.tid == 102) {
      saw_worker = true;
      EXPECT_EQ(t.name, "worker 0") << "loader lanes name their threads";
      EXPECT_NEAR(t.ratio, 0.5, 0.02);
      EXPECT_TRUE(t.lane);
    } else {
      EXPECT_EQ(t.name, "feedscope") << "others keep the kernel's name";
      EXPECT_FALSE(t.lane);
    }
  }
  EXPECT_TRUE(saw_worker);
  EXPECT_EQ(*s.memory_available_bytes, 600u * 1024);
  EXPECT_EQ(*s.rss_bytes, 200u * 1024);
  EXPECT_EQ(*s.rss_peak_bytes, 300u * 1024);
  EXPECT_EQ(s.pinned_bytes, 1u << 20);
  ASSERT_EQ(s.disks.size(), 1u) << "partitions and loop devices are skipped";
  EXPECT_EQ(s.disks[0].device, "sda");
  EXPECT_DOUBLE_EQ(s.disks[0].read_bytes_per_s, 4096.0 * 512);
  EXPECT_DOUBLE_EQ(s.disks[0].busy_ratio, 0.25);
  EXPECT_EQ(*s.process_read_bytes_total, 4096u);
  ASSERT_TRUE(s.io_pressure);
  EXPECT_DOUBLE_EQ(s.io_pressure->some_avg10, 0.125);
  EXPECT_DOUBLE_EQ(*s.io_pressure->full_avg10, 0.02);
  EXPECT_FALSE(s.cpu_pressure->full_avg10);

  const UtilizationSummary sum = sampler.summary();
  EXPECT_EQ(sum.samples, 1u);
  EXPECT_DOUBLE_EQ(sum.series.at("cpu_system_ratio").mean, 0.5);
  EXPECT_NEAR(sum.thread_busy_mean.at("worker 0"), 0.5, 0.02);
  EXPECT_NEAR(sum.series.at("cpu_other_threads_cores").mean, 0.25, 0.02)
      << "thread 101 is no lane: its quarter of a core competes with the worker";
  EXPECT_EQ(sum.unavailable.at("gpu"), "GPU sampling not requested");
}

// A thread busy in the kernel with no read, write or page fault gives its core away in
// sched_yield (OpenBLAS's pool after each call); one that reads, faults or computes does not.
TEST(UtilizationSamplerTest, AThreadBusyInTheKernelWithoutReadsWritesOrFaultsIsYielding) {
  FakeProc proc;
  proc.baseline();
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  UtilizationSampler sampler(std::move(o));
  const int hz = static_cast<int>(clock_ticks_per_second());
  const auto at = [&](int second, int kernel, int user, int faults, int calls) {
    proc.write("proc/self/task/102/stat",
               FakeProc::task_stat("python3", user, kernel, faults));
    proc.write("proc/self/task/102/io", "rchar: 0\nsyscr: " + std::to_string(calls) +
                                            "\nsyscw: 1\nread_bytes: 0\n");
    const UtilizationSample s = sampler.sample(second * kSecond);
    for (const ThreadCpu& t : s.threads)
      if (t.tid == 102) return t;
    return ThreadCpu{};  // the first reading: a baseline
  };
  at(1, 0, 0, 5, 7);
  const ThreadCpu first = at(2, 9 * hz / 10, hz / 20, 5, 7);
  EXPECT_NEAR(first.kernel_ratio, 0.9, 0.02);
  EXPECT_FALSE(first.yielding) << "its calls are read from here on: no count to compare yet";
  const ThreadCpu spinning = at(3, 18 * hz / 10, hz / 10, 5, 7);
  EXPECT_TRUE(spinning.yielding);
  EXPECT_FALSE(at(4, 27 * hz / 10, 3 * hz / 20, 5, 9).yielding) << "it read: kernel work";
  EXPECT_FALSE(at(5, 36 * hz / 10, 2 * hz / 10, 90, 9).yielding) << "it faulted pages in";
  EXPECT_FALSE(at(6, 36 * hz / 10, 11 * hz / 10, 90, 9).yielding) << "busy in user space";
  EXPECT_TRUE(at(7, 45 * hz / 10, 12 * hz / 10, 90, 9).yielding)
      << "the calls read at second 5 are still 9: none since";
  EXPECT_FALSE(at(8, 45 * hz / 10, 12 * hz / 10, 90, 9).yielding) << "idle";
}

TEST(UtilizationSamplerTest, DescendantProcessesAreSampledWithAllTheirThreads) {
  // A PyTorch DataLoader's workers are processes: two children of the main thread, one of which
  // forked a grandchild, and a child of another thread. Each one's CPU is that of all its threads.
  FakeProc proc;
  proc.baseline();
  for (const char* d : {"proc/200/task/200", "proc/201/task/201", "proc/202/task/202",
                        "proc/300/task/300"})
    fs::create_directories(proc.root() / d);
  proc.write("proc/self/task/101/children", "200 201 ");
  proc.write("proc/self/task/102/children", "202 ");
  proc.write("proc/201/task/201/children", "300 ");
  for (const char* pid : {"200", "201", "202", "300"}) {
    proc.write(std::string("proc/") + pid + "/stat", FakeProc::task_stat("pt_data_worker", 0));
    proc.write(std::string("proc/") + pid + "/comm", "pt_data_worker\n");
  }
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  UtilizationSampler sampler(std::move(o));
  sampler.sample(1 * kSecond);

  const int hz = static_cast<int>(clock_ticks_per_second());
  proc.write("proc/self/stat", FakeProc::task_stat("python3", hz / 10));
  proc.write("proc/200/stat", FakeProc::task_stat("pt_data_worker", hz));       // one core
  proc.write("proc/201/stat", FakeProc::task_stat("pt_data_worker", hz / 2));   // half
  proc.write("proc/202/stat", FakeProc::task_stat("pt_data_worker", 3 * hz / 2));  // 2 threads
  proc.write("proc/300/stat", FakeProc::task_stat("pt_data_worker", hz / 4));
  const UtilizationSample s = sampler.sample(2 * kSecond);
  ASSERT_EQ(s.children.size(), 4u);
  double cores = 0;
  for (const ProcessCpu& p : s.children) {
    EXPECT_EQ(p.name, "pt_data_worker");
    cores += p.cores;
    if (p.pid == 202) {
      EXPECT_NEAR(p.cores, 1.5, 1e-9) << "a process may take more than one core";
    }
  }
  EXPECT_NEAR(cores, 3.25, 1e-9);
  EXPECT_NEAR(sampler.summary().series.at("cpu_child_processes_cores").mean, 3.25, 1e-9);
  EXPECT_EQ(sampler.summary().unavailable.count("child_processes"), 0u);

  // A worker that exits between two samples drops out; a new one counts from its second sample.
  proc.remove("proc/300");
  proc.write("proc/201/task/201/children", "");
  EXPECT_EQ(sampler.sample(3 * kSecond).children.size(), 3u);
}

// The tree is walked twice a second, and at once after one of its processes ended: a DataLoader
// that starts an epoch's workers ends the last epoch's, so the new ones are read from the next
// sample on.
TEST(UtilizationSamplerTest, AWorkerThatEndsMakesTheNextSampleWalkTheTreeAgain) {
  FakeProc proc;
  proc.baseline();
  for (const char* pid : {"200", "201"}) {
    fs::create_directories(proc.root() / "proc" / pid / "task" / pid);
    proc.write(std::string("proc/") + pid + "/stat", FakeProc::task_stat("pt_data_worker", 10));
  }
  proc.write("proc/self/task/101/children", "200 ");
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  UtilizationSampler sampler(std::move(o));
  constexpr std::int64_t kTenth = kSecond / 10;
  sampler.sample(10 * kTenth);
  ASSERT_EQ(sampler.sample(11 * kTenth).children.size(), 1u);
  // Worker 200 ends and 201 starts: the sample that finds 200 gone walks nothing new yet...
  proc.remove("proc/200");
  proc.write("proc/self/task/101/children", "201 ");
  EXPECT_TRUE(sampler.sample(12 * kTenth).children.empty());
  // ...the next walks the tree (201's first reading), and the one after reads it.
  EXPECT_TRUE(sampler.sample(13 * kTenth).children.empty());
  const UtilizationSample s = sampler.sample(14 * kTenth);
  ASSERT_EQ(s.children.size(), 1u);
  EXPECT_EQ(s.children[0].pid, 201);
}

// A worker idle at 3 readings in a row (a full prefetch queue) is read at every other reading, as
// it stood; the CPU it took meanwhile counts when it is read again, so nothing is lost over the run.
TEST(UtilizationSamplerTest, AnIdleWorkerIsReadLessOftenAndItsCpuCountsWhenReadAgain) {
  FakeProc proc;
  proc.baseline();
  fs::create_directories(proc.root() / "proc/200/task/200");
  proc.write("proc/self/task/101/children", "200 ");
  const int hz = static_cast<int>(clock_ticks_per_second());
  proc.write("proc/200/stat", FakeProc::task_stat("pt_data_worker", hz));
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  o.memory_hz = 0;
  UtilizationSampler sampler(std::move(o));
  constexpr std::int64_t kTenth = kSecond / 10;
  sampler.sample(10 * kTenth);
  for (int at = 11; at <= 13; ++at) {  // idle at each: read, 0 cores
    const UtilizationSample s = sampler.sample(at * kTenth);
    ASSERT_EQ(s.children.size(), 1u) << at;
    EXPECT_EQ(s.children[0].cores, 0) << at;
  }
  proc.write("proc/200/stat", FakeProc::task_stat("pt_data_worker", hz + hz / 10));  // 0.1 CPU-s
  const UtilizationSample skipped = sampler.sample(14 * kTenth);
  ASSERT_EQ(skipped.children.size(), 1u) << "still in the tree, as it stood";
  EXPECT_EQ(skipped.children[0].pid, 200);
  EXPECT_EQ(skipped.children[0].cores, 0) << "not read at this reading";
  const UtilizationSample read = sampler.sample(15 * kTenth);
  ASSERT_EQ(read.children.size(), 1u);
  EXPECT_NEAR(read.children[0].cores * 0.1, 0.1, 1e-9) << "its 0.1 CPU-s, counted now";
  proc.write("proc/200/stat", FakeProc::task_stat("pt_data_worker", hz + hz / 5));
  EXPECT_NEAR(sampler.sample(16 * kTenth).children.at(0).cores, 1.0, 1e-9) << "busy: read at every reading";
}

// A tree whose processes all have a reading, for the walk tests: 200 to 203 can join it.
struct WalkedTree {
  FakeProc proc;
  UtilizationSampler sampler;
  explicit WalkedTree(const std::string& loadavg) : sampler(options(proc, loadavg)) {}
  static UtilizationSampler::Options options(FakeProc& proc, const std::string& loadavg) {
    proc.baseline();
    for (const char* pid : {"200", "201", "202", "203"}) {
      fs::create_directories(proc.root() / "proc" / pid / "task" / pid);
      proc.write(std::string("proc/") + pid + "/stat", FakeProc::task_stat("pt_data_worker", 10));
    }
    proc.write("proc/loadavg", loadavg);
    proc.write("proc/self/task/101/children", "200 ");
    UtilizationSampler::Options o;
    o.fs = proc.fs();
    return o;
  }
  std::size_t children_at(int tenths) { return sampler.sample(tenths * (kSecond / 10)).children.size(); }
};

// A process joins the tree where the kernel gave out a pid (/proc/loadavg's last field moved): the
// check half a second after the last walk walks it again.
TEST(UtilizationSamplerTest, ATreeIsWalkedAgainWhereTheKernelGaveOutAPid) {
  WalkedTree t("0.10 0.20 0.30 1/100 500\n");
  t.children_at(10);  // the first walk
  t.proc.write("proc/self/task/101/children", "200 201 ");
  t.proc.write("proc/loadavg", "0.10 0.20 0.30 1/100 517\n");
  for (int at = 11; at < 15; ++at) EXPECT_EQ(t.children_at(at), 1u) << at;
  t.children_at(15);  // the check: a walk, 201's first reading
  EXPECT_EQ(t.children_at(16), 2u);
}

// Where no pid was given out nothing can have forked: the tree is walked every 5 s, not twice a
// second. A process found then that no pid was announced for (a /proc/loadavg that is not the
// kernel's: LXCFS refreshes its own every few seconds) makes the sampler stop believing it.
TEST(UtilizationSamplerTest, AQuietTreeIsWalkedEvery5sAndALoadavgThatMissedAForkIsReadNoMore) {
  WalkedTree t("0.10 0.20 0.30 1/100 500\n");
  t.children_at(10);
  t.proc.write("proc/self/task/101/children", "200 201 ");  // the pid unannounced
  for (int at = 11; at < 60; ++at) ASSERT_EQ(t.children_at(at), 1u) << "at " << at << " tenths";
  t.children_at(60);  // 5 s after the last walk: 201's first reading
  EXPECT_EQ(t.children_at(61), 2u);
  // loadavg missed that one: from now on the tree is walked at every check.
  t.proc.write("proc/self/task/101/children", "200 201 202 ");
  for (int at = 62; at < 65; ++at) EXPECT_EQ(t.children_at(at), 2u) << at;
  t.children_at(65);
  EXPECT_EQ(t.children_at(66), 3u);
}

// A rank's main thread is read for its busy share; a loader worker it forked carries a copy of
// its environment (RANK and all) and is no rank: its main thread is not read.
TEST(UtilizationSamplerTest, ARanksMainThreadIsReadAndItsWorkersIsNot) {
  FakeProc proc;
  proc.baseline();
  const auto stat = [](int ticks, const std::string& ppid) {
    std::string text = FakeProc::task_stat("python3", ticks);
    return text.replace(text.find(") S 1 "), 6, ") S " + ppid + " ");
  };
  constexpr char kEnviron[] = "RANK=1\0WORLD_SIZE=2\0MASTER_ADDR=h\0MASTER_PORT=29500\0";
  const std::string env(kEnviron, sizeof kEnviron - 1);
  for (const char* pid : {"200", "300"}) {
    fs::create_directories(proc.root() / "proc" / pid / "task" / pid);
    proc.write(std::string("proc/") + pid + "/environ", env);
  }
  proc.write("proc/self/task/101/children", "200 ");
  proc.write("proc/200/task/200/children", "300 ");
  const auto busy = [&](int ticks) {
    proc.write("proc/200/stat", stat(ticks, "101"));
    proc.write("proc/200/task/200/stat", stat(ticks, "101"));
    proc.write("proc/300/stat", stat(ticks, "200"));
    proc.write("proc/300/task/300/stat", stat(ticks, "200"));
  };
  busy(0);
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  UtilizationSampler sampler(std::move(o));
  sampler.sample(1 * kSecond);
  busy(static_cast<int>(clock_ticks_per_second()) / 2);
  const UtilizationSample s = sampler.sample(2 * kSecond);
  ASSERT_EQ(s.children.size(), 2u);
  for (const ProcessCpu& p : s.children) {
    EXPECT_EQ(p.rank, 1) << p.pid;
    if (p.pid == 200) {
      ASSERT_TRUE(p.main_thread_busy);
      EXPECT_NEAR(*p.main_thread_busy, 0.5, 1e-9);
    } else {
      EXPECT_FALSE(p.main_thread_busy) << "worker " << p.pid << " read as a rank";
    }
  }
}

// schedstat's run-queue delay says how long a thread or a worker was ready but had no core: the
// share of the interval, per task; none where the kernel has no schedstat file.
TEST(UtilizationSamplerTest, RunQueueWaitComesFromSchedstat) {
  FakeProc proc;
  proc.baseline();
  fs::create_directories(proc.root() / "proc/200/task/200");
  proc.write("proc/self/task/101/children", "200 ");
  proc.write("proc/200/stat", FakeProc::task_stat("pt_data_worker", 0));
  proc.write("proc/200/schedstat", "1000 2000000000 7\n");
  proc.write("proc/self/task/101/schedstat", "5 100000000 3\n");
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  UtilizationSampler sampler(std::move(o));
  sampler.sample(1 * kSecond);
  // A task that waited for a core ran once it had one (its ticks) or is still ready for one (R).
  proc.write("proc/200/stat", FakeProc::task_stat("pt_data_worker", 10));
  proc.write("proc/200/schedstat", "2000 2300000000 9\n");          // waited 0.3 s of 1 s
  proc.write("proc/self/task/101/stat", FakeProc::task_stat("feedscope", 20));
  proc.write("proc/self/task/101/schedstat", "9 150000000 5\n");    // 0.05 s
  const UtilizationSample s = sampler.sample(2 * kSecond);
  ASSERT_EQ(s.children.size(), 1u);
  ASSERT_TRUE(s.children[0].run_wait);
  EXPECT_NEAR(*s.children[0].run_wait, 0.3, 1e-9);
  bool main_seen = false, other_seen = false;
  for (const ThreadCpu& t : s.threads) {
    if (t.tid == 101) {
      main_seen = true;
      ASSERT_TRUE(t.run_wait);
      EXPECT_NEAR(*t.run_wait, 0.05, 1e-9);
    } else {
      other_seen = true;
      EXPECT_FALSE(t.run_wait) << "no schedstat file: not measured, not 0";
    }
  }
  EXPECT_TRUE(main_seen && other_seen);

  // One that took no CPU and sleeps waited for none: its schedstat is not read (0 whatever it
  // says), and what it held back counts at the next reading that is (here 0.2 s of the 1 s).
  proc.write("proc/200/schedstat", "3000 2500000000 11\n");
  const UtilizationSample idle = sampler.sample(3 * kSecond);
  ASSERT_EQ(idle.children.size(), 1u);
  ASSERT_TRUE(idle.children[0].run_wait);
  EXPECT_EQ(*idle.children[0].run_wait, 0.0);
  proc.write("proc/200/stat", FakeProc::task_stat("pt_data_worker", 30));
  const UtilizationSample ran = sampler.sample(4 * kSecond);
  ASSERT_EQ(ran.children.size(), 1u);
  ASSERT_TRUE(ran.children[0].run_wait);
  EXPECT_NEAR(*ran.children[0].run_wait, 0.2, 1e-9);
}

// feedscope watch on a launcher: retarget names its child, whose threads are read from the next
// sample on; the child's end is no missing source.
TEST(UtilizationSamplerTest, RetargetMovesTheReadingsToTheProcessItNames) {
  FakeProc proc;
  proc.baseline();
  fs::create_directories(proc.root() / "proc/200/task/200");
  proc.write("proc/self/task/101/children", "200 ");
  proc.write("proc/200/stat", FakeProc::task_stat("python3", 0));
  proc.write("proc/200/task/200/stat", FakeProc::task_stat("python3", 0));
  proc.write("proc/200/task/200/comm", "python3\n");
  proc.write("proc/200/status", "VmHWM: 900 kB\nVmRSS: 800 kB\n");
  int calls = 0;
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  o.retarget = [&calls](const UtilizationSample& s) {
    ++calls;
    return s.pid == 0 ? 200 : 0;
  };
  UtilizationSampler sampler(std::move(o));
  EXPECT_EQ(sampler.sample(1 * kSecond).pid, 0);
  EXPECT_EQ(calls, 0) << "not with the baseline reading";
  EXPECT_EQ(sampler.sample(2 * kSecond).pid, 0);
  EXPECT_EQ(calls, 1);

  const int hz = static_cast<int>(clock_ticks_per_second());
  const UtilizationSample first = sampler.sample(3 * kSecond);
  EXPECT_EQ(first.pid, 200);
  EXPECT_FALSE(first.cpu_process_ratio) << "no ratio across two processes";
  EXPECT_TRUE(first.threads.empty()) << "a thread's ratio needs two readings of it";
  EXPECT_EQ(first.rss_bytes, 800u * 1024);
  proc.write("proc/200/stat", FakeProc::task_stat("python3", hz));
  proc.write("proc/200/task/200/stat", FakeProc::task_stat("python3", hz));
  const UtilizationSample second = sampler.sample(4 * kSecond);
  ASSERT_EQ(second.threads.size(), 1u);
  EXPECT_EQ(second.threads[0].tid, 200);
  EXPECT_EQ(second.threads[0].name, "python3");
  EXPECT_NEAR(second.threads[0].ratio, 1.0, 1e-9);
  ASSERT_TRUE(second.cpu_process_ratio);
  EXPECT_NEAR(*second.cpu_process_ratio, 0.5, 1e-9) << "one core of two";

  proc.remove("proc/200");
  const UtilizationSample ended = sampler.sample(5 * kSecond);
  EXPECT_TRUE(ended.threads.empty());
  EXPECT_FALSE(ended.rss_bytes);
  const auto unavailable = sampler.summary().unavailable;
  EXPECT_EQ(unavailable.count("process_cpu"), 0u) << "a followed process that ended is no missing source";
  EXPECT_EQ(unavailable.count("rss"), 0u);
}

TEST(UtilizationSamplerTest, WithoutChildrenFilesWorkerProcessesAreUnavailable) {
  FakeProc proc;
  proc.baseline();
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  UtilizationSampler sampler(std::move(o));
  sampler.sample(1 * kSecond);
  EXPECT_TRUE(sampler.sample(2 * kSecond).children.empty());
  EXPECT_NE(sampler.summary().unavailable.at("child_processes").find("CONFIG_PROC_CHILDREN"),
            std::string::npos);
}

TEST(UtilizationSamplerTest, MissingAndMalformedFilesAreUnavailableNeverACrash) {
  FakeProc proc;
  proc.baseline();
  proc.remove("proc/pressure");
  proc.write("proc/diskstats", "garbage\n8 0\n");
  proc.write("proc/self/io", "read_bytes: many\n");
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  UtilizationSampler sampler(std::move(o));
  sampler.sample(kSecond);
  proc.write("proc/stat", "cpu 1 2\n");  // short line
  proc.remove("proc/self/task/102");     // a thread ended
  proc.remove("sys/block/sda");          // a device vanished
  const UtilizationSample s = sampler.sample(2 * kSecond);
  EXPECT_FALSE(s.cpu_system_ratio);
  EXPECT_TRUE(s.disks.empty());
  EXPECT_FALSE(s.process_read_bytes_total);
  EXPECT_FALSE(s.io_pressure);
  const auto unavailable = sampler.summary().unavailable;
  EXPECT_NE(unavailable.at("pressure_io").find("kernel without PSI"), std::string::npos);
  EXPECT_NE(unavailable.at("cpu").find("/proc/stat"), std::string::npos);
  EXPECT_NE(unavailable.at("process_io").find("/proc/self/io"), std::string::npos);
}

TEST(UtilizationSamplerTest, GpuIsReadAtMostTenTimesASecond) {
  FakeProc proc;
  proc.baseline();
  auto gpu = std::make_unique<FakeGpu>();
  FakeGpu* fake = gpu.get();
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  o.gpu = std::move(gpu);
  o.hz = 100;
  UtilizationSampler sampler(std::move(o));
  for (int i = 1; i <= 100; ++i) sampler.sample(i * 10'000'000);  // 100 samples over 1 s
  EXPECT_LE(fake->reads, 11);
  EXPECT_GE(fake->reads, 9);
  const auto recent = sampler.recent();
  ASSERT_FALSE(recent.empty());
  ASSERT_EQ(recent.back().gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(recent.back().gpus[0].util_ratio.value_or(-1), 0.75);
  EXPECT_DOUBLE_EQ(sampler.summary().series.at("gpu0_util_ratio").max, 0.75);
}

// NVML_ERROR_NOT_SUPPORTED on a MIG instance: no utilization, the memory reading is there; the
// power reading fails once (NVML_ERROR_TIMEOUT), then comes.
class GpuWithoutUtilization final : public GpuSource {
 public:
  std::vector<GpuSample> read() override {
    GpuSample g;
    g.memory_used_bytes = 1 << 30;
    g.unavailable["util_ratio"] = "nvmlDeviceGetUtilizationRates: status 3 (NOT_SUPPORTED)";
    if (reads++ == 0)
      g.unavailable["power_watts"] = "nvmlDeviceGetPowerUsage: status 10 (TIMEOUT)";
    else
      g.power_watts = 70;
    return {g};
  }
  std::string unavailable_reason() const override { return ""; }
  int reads = 0;
};

TEST(UtilizationSamplerTest, AGpuReadingNeverTakenHasNoSeriesAndItsReasonIsUnavailable) {
  FakeProc proc;
  proc.baseline();
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  o.gpu = std::make_unique<GpuWithoutUtilization>();
  UtilizationSampler sampler(std::move(o));
  for (int i = 1; i <= 5; ++i) sampler.sample(i * kSecond);
  const UtilizationSummary summary = sampler.summary();
  EXPECT_FALSE(summary.series.contains("gpu0_util_ratio")) << "not measured is no 0 % series";
  EXPECT_TRUE(summary.series.contains("gpu0_memory_used_bytes"));
  ASSERT_TRUE(summary.unavailable.contains("gpu0_util_ratio"));
  EXPECT_EQ(summary.unavailable.at("gpu0_util_ratio"),
            "nvmlDeviceGetUtilizationRates: status 3 (NOT_SUPPORTED)");
  EXPECT_FALSE(summary.unavailable.contains("gpu0_power_watts")) << "read after its one failure";
  EXPECT_FALSE(summary.unavailable.contains("gpu")) << "the GPU itself is there";
}

TEST(UtilizationSamplerTest, RingKeepsTheNewestSamplesInOrder) {
  FakeProc proc;
  proc.baseline();
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  o.ring_capacity = 4;
  UtilizationSampler sampler(std::move(o));
  for (int i = 1; i <= 10; ++i) sampler.sample(i * kSecond);
  const auto recent = sampler.recent();
  ASSERT_EQ(recent.size(), 4u);
  EXPECT_EQ(recent.front().time_ns, 7 * kSecond);
  EXPECT_EQ(recent.back().time_ns, 10 * kSecond);
  EXPECT_EQ(sampler.summary().samples, 9u);
}

TEST(UtilizationSamplerTest, RejectsABadRate) {
  UtilizationSampler::Options o;
  o.hz = 0;
  EXPECT_THROW(UtilizationSampler{std::move(o)}, std::invalid_argument);
}

TEST(UtilizationSamplerTest, BackgroundThreadSamplesTheRealProcAndStops) {
  UtilizationSampler::Options o;
  o.hz = 200;
  std::atomic<int> seen{0};
  o.on_sample = [&](const UtilizationSample&) { ++seen; };
  UtilizationSampler sampler(std::move(o));
  sampler.start();
  for (int i = 0; i < 400 && seen < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  sampler.stop();
  sampler.stop();  // idempotent
  EXPECT_GE(seen.load(), 3);
  const auto summary = sampler.summary();
  EXPECT_GE(summary.series.count("cpu_process_ratio"), 1u);
}

}  // namespace
}  // namespace feedscope

namespace feedscope {
namespace {

std::string rollup(int private_dirty_kb, int shared_dirty_kb) {
  return "00400000-7fff00000000 ---p 00000000 00:00 0                          [rollup]\n"
         "Rss:            " + std::to_string(private_dirty_kb + shared_dirty_kb + 8) + " kB\n"
         "Pss:            " + std::to_string(private_dirty_kb + shared_dirty_kb / 3) + " kB\n"
         "Shared_Clean:         8 kB\n"
         "Shared_Dirty:   " + std::to_string(shared_dirty_kb) + " kB\n"
         "Private_Clean:        0 kB\n"
         "Private_Dirty:  " + std::to_string(private_dirty_kb) + " kB\n"
         "Referenced:     100 kB\nAnonymous:      100 kB\nSwap:             0 kB\n";
}

// smaps_rollup of the process and of each worker, at most memory_hz: the CPU readings go on at
// their own rate, and the readings between carry no memory split.
TEST(UtilizationSamplerTest, SmapsRollupIsReadAtTheMemoryRateForTheProcessAndItsWorkers) {
  FakeProc proc;
  proc.baseline();
  fs::create_directories(proc.root() / "proc/200/task/200");
  proc.write("proc/self/task/101/children", "200 ");
  proc.write("proc/200/stat", FakeProc::task_stat("pt_data_worker", 0));
  proc.write("proc/200/comm", "pt_data_worker\n");
  proc.write("proc/self/smaps_rollup", rollup(1000, 0));
  proc.write("proc/200/smaps_rollup", rollup(100, 900));
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  o.hz = 10;
  o.memory_hz = 2;
  UtilizationSampler sampler(std::move(o));
  const UtilizationSample first = sampler.sample(1 * kSecond);
  ASSERT_TRUE(first.memory);
  EXPECT_EQ(first.memory->private_dirty_bytes, 1000u * 1024);
  const UtilizationSample between = sampler.sample(1 * kSecond + kSecond / 10);
  EXPECT_FALSE(between.memory) << "0.1 s after the last: not due at 2 Hz";
  ASSERT_EQ(between.children.size(), 1u);
  EXPECT_FALSE(between.children[0].memory);
  proc.write("proc/200/smaps_rollup", rollup(300, 700));
  const UtilizationSample due = sampler.sample(1 * kSecond + kSecond / 2);
  ASSERT_TRUE(due.memory);
  ASSERT_EQ(due.children.size(), 1u);
  ASSERT_TRUE(due.children[0].memory);
  EXPECT_EQ(due.children[0].memory->private_bytes(), 300u * 1024);
  EXPECT_EQ(due.children[0].memory->shared_bytes(), (700u + 8) * 1024);
  EXPECT_EQ(sampler.summary().unavailable.count("memory_rollup"), 0u);
}

// A big node's tree (8 ranks x 12 workers under one watch) is read less often, not at more cost.
TEST(UtilizationSamplerTest, ARoundOfMoreProcessesThanTheFullShareTakesLess) {
  UtilizationSampler::Options o;
  o.memory_cpu_share = 0.05;
  EXPECT_DOUBLE_EQ(UtilizationSampler::memory_round_share(o, 105), 0.05) << "no limit given: the share";
  o.memory_share_processes = 12;
  EXPECT_DOUBLE_EQ(UtilizationSampler::memory_round_share(o, 12), 0.05);
  EXPECT_DOUBLE_EQ(UtilizationSampler::memory_round_share(o, 24), 0.025);
  EXPECT_NEAR(UtilizationSampler::memory_round_share(o, 105), 0.05 * 12 / 105, 1e-12);
  EXPECT_DOUBLE_EQ(UtilizationSampler::memory_round_share(o, 1000), 0.005) << "a tenth at least";
}

TEST(UtilizationSamplerTest, WithoutSmapsRollupTheSplitIsUnavailable) {
  FakeProc proc;
  proc.baseline();
  UtilizationSampler::Options o;
  o.fs = proc.fs();
  UtilizationSampler sampler(std::move(o));
  EXPECT_FALSE(sampler.sample(1 * kSecond).memory);
  EXPECT_FALSE(sampler.sample(3 * kSecond).memory);
  EXPECT_EQ(sampler.summary().unavailable.count("memory_rollup"), 1u);
}

}  // namespace
}  // namespace feedscope
