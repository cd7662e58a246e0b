#include "loader/detail/autotune_probe.h"

#include <gtest/gtest.h>

namespace feedscope::detail {
namespace probe_test {

TEST(IdleCoreMeter, IdleAndIowaitTicksOverAllTicksTimesTheCores) {
  IdleCoreMeter meter;
  // user nice system idle iowait irq softirq steal, then two cpuN lines.
  EXPECT_FALSE(meter.read("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1\ncpu1 1\n"));
  // 400 ticks more, 100 of them idle and 100 iowait: half of two cores.
  const std::optional<double> idle = meter.read("cpu  200 0 200 900 100 0 0 0 0 0\ncpu0 1\ncpu1 1\n");
  ASSERT_TRUE(idle);
  EXPECT_NEAR(*idle, 1.0, 1e-12);
  // No tick passed: not known rather than a division by zero.
  EXPECT_FALSE(meter.read("cpu  200 0 200 900 100 0 0 0 0 0\ncpu0 1\ncpu1 1\n"));
  EXPECT_FALSE(meter.read("intr 5\n"));
}

TEST(IdleCoreMeter, LiveProcStatReadsWithinTheCores) {
  IdleCoreMeter meter;
  meter.read();
  // No tick may have passed since: then not known.
  if (const std::optional<double> idle = meter.read()) {
    EXPECT_GE(*idle, 0.0);
    EXPECT_LE(*idle, usable_cores() + 256.0);
  }
  EXPECT_GE(usable_cores(), 1);
  EXPECT_GT(available_memory_bytes().value_or(1), 0u);
}

TEST(ThreadTimes, CpuAndQueuedTimeOnlyGrow) {
  const std::int64_t cpu = thread_cpu_ns(), queued = thread_queued_ns();
  EXPECT_GT(cpu, 0);
  EXPECT_GE(queued, 0);
  EXPECT_GE(thread_cpu_ns(), cpu);
  EXPECT_GE(thread_queued_ns(), queued);
}

TEST(WaitWindow, ClosesIntoWhatTheTunerReads) {
  WaitWindow w;
  w.reset(1'000'000'000);
  for (int i = 0; i < 4; ++i) w.add(1'000'000);
  w.add(96'000'000);
  EXPECT_EQ(w.batches(), 5);
  const TunerWindow t = w.close(1'500'000'000, {0.8, 0.4, 0.1}, 1.5);
  EXPECT_EQ(t.batches, 5);
  EXPECT_NEAR(t.wait_s, 0.1, 1e-12);
  EXPECT_NEAR(t.seconds(), 0.5, 1e-12);
  EXPECT_NEAR(t.wait_concentration, 0.96, 1e-12);
  EXPECT_EQ(t.idle_cores, 1.5);
  EXPECT_EQ(t.worker_queued_s, 0.1);
  const Measured m = measured(t);
  EXPECT_NEAR(m.batches_per_s, 10, 1e-9);
  EXPECT_NEAR(m.stall, 0.2, 1e-12);
  w.reset(2'000'000'000);
  EXPECT_EQ(w.batches(), 0);
}

}  // namespace probe_test
}  // namespace feedscope::detail
