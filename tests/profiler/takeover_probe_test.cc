// The injection library's watch for another CUPTI client taking its buffer callbacks
// (profiler/detail/takeover_probe.h), with the time and the buffer count passed in.
#include "profiler/detail/takeover_probe.h"

#include <gtest/gtest.h>

namespace feedscope::detail {
namespace {

using Change = TakeoverProbe::Change;
constexpr std::int64_t kTimeout = 30'000'000'000;

TEST(TakeoverProbeTest, WithoutAProbeNothingIsSaid) {
  TakeoverProbe p(kTimeout);
  EXPECT_EQ(p.check(10 * kTimeout, 0, false), Change::none);
  EXPECT_EQ(p.check(10 * kTimeout, 0, true), Change::none);
  EXPECT_FALSE(p.silent());
}

// A busy program's buffers keep coming: any of them proves the callbacks ours, answer or not.
TEST(TakeoverProbeTest, AnyBufferAfterTheProbeEndsItQuietly) {
  TakeoverProbe p(kTimeout);
  p.probed(1'000, 5);
  EXPECT_EQ(p.check(2'000, 5, false), Change::none);
  EXPECT_TRUE(p.pending());
  EXPECT_EQ(p.check(3'000, 6, false), Change::none);
  EXPECT_FALSE(p.pending()) << "the callbacks are ours: a probe may be asked for again";
  EXPECT_FALSE(p.silent());
}

// The timeout over and no buffer since the probe: said once, with the probe's time, however long
// the silence lasts and however often it is probed again.
TEST(TakeoverProbeTest, NoBufferForAWholeTimeoutGoesSilentOnce) {
  TakeoverProbe p(kTimeout);
  p.probed(1'000, 5);
  EXPECT_EQ(p.check(1'000 + kTimeout - 1, 5, false), Change::none) << "the timeout is not over";
  EXPECT_EQ(p.check(1'000 + kTimeout, 5, false), Change::went_silent);
  EXPECT_TRUE(p.silent());
  EXPECT_EQ(p.silent_since(), 1'000);
  EXPECT_FALSE(p.pending());
  p.probed(2 * kTimeout, 5);
  EXPECT_EQ(p.check(4 * kTimeout, 5, false), Change::none) << "still silent: not said again";
  EXPECT_FALSE(p.pending());
}

// A buffer held back by CUPTI while a long kernel in it ran reaches the callbacks once the kernel
// ends: the silence was no takeover (a client that takes the callbacks keeps them), which is said.
TEST(TakeoverProbeTest, ABufferAfterTheSilenceSaysTheCallbacksCameBack) {
  TakeoverProbe p(kTimeout);
  p.probed(0, 5);
  ASSERT_EQ(p.check(kTimeout, 5, false), Change::went_silent);
  EXPECT_EQ(p.check(kTimeout + 1, 6, false), Change::came_back);
  EXPECT_FALSE(p.silent());
  EXPECT_EQ(p.check(kTimeout + 2, 7, false), Change::none) << "said once";
}

// At exit the forced flush has handed over every buffer there was: no more waiting.
TEST(TakeoverProbeTest, AtExitAProbeOutIsSettledAtOnce) {
  TakeoverProbe quiet(kTimeout);
  quiet.probed(0, 5);
  EXPECT_EQ(quiet.check(1, 5, true), Change::went_silent);
  TakeoverProbe held(kTimeout);
  held.probed(0, 5);
  ASSERT_EQ(held.check(kTimeout, 5, false), Change::went_silent);
  EXPECT_EQ(held.check(kTimeout + 1, 6, true), Change::came_back)
      << "the exit's forced flush brought what CUPTI held back";
}

}  // namespace
}  // namespace feedscope::detail
