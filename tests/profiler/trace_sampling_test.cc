// Sampled GPU tracing's pure parts (profiler/trace_sampling.h): the schedule, the window log a
// recorder keeps, several processes' windows together, and where a window can be read.
#include "profiler/trace_sampling.h"
#include "profiler/time_windows.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace feedscope {
namespace {

constexpr std::int64_t kSampleS = 1'000'000'000;
constexpr std::int64_t kSampleMs = 1'000'000;

TEST(TraceSamplingTest, ASpecReadsAsWholeOrWindowOfPeriodAndAnythingElseIsNamed) {
  std::string why;
  const auto whole = parse_trace_sampling("whole", 5, why);
  ASSERT_TRUE(whole);
  EXPECT_FALSE(whole->sampled());
  const auto one_in_ten = parse_trace_sampling("1/10", 5, why);
  ASSERT_TRUE(one_in_ten);
  EXPECT_EQ(*one_in_ten, (TraceSampling{1 * kSampleS, 10 * kSampleS, 5 * kSampleS}));
  EXPECT_EQ(trace_sampling_spec(*one_in_ten), "1/10");
  EXPECT_EQ(describe_sampling(*one_in_ten), "1 s of every 10 s after the first 5 s");
  EXPECT_EQ(describe_sampling(*parse_trace_sampling("0.5/5", 0, why)), "0.5 s of every 5 s");
  EXPECT_EQ(trace_sampling_spec(TraceSampling{}), "whole");
  for (const char* bad : {"", "1", "10/1", "1/1", "0/10", "-1/10", "1/x", "1/7200", "a/b", "1//10"}) {
    why.clear();
    EXPECT_FALSE(parse_trace_sampling(bad, 5, why)) << bad;
    EXPECT_NE(why.find(std::string("\"") + bad + "\""), std::string::npos) << why;
  }
  EXPECT_FALSE(parse_trace_sampling("1/10", -1, why));
  EXPECT_NE(why.find("lead"), std::string::npos) << why;
}

// The lead is the process's own; the windows are the clock's, so processes trace together.
TEST(TraceSamplingTest, TheLeadIsWholeThenTheWindowsFollowTheClock) {
  const TraceSampling s{1 * kSampleS, 10 * kSampleS, 5 * kSampleS};
  const std::int64_t start = 1003 * kSampleS + 500 * kSampleMs;  // 3.5 s into a period
  EXPECT_TRUE(traced_at(s, start, start));
  EXPECT_TRUE(traced_at(s, start, start + 4 * kSampleS));      // in the lead (1007.5)
  EXPECT_FALSE(traced_at(s, start, start + 5 * kSampleS));     // 1008.5: between windows
  EXPECT_TRUE(traced_at(s, start, 1010 * kSampleS));           // a window opens at a period's start
  EXPECT_TRUE(traced_at(s, start, 1010 * kSampleS + 999 * kSampleMs));
  EXPECT_FALSE(traced_at(s, start, 1011 * kSampleS));
  EXPECT_TRUE(traced_at(TraceSampling{}, start, start + 100 * kSampleS));
  // Before the lead began (no kernel yet): traced, and nothing due.
  constexpr std::int64_t kNotYet = std::numeric_limits<std::int64_t>::max();
  EXPECT_TRUE(traced_at(s, kNotYet, 1008 * kSampleS + 500 * kSampleMs));
  EXPECT_EQ(next_sampling_change(s, kNotYet, start), kNotYet);

  // The changes, in order: the lead ends at 1008.5, the window 1010-1011, then 1020.
  EXPECT_EQ(next_sampling_change(s, start, start), 1008 * kSampleS + 500 * kSampleMs);
  EXPECT_EQ(next_sampling_change(s, start, 1008 * kSampleS + 500 * kSampleMs), 1010 * kSampleS);
  EXPECT_EQ(next_sampling_change(s, start, 1010 * kSampleS), 1011 * kSampleS);
  EXPECT_EQ(next_sampling_change(s, start, 1011 * kSampleS), 1020 * kSampleS);
  // A lead that ends inside a window runs on to the window's end.
  const std::int64_t late = 1005 * kSampleS + 500 * kSampleMs;  // lead ends at 1010.5, in 1010-1011
  EXPECT_EQ(next_sampling_change(s, late, late), 1011 * kSampleS);
  EXPECT_EQ(next_sampling_change(TraceSampling{}, start, start),
            std::numeric_limits<std::int64_t>::max());
}

TEST(TraceSamplingTest, TheLogHandsEachStretchOutOnceAndCoversWhatWasOpen) {
  TracedWindowLog log;
  log.open(100);
  EXPECT_TRUE(log.is_open());
  EXPECT_EQ(log.take(150), (std::vector<TimeWindow>{{100, 150}}));
  log.close(200);
  log.close(250);  // nothing: none is open
  log.open(300);
  EXPECT_EQ(log.take(350), (std::vector<TimeWindow>{{150, 200}, {300, 350}}));
  EXPECT_EQ(log.take(360), (std::vector<TimeWindow>{{350, 360}}));
  log.close(400);
  EXPECT_EQ(log.take(500), (std::vector<TimeWindow>{{360, 400}}));
  EXPECT_TRUE(log.take(600).empty());
  EXPECT_TRUE(log.covers(100));
  EXPECT_TRUE(log.covers(199));
  EXPECT_FALSE(log.covers(200));
  EXPECT_FALSE(log.covers(99));
  EXPECT_TRUE(log.covers(399));
  EXPECT_FALSE(log.covers(450));
  log.open(700);
  EXPECT_TRUE(log.covers(1'000'000));  // the open window covers what is still to come

  // Taken pieces join again when a process's batches are appended.
  GpuActivity a, b;
  a.traced_windows = {{100, 150}};
  b.traced_windows = {{150, 200}, {300, 350}};
  a.append(std::move(b));
  EXPECT_EQ(a.traced_windows, (std::vector<TimeWindow>{{100, 200}, {300, 350}}));
}

// A time is read where every process alive then was tracing: one process's lead is not the
// other's window.
TEST(TraceSamplingTest, SeveralProcessesAreReadWhereAllThatLivedWereTracing) {
  const std::vector<TimeWindow> first = {{0, 50}, {100, 110}, {200, 210}};
  const std::vector<TimeWindow> late = {{80, 130}, {200, 210}, {300, 310}};  // lead 80-130
  EXPECT_EQ(traced_by_every_process({first, late}),
            (std::vector<TimeWindow>{{0, 50}, {100, 110}, {200, 210}, {300, 310}}));
  EXPECT_EQ(traced_by_every_process({first}), first);
  EXPECT_TRUE(traced_by_every_process({}).empty());
}

// An input-bound program's GPU waits at a window's head as anywhere else: a window whose first
// kernel started as soon as its launch returned is read from where it was opened.
TEST(TraceSamplingTest, AWindowIsReadFromItsOpeningWhereItsFirstKernelDidNotQueue) {
  GpuActivity a;
  TracingMode mode;
  mode.sampling = TraceSampling{10 * kSampleMs, 100 * kSampleMs, 0};
  a.tracing = mode;
  a.traced_windows = {{0, 10 * kSampleMs}, {100 * kSampleMs, 110 * kSampleMs}};
  // Window 1: the GPU idle until the launch at 6 ms; its kernel starts 8 us after the call.
  a.runtime.push_back({"cudaLaunchKernel", 6 * kSampleMs, 6 * kSampleMs + 5000, 1, 1});
  a.kernels.push_back({"k", 6 * kSampleMs + 13'000, 7 * kSampleMs, 0, 7, 1});
  // Window 2: a kernel launched through a call the trace did not keep (the driver's): read from it.
  a.kernels.push_back({"triton_k", 104 * kSampleMs, 105 * kSampleMs, 0, 7, 2});
  const ReadableWindows r = readable_windows(a);
  EXPECT_EQ(r.windows, (std::vector<TimeWindow>{{0, 10 * kSampleMs}, {104 * kSampleMs, 110 * kSampleMs}}));
}

TEST(TraceSamplingTest, AWindowIsReadFromItsFirstDeviceRecordAndOneWithoutRecordsIsLeftOut) {
  GpuActivity a;
  TracingMode mode;
  mode.sampling = TraceSampling{10 * kSampleMs, 100 * kSampleMs, 0};
  a.tracing = mode;
  a.traced_windows = {{0, 10 * kSampleMs}, {100 * kSampleMs, 110 * kSampleMs}, {200 * kSampleMs, 210 * kSampleMs}};
  // Window 1: work launched before it ran until 3 ms, with no record: its first record, launched at
  // 1 ms, queued behind it and starts then.
  a.runtime.push_back({"cudaLaunchKernel", 1 * kSampleMs, 1 * kSampleMs + 5000, 1, 1});
  a.kernels.push_back({"k", 3 * kSampleMs, 4 * kSampleMs, 0, 7, 1});
  // Window 2: launches, and no device record (a CUPTI that did not record again).
  a.runtime.push_back({"cudaLaunchKernel", 101 * kSampleMs, 101 * kSampleMs + 5000, 1, 2});
  // Window 3: nothing at all: the program left the GPU idle.
  const ReadableWindows r = readable_windows(a);
  EXPECT_EQ(r.windows, (std::vector<TimeWindow>{{3 * kSampleMs, 10 * kSampleMs}, {200 * kSampleMs, 210 * kSampleMs}}));
  EXPECT_EQ(r.without_records, 1);
  EXPECT_EQ(windows_ns(r.windows), 17 * kSampleMs);
  EXPECT_EQ(intersect_windows({{5 * kSampleMs, 205 * kSampleMs}}, r.windows),
            (std::vector<TimeWindow>{{5 * kSampleMs, 10 * kSampleMs}, {200 * kSampleMs, 205 * kSampleMs}}));
}

}  // namespace
}  // namespace feedscope
