#include "sampler/proc_file_cache.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/temp_dir.h"

namespace feedscope {
namespace proc_file_cache_test {

using testing::TempDir;

// A fixture tree under a temp root, as the samplers' tests use.
class FixtureRoot {
 public:
  FixtureRoot() { std::filesystem::create_directories(dir_ / "proc/42/task/42"); }
  // In place: the file keeps its inode, as a /proc file does.
  void write(const std::string& path, const std::string& text) {
    std::ofstream(dir_ / path, std::ios::trunc) << text;
  }
  void remove(const std::string& path) { std::filesystem::remove_all(dir_ / path); }
  ProcFs fs() const { return ProcFs(dir_.path().string()); }

 private:
  TempDir dir_;
};

std::string stat_with_name(const std::string& text) {
  const auto open = text.find('('), close = text.rfind(')');
  return open < close && close != std::string::npos ? text.substr(open + 1, close - open - 1) : "";
}

TEST(ProcFileCacheTest, ReadsAgainWhatWasRewrittenInPlaceThroughTheSameDescriptor) {
  FixtureRoot root;
  root.write("proc/42/stat", "one");
  ProcFileCache files(root.fs());
  EXPECT_EQ(files.read("/proc/42/stat"), "one");
  EXPECT_EQ(files.open_count(), 1u);
  root.write("proc/42/stat", "two, and longer than one");
  EXPECT_EQ(files.read("/proc/42/stat"), "two, and longer than one");
  root.write("proc/42/stat", "3");
  EXPECT_EQ(files.read("/proc/42/stat"), "3") << "the read stops at the file's end, not the last one's";
  root.write("proc/42/stat", "");
  EXPECT_EQ(files.read("/proc/42/stat"), "");
  EXPECT_EQ(files.open_count(), 1u);
  EXPECT_FALSE(files.read("/proc/42/io"));
  EXPECT_EQ(files.open_count(), 1u) << "a file that is not there is not kept";
}

TEST(ProcFileCacheTest, ReadsWhatALargeFileHolds) {
  FixtureRoot root;
  std::string big;
  for (int i = 0; big.size() < 100'000; ++i) big += "cpu" + std::to_string(i) + " 1 2 3 4 5 6 7 8\n";
  root.write("proc/stat", big);
  ProcFileCache files(root.fs());
  EXPECT_EQ(files.read("/proc/stat"), big);
  EXPECT_EQ(files.read("/proc/stat"), big);
}

TEST(ProcFileCacheTest, AFixtureRemovedIsClosedAndReadAsGone) {
  FixtureRoot root;
  root.write("proc/42/stat", "42 (python3) S");
  root.write("proc/42/task/42/stat", "42 (python3) S");
  ProcFileCache files(root.fs());
  ASSERT_TRUE(files.read("/proc/42/stat"));
  EXPECT_EQ(files.list_dir("/proc/42/task"), std::vector<std::string>{"42"});
  EXPECT_EQ(files.open_count(), 2u);
  root.remove("proc/42");  // the process ended
  EXPECT_FALSE(files.read("/proc/42/stat"));
  EXPECT_TRUE(files.list_dir("/proc/42/task").empty());
  EXPECT_EQ(files.open_count(), 0u);
  // Its PID taken by another process: the new files, not the old ones.
  std::filesystem::create_directories(std::filesystem::path(root.fs().root()) / "proc/42");
  root.write("proc/42/stat", "42 (bash) R");
  EXPECT_EQ(files.read("/proc/42/stat"), "42 (bash) R");
}

// A real process: its kept files fail once it has ended, and are closed.
TEST(ProcFileCacheTest, AProcessThatEndsDropsItsDescriptors) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ProcFileCache files;
  const std::string proc = "/proc/" + std::to_string(child);
  const auto stat = files.read(proc + "/stat");
  ASSERT_TRUE(stat);
  EXPECT_TRUE(parse_task_stat(*stat));
  // Its main thread; under TSan the forked child may also run the sanitizer's own thread.
  const std::vector<std::string> tasks = files.list_dir(proc + "/task");
  EXPECT_NE(std::find(tasks.begin(), tasks.end(), std::to_string(child)), tasks.end());
  ASSERT_TRUE(files.read(proc + "/schedstat"));
  EXPECT_EQ(files.open_count(), 3u);
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_FALSE(files.read(proc + "/stat"));
  EXPECT_TRUE(files.list_dir(proc + "/task").empty());
  EXPECT_FALSE(files.read(proc + "/schedstat"));
  EXPECT_EQ(files.open_count(), 0u);
}

TEST(ProcFileCacheTest, ASweepClosesWhatWasNotReadSinceTheLast) {
  FixtureRoot root;
  root.write("proc/42/stat", "a");
  root.write("proc/42/io", "b");
  ProcFileCache files(root.fs());
  ASSERT_TRUE(files.read("/proc/42/stat"));
  ASSERT_TRUE(files.read("/proc/42/io"));
  ASSERT_FALSE(files.list_dir("/proc/42/task").empty());
  files.sweep();
  EXPECT_EQ(files.open_count(), 3u);
  ASSERT_TRUE(files.read("/proc/42/stat"));
  files.sweep();
  EXPECT_EQ(files.open_count(), 1u) << "io and the task directory were not read since the last sweep";
  files.sweep();
  EXPECT_EQ(files.open_count(), 0u);
  EXPECT_EQ(files.read("/proc/42/io"), "b") << "a file closed is opened again when read";
}

TEST(ProcFileCacheTest, KeepOpenHoldsAFileThroughASweepWithoutReadingIt) {
  FixtureRoot root;
  root.write("proc/42/schedstat", "1 2 3\n");
  ProcFileCache files(root.fs());
  EXPECT_FALSE(files.keep_open("/proc/42/schedstat")) << "not open yet";
  ASSERT_TRUE(files.read("/proc/42/schedstat"));
  files.sweep();
  EXPECT_TRUE(files.keep_open("/proc/42/schedstat"));
  files.sweep();
  EXPECT_EQ(files.open_count(), 1u);
  files.sweep();
  EXPECT_EQ(files.open_count(), 0u);
}

// Read through a descriptor kept open, the files a sampler reads of a live process, of the machine
// and a directory of its threads, say what a fresh open and read says (each read stops at a short
// read: a seq_file's end).
TEST(ProcFileCacheTest, ProcFilesReadAgainAreWhole) {
  ProcFileCache files;
  const ProcFs fs;
  for (int round = 0; round < 3; ++round) {
    for (const char* path : {"/proc/self/status", "/proc/meminfo", "/proc/self/io"}) {
      const auto kept = files.read(path);
      const auto fresh = fs.read(path);
      ASSERT_TRUE(kept && fresh) << path;
      // Counters move between the two reads; the lines (names and their order) do not.
      const auto names = [](const std::string& text) {
        std::string out;
        for (std::size_t at = 0; at < text.size();) {
          const std::size_t colon = text.find(':', at), end = text.find('\n', at);
          out += text.substr(at, colon - at) + ";";
          if (end == std::string::npos) break;
          at = end + 1;
        }
        return out;
      };
      EXPECT_EQ(names(*kept), names(*fresh)) << path;
      EXPECT_EQ(kept->back(), '\n') << path;
    }
    const auto tasks = files.list_dir("/proc/self/task");
    EXPECT_NE(std::find(tasks.begin(), tasks.end(), std::to_string(::gettid())), tasks.end());
  }
}

TEST(ProcFileCacheTest, NeverKeepsMoreThanItsBound) {
  FixtureRoot root;
  for (int i = 0; i < 10; ++i) root.write("proc/f" + std::to_string(i), "file " + std::to_string(i));
  ProcFileCache files(root.fs(), 3);
  EXPECT_EQ(files.max_open(), 3u);
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(files.read("/proc/f" + std::to_string(i)), "file " + std::to_string(i));
      EXPECT_LE(files.open_count(), 3u);
    }
    EXPECT_FALSE(files.list_dir("/proc").empty());
    EXPECT_EQ(files.open_count(), 3u);
  }
  // A quarter of the descriptors this process may open, at most.
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur != RLIM_INFINITY) {
    EXPECT_LE(ProcFileCache().max_open(), static_cast<std::size_t>(limit.rlim_cur / 4));
  }
  EXPECT_LE(ProcFileCache().max_open(), ProcFileCache::kMaxOpen);
}

// Real /proc files read again from their start: a thread renamed, a thread started and ended.
TEST(ProcFileCacheTest, SeesAThreadRenamedStartedAndEnded) {
  ProcFileCache files;
  std::atomic<pid_t> tid{0};
  std::atomic<bool> go_on{false};
  std::thread thread([&] {
    ::pthread_setname_np(::pthread_self(), "fs-before");
    tid = ::gettid();
    while (!go_on) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (tid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::string tasks = "/proc/" + std::to_string(::getpid()) + "/task";
  const std::string stat = tasks + "/" + std::to_string(tid) + "/stat";
  const std::string name = std::to_string(tid);
  auto listed = [&] {
    const auto names = files.list_dir(tasks);
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  EXPECT_TRUE(listed());
  EXPECT_EQ(stat_with_name(files.read(stat).value_or("")), "fs-before");
  const std::size_t open = files.open_count();
  ASSERT_EQ(::pthread_setname_np(thread.native_handle(), "fs-after"), 0);
  EXPECT_EQ(stat_with_name(files.read(stat).value_or("")), "fs-after");
  EXPECT_EQ(files.open_count(), open) << "read again through the descriptor it kept";
  go_on = true;
  thread.join();
  // The thread's task goes a moment after join returns (it is released once it has exited).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (listed() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(listed());
  EXPECT_FALSE(files.read(stat));
  EXPECT_EQ(files.open_count(), open - 1);
}

}  // namespace proc_file_cache_test
}  // namespace feedscope
