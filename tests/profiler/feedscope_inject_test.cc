// libfeedscope_inject.so as the CUDA driver would load it, each case in a process of its own
// (inject_host.cc) so that a crash or hang in the library fails the test instead of taking the
// runner down, and no CUPTI the runner loaded is in it. Built in CUDA
// builds only (tests/CMakeLists.txt); needs no GPU: the driver and CUPTI are real where present,
// stand-ins (fake_cuda_driver.cc, fake_cupti_recorder.cc) where the case says so.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cupti.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "loader/span_recorder.h"
#include "profiler/gpu_activity_wire.h"
#include "profiler/watched_gpu.h"
#include "profiler/gpu_trace.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

// Runs tests/profiler/inject_host.cc, which calls InitializeInjection in a fresh process with
// FEEDSCOPE_WATCH_DIR=`watch_dir` ("-": unset) after dlopen-ing `preload`, then does `then`
// ("exit", "sleep:<ms>", "fork"). Returns its wait status: exit code 10-14 is the host's failure.
int run_injection(const std::string& watch_dir, const std::vector<std::string>& preload,
                  const std::string& then = "exit", const std::string& cwd = "") {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) std::_Exit(126);
    std::vector<std::string> args = {FEEDSCOPE_INJECT_HOST, FEEDSCOPE_INJECT_LIBRARY,
                                     watch_dir.empty() ? "-" : watch_dir, then};
    args.insert(args.end(), preload.begin(), preload.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exit code " + std::to_string(WEXITSTATUS(status));
}

std::vector<std::filesystem::path> files_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) out.push_back(entry.path());
  return out;
}

// Environment for the next run_injection (the stand-in CUPTI's cases, fake_cupti_recorder.cc),
// taken back when it goes out of scope.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::initializer_list<std::pair<std::string, std::string>> vars)
      : vars_(vars) {
    for (const auto& [name, value] : vars_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : vars_) ::unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool any_starts_with(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(),
                     [&](const std::string& s) { return s.starts_with(prefix); });
}

// What the stand-in CUPTI says first when it records with its timestamp callback.
std::string recording_through_the_fake() {
  const int version = CUPTI_API_VERSION;
  return "recording: CUPTI of CUDA " + std::to_string(version / 10000) + "." +
         std::to_string(version / 100 % 100) + " (API version " + std::to_string(version) +
         ") from " + FAKE_CUPTI_RECORDER +
         "; timestamps: CLOCK_MONOTONIC (cuptiActivityRegisterTimestampCallback)";
}

// Every record of `a` lies within [begin_ns, end_ns] of now_ns().
void expect_within(const GpuActivity& a, std::int64_t begin_ns, std::int64_t end_ns) {
  const auto check = [&](const auto& records, const char* kind) {
    for (const auto& r : records) {
      EXPECT_GE(r.start_ns, begin_ns) << kind;
      EXPECT_LE(r.end_ns, end_ns) << kind;
    }
  };
  check(a.kernels, "kernel");
  check(a.memcpys, "memcpy");
  check(a.runtime, "runtime");
}

TEST(FeedscopeInjectTest, ExportsOnlyInitializeInjectionAndNeedsNoFeedscopeDependency) {
  FILE* nm = ::popen("nm -D --defined-only " FEEDSCOPE_INJECT_LIBRARY " 2>&1", "r");
  ASSERT_NE(nm, nullptr);
  std::vector<std::string> symbols;
  char line[512];
  while (std::fgets(line, sizeof line, nm)) {
    std::string s(line);
    s.erase(s.find_last_not_of("\n") + 1);
    symbols.push_back(s.substr(s.rfind(' ') + 1));
  }
  ASSERT_EQ(::pclose(nm), 0);
  EXPECT_EQ(symbols, std::vector<std::string>{"InitializeInjection"});

  FILE* readelf = ::popen("readelf -d " FEEDSCOPE_INJECT_LIBRARY " 2>&1", "r");
  ASSERT_NE(readelf, nullptr);
  while (std::fgets(line, sizeof line, readelf)) {
    const std::string s(line);
    if (s.find("(NEEDED)") == std::string::npos) continue;
    const std::string lib = s.substr(s.find('[') + 1, s.find(']') - s.find('[') - 1);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // scripts/sanitize.sh's build links every target, this one too, to the sanitizers' runtimes.
    if (lib.starts_with("libasan.") || lib.starts_with("libubsan.") || lib.starts_with("libtsan."))
      continue;
#endif
    EXPECT_TRUE(lib.starts_with("libstdc++.") || lib.starts_with("libgcc_s.") ||
                lib.starts_with("libc.") || lib.starts_with("libm.") ||
                lib.starts_with("libdl.") || lib.starts_with("libpthread."))
        << "the injection library needs " << lib;
  }
  ::pclose(readelf);
}

TEST(FeedscopeInjectTest, WithoutAWatchDirItDoesNothing) {
  feedscope::testing::TempDir dir;
  // In the temp dir: a file written relative to an empty watch dir would land here.
  const int status = run_injection("", {}, "exit", dir.path().string());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  EXPECT_TRUE(files_in(dir.path()).empty());
}

// This machine's own driver and CUPTI: where there is no driver, the status says so (the driver
// calls InitializeInjection, so a real run always has one, but CUPTI may be missing or refuse).
TEST(FeedscopeInjectTest, WithoutADriverItReturnsPromptlyAndSaysWhy) {
  feedscope::testing::TempDir dir;
  const int status = run_injection(dir.path().string(), {});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const std::vector<std::filesystem::path> files = files_in(dir.path());
  ASSERT_EQ(files.size(), 1u);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  ASSERT_EQ(gpu.statuses_by_pid.size(), 1u);
  const std::vector<std::string>& statuses = gpu.statuses_by_pid.begin()->second;
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_TRUE(statuses[0].starts_with("unavailable: ")) << statuses[0];
  if (::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == nullptr) {
    const bool no_driver = statuses[0].find("no CUDA driver (libcuda.so.1) is loaded") !=
                           std::string::npos;
    const bool no_cupti = statuses[0].starts_with("unavailable: CUPTI: ");
    EXPECT_TRUE(no_driver || no_cupti) << statuses[0];
  }
  EXPECT_TRUE(gpu.activity.empty());
  EXPECT_TRUE(gpu.errors.empty());
}

TEST(FeedscopeInjectTest, ThroughAFakeCuptiItRecordsAndWritesTheRestAtExit) {
  feedscope::testing::TempDir dir;
  // Long enough for a flush and a takeover probe that comes back.
  const int status = run_injection(dir.path().string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER},
                                   "sleep:700");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  EXPECT_TRUE(gpu.errors.empty());
  ASSERT_EQ(gpu.statuses_by_pid.size(), 1u);
  // The CUPTI it traced with, by path and version, for the watcher's notes.
  EXPECT_EQ(gpu.statuses_by_pid.begin()->second,
            std::vector<std::string>{recording_through_the_fake()});
  EXPECT_EQ(gpu.activity.bad_timestamps, 0u);
  EXPECT_EQ(gpu.activity.incomplete_buffers, 0u);
  ASSERT_EQ(gpu.activity.kernels.size(), 1u);
  EXPECT_EQ(gpu.activity.kernels[0].name, "foo(int)");
  EXPECT_EQ(gpu.activity.kernels[0].end_ns - gpu.activity.kernels[0].start_ns, 500'000);
  EXPECT_EQ(gpu.activity.kernels[0].stream, 7u);
  ASSERT_EQ(gpu.activity.memcpys.size(), 1u);
  EXPECT_EQ(gpu.activity.memcpys[0].kind, MemcpyKind::h2d);
  EXPECT_EQ(gpu.activity.memcpys[0].src, MemoryKind::pinned);
  EXPECT_EQ(gpu.activity.memcpys[0].dst, MemoryKind::device);
  EXPECT_EQ(gpu.activity.memcpys[0].bytes, 4096u);
  ASSERT_EQ(gpu.activity.runtime.size(), 1u);
  EXPECT_EQ(gpu.activity.runtime[0].name, "cudaLaunchKernel");
}

TEST(FeedscopeInjectTest, RecordsThatStopReachingItReadAsAnotherClientTakingCupti) {
  feedscope::testing::TempDir dir;
  ::setenv("FAKE_CUPTI_DELIVER", "0", 1);
  const int status = run_injection(dir.path().string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER},
                                   "sleep:400");
  ::unsetenv("FAKE_CUPTI_DELIVER");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  ASSERT_EQ(gpu.statuses_by_pid.size(), 1u);
  const std::vector<std::string>& statuses = gpu.statuses_by_pid.begin()->second;
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0], recording_through_the_fake());
  EXPECT_TRUE(statuses[1].starts_with("interrupted: another CUPTI client (torch.profiler?) took "
                                      "the activity API"))
      << statuses[1];
}

TEST(FeedscopeInjectTest, ACuptiNewerThanTheDriverIsUnavailableInWords) {
  feedscope::testing::TempDir dir;
  const int status = run_injection(dir.path().string(), {FAKE_CUDA_DRIVER_12, FAKE_CUPTI_RECORDER});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  ASSERT_EQ(gpu.statuses_by_pid.size(), 1u);
  const std::vector<std::string>& statuses = gpu.statuses_by_pid.begin()->second;
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_TRUE(statuses[0].starts_with("unavailable: CUPTI is newer than the CUDA driver: CUPTI of "
                                      "CUDA 13."))
      << statuses[0];
  EXPECT_NE(statuses[0].find("supports CUDA 12.8"), std::string::npos) << statuses[0];
  EXPECT_TRUE(gpu.activity.empty());
}

TEST(FeedscopeInjectTest, AForkedChildLeavesItsParentsFileAlone) {
  feedscope::testing::TempDir dir;
  const int status = run_injection(dir.path().string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER},
                                   "fork");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  ASSERT_EQ(files_in(dir.path()).size(), 1u);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  EXPECT_EQ(gpu.statuses_by_pid.begin()->second,
            std::vector<std::string>{recording_through_the_fake()});
  EXPECT_EQ(gpu.activity.kernels.size(), 1u) << "the forked child flushed into its parent's file";
}

// CUPTI writes 0 for times it could not collect; converted they would land decades before the run.
TEST(FeedscopeInjectTest, RecordsWithoutUsableTimesAreLeftOutAndCounted) {
  feedscope::testing::TempDir dir;
  const ScopedEnv env({{"FAKE_CUPTI_BAD_TIMESTAMPS", "1"}});
  const int status = run_injection(dir.path().string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  EXPECT_EQ(gpu.activity.kernels.size(), 1u);
  EXPECT_EQ(gpu.activity.memcpys.size(), 1u);
  EXPECT_EQ(gpu.activity.runtime.size(), 1u);
  EXPECT_EQ(gpu.activity.bad_timestamps, 3u);
  for (const KernelRecord& k : gpu.activity.kernels) EXPECT_GT(k.start_ns, 0);
}

// A forced flush hands over buffers with an incomplete record, where CUPTI's walk stops
// (CUPTI_ERROR_INVALID_KIND): the rest of the buffer, here the probe's device record, is lost. That
// is counted, and is no sign of another client taking the activity API (a buffer came).
TEST(FeedscopeInjectTest, ABufferCutShortAtAnIncompleteRecordIsCountedAndIsNoTakeover) {
  feedscope::testing::TempDir dir;
  const ScopedEnv env({{"FAKE_CUPTI_INCOMPLETE", "1"}});
  const int status = run_injection(dir.path().string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER},
                                   "sleep:700");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  ASSERT_EQ(gpu.statuses_by_pid.size(), 1u);
  EXPECT_EQ(gpu.statuses_by_pid.begin()->second,
            std::vector<std::string>{recording_through_the_fake()});
  EXPECT_GE(gpu.activity.incomplete_buffers, 1u);
  EXPECT_EQ(gpu.activity.kernels.size(), 1u);
}

// The statuses the silence of a held-back buffer writes: the silence, with both of its causes, then
// that the records came back (so it was no takeover).
void expect_silence_then_back(const std::vector<std::string>& statuses) {
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[0], recording_through_the_fake());
  EXPECT_TRUE(statuses[1].starts_with(
      "interrupted: another CUPTI client (torch.profiler?) took the activity API, or CUPTI holds "
      "back the buffer of a GPU activity still running: no record has reached feedscope since "))
      << statuses[1];
  EXPECT_EQ(statuses[2], "recording: records reach feedscope again, so no other client took the "
                         "activity API: CUPTI held back a buffer while an activity in it ran");
}

// A quiet program's buffer stays with CUPTI through default flushes while a record in it is
// incomplete; the probe's answer is in it. No flush is forced for it: the silence is said, and the
// exit's forced flush brings the buffer, which says it was no takeover.
TEST(FeedscopeInjectTest, AProbeAnswerHeldBackByTheDefaultFlushIsWaitedForAndItsReturnSaid) {
  feedscope::testing::TempDir dir;
  const ScopedEnv env({{"FAKE_CUPTI_HOLD", "1"}, {"FEEDSCOPE_INJECT_PROBE_TIMEOUT_MS", "300"}});
  const int status = run_injection(dir.path().string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER},
                                   "sleep:1200");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  ASSERT_EQ(gpu.statuses_by_pid.size(), 1u);
  expect_silence_then_back(gpu.statuses_by_pid.begin()->second);
  EXPECT_EQ(gpu.activity.kernels.size(), 1u);
}

// The buffer in use holds a kernel that runs 1 s, past the probe's 0.2-s timeout. A flush forced
// at the timeout would hand it over with that kernel's record incomplete, and CUPTI's walk would
// stop there, losing the kernel and every record behind it. The library waits instead: the buffer
// comes whole once the kernel has ended, nothing cut.
TEST(FeedscopeInjectTest, AProbeTimeoutForcesNoFlushSoABufferHeldBackIsKeptWhole) {
  feedscope::testing::TempDir dir;
  const ScopedEnv env({{"FAKE_CUPTI_LONG_KERNEL_MS", "1000"},
                       {"FEEDSCOPE_INJECT_PROBE_TIMEOUT_MS", "200"}});
  const int status = run_injection(dir.path().string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER},
                                   "sleep:2400");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  EXPECT_EQ(gpu.activity.incomplete_buffers, 0u) << "a buffer was cut short";
  ASSERT_EQ(gpu.activity.kernels.size(), 2u);
  EXPECT_EQ(gpu.activity.kernels[0].name, "longKernel()");
  EXPECT_GE(gpu.activity.kernels[0].end_ns - gpu.activity.kernels[0].start_ns, 900'000'000);
  EXPECT_EQ(gpu.activity.kernels[1].name, "foo(int)");
  ASSERT_EQ(gpu.statuses_by_pid.size(), 1u);
  expect_silence_then_back(gpu.statuses_by_pid.begin()->second);
}

// CUPTI's own clock is CLOCK_REALTIME; a step of it after the start (NTP, an admin) would shift
// every later record against the host's spans were they moved by an offset taken at the start.
// With the timestamp callback, registered before any kind is enabled, records carry now_ns().
TEST(FeedscopeInjectTest, TimesComeFromTheTimestampCallbackRegisteredBeforeAnyKind) {
  feedscope::testing::TempDir dir;
  const std::filesystem::path log = dir / "cupti.log";
  const std::filesystem::path watch = dir / "watch";
  std::filesystem::create_directory(watch);
  const ScopedEnv env({{"FAKE_CUPTI_CLOCK_STEP", "1"}, {"FAKE_CUPTI_LOG", log.string()}});
  const std::int64_t begin = now_ns();
  const int status = run_injection(watch.string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER});
  const std::int64_t end = now_ns();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const std::vector<std::string> calls = lines_of(log);
  const auto at = [&](const std::string& prefix) {
    return std::find_if(calls.begin(), calls.end(),
                        [&](const std::string& c) { return c.starts_with(prefix); }) -
           calls.begin();
  };
  ASSERT_LT(at("cuptiActivityRegisterTimestampCallback"), static_cast<long>(calls.size()));
  EXPECT_LT(at("cuptiActivityRegisterTimestampCallback"), at("cuptiActivityEnable"));
  const WatchedGpu gpu = read_watch_gpu_dir(watch);
  ASSERT_EQ(gpu.activity.kernels.size(), 1u);
  expect_within(gpu.activity, begin, end);
  EXPECT_EQ(gpu.statuses_by_pid.begin()->second,
            std::vector<std::string>{recording_through_the_fake()});
}

// A CUPTI that refuses the callback: the offset taken at the start still places the records,
// and the status says so.
TEST(FeedscopeInjectTest, WithoutTheTimestampCallbackAnOffsetPlacesTheRecords) {
  feedscope::testing::TempDir dir;
  const ScopedEnv env({{"FAKE_CUPTI_NO_TIMESTAMP_CALLBACK", "1"}});
  const std::int64_t begin = now_ns();
  const int status = run_injection(dir.path().string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER});
  const std::int64_t end = now_ns();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  ASSERT_EQ(gpu.activity.kernels.size(), 1u);
  expect_within(gpu.activity, begin, end);
  const std::vector<std::string>& statuses = gpu.statuses_by_pid.begin()->second;
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_NE(statuses[0].find("; timestamps: CLOCK_REALTIME moved to CLOCK_MONOTONIC by one offset "
                             "taken at the start"),
            std::string::npos)
      << statuses[0];
  EXPECT_NE(statuses[0].find("(cuptiActivityRegisterTimestampCallback: CUPTI_ERROR_FAKE)"),
            std::string::npos)
      << statuses[0];
}

// torch.profiler (kineto) first: it holds CUPTI's one subscription. Registering our callbacks would
// take its buffers, so the injection leaves CUPTI alone and says why; the program goes on.
TEST(FeedscopeInjectTest, WithTorchProfilerSubscribedFirstItLeavesCuptiToItAndSaysWhy) {
  feedscope::testing::TempDir dir;
  const std::filesystem::path log = dir / "cupti.log";
  const std::filesystem::path watch = dir / "watch";
  std::filesystem::create_directory(watch);
  const ScopedEnv env({{"FAKE_CUPTI_SUBSCRIBED", "1"}, {"FAKE_CUPTI_LOG", log.string()}});
  const int status = run_injection(watch.string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER},
                                   "sleep:300");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(watch);
  ASSERT_EQ(gpu.statuses_by_pid.size(), 1u);
  const std::vector<std::string>& statuses = gpu.statuses_by_pid.begin()->second;
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_TRUE(statuses[0].starts_with(
      "unavailable: CUPTI: cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED "
      "(another CUPTI client holds CUPTI: torch.profiler (kineto)"))
      << statuses[0];
  const std::vector<std::string> calls = lines_of(log);
  EXPECT_FALSE(any_starts_with(calls, "cuptiActivityRegisterCallbacks"));
  EXPECT_FALSE(any_starts_with(calls, "cuptiActivityEnable"));
  EXPECT_TRUE(gpu.activity.empty());
}

// feedscope first: it must not keep the subscription, or torch.profiler's cuptiSubscribe fails
// when a profile starts. Once kineto has registered its callbacks the records stop reaching
// feedscope, which says so; the program goes on.
TEST(FeedscopeInjectTest, TorchProfilerStartedLaterGetsCuptiAndTheLossIsSaid) {
  feedscope::testing::TempDir dir;
  const std::filesystem::path log = dir / "cupti.log";
  const std::filesystem::path watch = dir / "watch";
  std::filesystem::create_directory(watch);
  const ScopedEnv env({{"FAKE_CUPTI_KINETO_AT_FLUSH", "2"}, {"FAKE_CUPTI_LOG", log.string()}});
  const int status = run_injection(watch.string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER},
                                   "sleep:700");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const std::vector<std::string> calls = lines_of(log);
  EXPECT_TRUE(any_starts_with(calls, "kineto subscribed")) << "torch.profiler could not subscribe";
  const WatchedGpu gpu = read_watch_gpu_dir(watch);
  ASSERT_EQ(gpu.statuses_by_pid.size(), 1u);
  const std::vector<std::string>& statuses = gpu.statuses_by_pid.begin()->second;
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0], recording_through_the_fake());
  EXPECT_TRUE(statuses[1].starts_with("interrupted: another CUPTI client (torch.profiler?) took "
                                      "the activity API"))
      << statuses[1];
  EXPECT_EQ(gpu.activity.kernels.size(), 1u) << "the records before the takeover are kept";
}

// A client that registered its callbacks before feedscope without subscribing may have a buffer
// out, which CUPTI then completes to feedscope: it is that client's memory, never freed here.
TEST(FeedscopeInjectTest, AnotherClientsBufferIsLeftToItAndSaid) {
  feedscope::testing::TempDir dir;
  const ScopedEnv env({{"FAKE_CUPTI_FOREIGN_BUFFER", "1"}});
  const int status = run_injection(dir.path().string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER},
                                   "sleep:300");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  ASSERT_EQ(gpu.statuses_by_pid.size(), 1u);
  const std::vector<std::string>& statuses = gpu.statuses_by_pid.begin()->second;
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0], recording_through_the_fake());
  EXPECT_TRUE(statuses[1].starts_with("recording; CUPTI handed feedscope the buffers of another "
                                      "CUPTI client"))
      << statuses[1];
  EXPECT_EQ(gpu.activity.kernels.size(), 1u);
}

bool has_line(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

// The calls a launch-bound torch step makes most (cudaGetDevice, 171 of 217) are not what the
// summary reads: only the launches, syncs, copies and queries are enabled, by callback id, and
// the file says so. A query of unfinished work leaves no record. The stop undoes all of it.
TEST(FeedscopeInjectTest, OnlyTheCallsTheSummaryReadsAreRecordedAndTheFileSaysSo) {
  feedscope::testing::TempDir dir;
  const std::filesystem::path log = dir / "cupti.log";
  const std::filesystem::path watch = dir / "watch";
  std::filesystem::create_directory(watch);
  const ScopedEnv env({{"FAKE_CUPTI_LOG", log.string()}});
  const int status = run_injection(watch.string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const std::vector<std::string> calls = lines_of(log);
  const auto on = [](const char* api, int cbid) {
    return std::string(api) + " on " + std::to_string(cbid);
  };
  EXPECT_TRUE(has_line(calls, on("cuptiActivityEnableRuntimeApi",
                                 CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000)));
  EXPECT_TRUE(has_line(calls, on("cuptiActivityEnableRuntimeApi",
                                 CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000)));
  EXPECT_TRUE(has_line(calls, on("cuptiActivityEnableRuntimeApi",
                                 CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020)));
  EXPECT_FALSE(has_line(calls, on("cuptiActivityEnableRuntimeApi",
                                  CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020)));
  EXPECT_TRUE(has_line(calls, on("cuptiActivityEnableDriverApi",
                                 CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)));
  EXPECT_FALSE(has_line(calls, on("cuptiActivityEnableDriverApi",
                                  CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent)));
  EXPECT_FALSE(has_line(calls, "cuptiActivityEnable " + std::to_string(CUPTI_ACTIVITY_KIND_RUNTIME)))
      << "the whole RUNTIME kind would override the selection";
  EXPECT_FALSE(has_line(calls, "cuptiActivityEnable " + std::to_string(CUPTI_ACTIVITY_KIND_DRIVER)));
  EXPECT_TRUE(has_line(calls, "cuptiActivityEnableAllSyncRecords 0"));
  // Undone at exit.
  EXPECT_TRUE(has_line(calls, "cuptiActivityEnableRuntimeApi off " +
                                  std::to_string(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000)));
  EXPECT_TRUE(has_line(calls, "cuptiActivityEnableAllSyncRecords 1"));

  const WatchedGpu gpu = read_watch_gpu_dir(watch);
  EXPECT_TRUE(gpu.errors.empty());
  ASSERT_TRUE(gpu.activity.tracing);
  const TracingMode& t = *gpu.activity.tracing;
  EXPECT_EQ(t.runtime_calls, TracingMode::Calls::selected);
  // Of the stand-in's runtime names: cudaStreamSynchronize, cudaEventQuery, cudaLaunchKernel and
  // its _ptsz variant, __cudaLaunchKernel; of its driver names: cuLaunchKernel, cuGraphLaunch.
  EXPECT_EQ(t.runtime_callbacks, 5u);
  EXPECT_EQ(t.driver_calls, TracingMode::Calls::selected);
  EXPECT_EQ(t.driver_callbacks, 2u);
  // No SYNCHRONIZATION kind: the runtime's sync calls carry the host's waits.
  EXPECT_FALSE(t.sync_records);
  EXPECT_FALSE(has_line(calls, "cuptiActivityEnable " +
                                   std::to_string(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)));
  EXPECT_EQ(t.note, "");
  EXPECT_EQ(gpu.statuses_by_pid.begin()->second,
            std::vector<std::string>{recording_through_the_fake()});
}

// watch's sampled tracing through the library as the driver loads it: the device's kinds and the
// runtime's go off and on at the schedule's edges, and the file carries the schedule
// and the windows. Windows of 200 ms in 500 ms after a 200 ms lead from the first kernel, over
// 2 s. A loaded machine wakes the library late: a window then opens late or not at all and closes
// late, so the checks are what holds regardless (a window opens only inside the schedule's) with
// 250 ms of slack on how long one lasts.
TEST(FeedscopeInjectTest, SampledTracingSwitchesTheDeviceKindsOnTheScheduleAndWritesTheWindows) {
  feedscope::testing::TempDir dir;
  const std::filesystem::path log = dir / "cupti.log";
  const std::filesystem::path watch = dir / "watch";
  std::filesystem::create_directory(watch);
  const ScopedEnv env({{"FAKE_CUPTI_LOG", log.string()},
                       {"FEEDSCOPE_GPU_TRACE_SAMPLE", "0.2/0.5"},
                       {"FEEDSCOPE_GPU_TRACE_LEAD", "0.2"}});
  const int status = run_injection(watch.string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER},
                                   "sleep:2000");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const std::vector<std::string> calls = lines_of(log);
  const std::string kernel_kind = std::to_string(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  const auto count = [&](const std::string& line) {
    return std::count(calls.begin(), calls.end(), line);
  };
  // Off after the lead, on again for a window (the stop turns it off once more).
  EXPECT_GE(count("cuptiActivityDisable " + kernel_kind), 2);
  EXPECT_GE(count("cuptiActivityEnable " + kernel_kind), 2);
  // The runtime's calls go off and on with them, as their whole kind: no call is selected, since
  // a selection would stay armed between the windows.
  const std::string runtime_kind = std::to_string(CUPTI_ACTIVITY_KIND_RUNTIME);
  EXPECT_GE(count("cuptiActivityDisable " + runtime_kind), 2);
  EXPECT_GE(count("cuptiActivityEnable " + runtime_kind), 2);
  EXPECT_EQ(count("cuptiActivityEnableRuntimeApi on " +
                  std::to_string(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)),
            0);

  const WatchedGpu gpu = read_watch_gpu_dir(watch);
  EXPECT_TRUE(gpu.errors.empty());
  ASSERT_TRUE(gpu.activity.tracing);
  constexpr std::int64_t kWindow = 200'000'000, kPeriod = 500'000'000;
  EXPECT_EQ(gpu.activity.tracing->sampling, (TraceSampling{kWindow, kPeriod, 200'000'000}));
  const std::vector<TimeWindow>& w = gpu.activity.traced_windows;
  ASSERT_GE(w.size(), 2u);
  constexpr std::int64_t kSlack = 250'000'000;
  // Until the first kernel (the stand-in's first flush, 200 ms in), the lead from it, and where
  // the lead ends inside a window, that window's rest.
  EXPECT_GE(w[0].end_ns - w[0].begin_ns, 200'000'000);
  EXPECT_LT(w[0].end_ns - w[0].begin_ns, 600'000'000 + kSlack);
  for (std::size_t i = 1; i < w.size(); ++i) {
    // Each later window opens inside the schedule's window of its period, on the clock.
    EXPECT_LT(w[i].begin_ns % kPeriod, kWindow) << i;
    EXPECT_LT(w[i].end_ns - w[i].begin_ns, kWindow + kSlack) << i;
  }
}

// A process that leaves by os._exit (a fork-started rank) runs no atexit handler. Each sampled
// window's records are handed over forced a tick after it closed, so what a default flush holds
// back (a buffer with an incomplete record) still reaches the file.
TEST(FeedscopeInjectTest, AProcessThatLeavesWithoutAtexitStillWritesEachClosedWindowsRecords) {
  feedscope::testing::TempDir dir;
  const std::filesystem::path watch = dir / "watch";
  std::filesystem::create_directory(watch);
  const ScopedEnv env({{"FAKE_CUPTI_HOLD_LATER", "1"},
                       {"FEEDSCOPE_GPU_TRACE_SAMPLE", "0.1/0.3"},
                       {"FEEDSCOPE_GPU_TRACE_LEAD", "0"}});
  const int status = run_injection(watch.string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER},
                                   "_exit:1200");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(watch);
  EXPECT_TRUE(gpu.errors.empty());
  EXPECT_GT(gpu.activity.kernels.size(), 1u)
      << "the first buffer's kernel alone: the later ones stayed held back until an exit that never ran";
}

// A CUPTI that cannot select calls records them all, and the file says which mode ran and why.
TEST(FeedscopeInjectTest, WhereCuptiCannotSelectCallsTheWholeRuntimeKindIsTracedAndSaid) {
  feedscope::testing::TempDir dir;
  const std::filesystem::path log = dir / "cupti.log";
  const std::filesystem::path watch = dir / "watch";
  std::filesystem::create_directory(watch);
  const ScopedEnv env({{"FAKE_CUPTI_NO_PER_API", "1"}, {"FAKE_CUPTI_LOG", log.string()}});
  const int status = run_injection(watch.string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  EXPECT_TRUE(has_line(lines_of(log),
                       "cuptiActivityEnable " + std::to_string(CUPTI_ACTIVITY_KIND_RUNTIME)));
  const WatchedGpu gpu = read_watch_gpu_dir(watch);
  ASSERT_TRUE(gpu.activity.tracing);
  const TracingMode& t = *gpu.activity.tracing;
  EXPECT_EQ(t.runtime_calls, TracingMode::Calls::all);
  EXPECT_EQ(t.driver_calls, TracingMode::Calls::none);
  EXPECT_FALSE(t.sync_records);
  EXPECT_TRUE(t.note.starts_with("every runtime call traced: cuptiActivityEnableRuntimeApi(")) << t.note;
  EXPECT_NE(t.note.find("the driver's launch calls not traced"), std::string::npos) << t.note;
  ASSERT_EQ(gpu.activity.runtime.size(), 1u);
  EXPECT_EQ(gpu.activity.runtime[0].name, "cudaLaunchKernel");
}

// torch.compile: Triton's kernels launch through the driver, a CUDA graph's through cuGraphLaunch.
// Both reach the watcher as driver calls, the graph's kernel with its graph id.
TEST(FeedscopeInjectTest, TheDriversLaunchesAndGraphIdsReachTheWatcher) {
  feedscope::testing::TempDir dir;
  const ScopedEnv env({{"FAKE_CUPTI_COMPILED", "1"}});
  const int status = run_injection(dir.path().string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  EXPECT_TRUE(gpu.errors.empty());
  ASSERT_EQ(gpu.activity.runtime.size(), 3u);
  EXPECT_EQ(gpu.activity.runtime[0].name, "cudaLaunchKernel");
  EXPECT_EQ(gpu.activity.runtime[0].domain, ApiDomain::runtime);
  EXPECT_EQ(gpu.activity.runtime[1].name, "cuLaunchKernel");
  EXPECT_EQ(gpu.activity.runtime[1].domain, ApiDomain::driver);
  EXPECT_EQ(gpu.activity.runtime[1].correlation_id, 50u);
  EXPECT_EQ(gpu.activity.runtime[2].name, "cuGraphLaunch");
  EXPECT_EQ(gpu.activity.runtime[2].domain, ApiDomain::driver);
  ASSERT_EQ(gpu.activity.kernels.size(), 3u);
  EXPECT_EQ(gpu.activity.kernels[1].name, "triton_poi_fused_add_0");
  EXPECT_EQ(gpu.activity.kernels[1].graph_id, 0u);
  EXPECT_EQ(gpu.activity.kernels[2].graph_id, 3u);
  EXPECT_EQ(gpu.activity.kernels[2].correlation_id, 51u);
  // Both count as launches in the summary, one each.
  const GpuTraceSummary s = summarize_gpu_trace(
      gpu.activity, {{gpu.activity.runtime[0].start_ns - 1, gpu.activity.kernels[2].end_ns + 1}});
  EXPECT_EQ(s.launch_calls, 3);
  EXPECT_EQ(s.driver_launch_calls, 1);  // cuLaunchKernel; cuGraphLaunch is a replay
  EXPECT_EQ(s.launches_without_call, 0);
}

// 400,000 kernels of a launch-bound step, each with torch's 163-character name: with a copy of
// the name in every record the in-process cap (64 MiB) took about 300,000 of them; the names are
// stored once, so the cap counts records and they all fit.
TEST(FeedscopeInjectTest, ManyKernelsWithLongNamesAllFitUnderTheRecordCap) {
  feedscope::testing::TempDir dir;
  const ScopedEnv env({{"FAKE_CUPTI_KERNELS", "400000"}});
  const int status = run_injection(dir.path().string(), {FAKE_CUDA_DRIVER_13, FAKE_CUPTI_RECORDER});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe(status);
  const WatchedGpu gpu = read_watch_gpu_dir(dir.path());
  EXPECT_EQ(gpu.activity.not_kept, 0u);
  ASSERT_EQ(gpu.activity.kernels.size(), 400'001u);
  EXPECT_EQ(gpu.activity.kernels[0].name,
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1>)");
}

}  // namespace
}  // namespace feedscope
