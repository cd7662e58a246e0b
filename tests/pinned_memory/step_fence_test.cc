#include "pinned_memory/step_fence.h"

#include <gtest/gtest.h>

#include <vector>

#include "pinned_memory/copy_engine.h"
#include "pinned_memory/errors.h"
#include "profiler/gpu_trace.h"
#include "tests/pinned_memory/fake_cuda.h"

namespace feedscope {
namespace {

using testing::FakeCuda;

// One step's device work on the legacy stream: a 1 MB copy stands in for its kernels.
void queue_step(FakeCuda& cuda, std::vector<std::byte>& host, void* device_buffer) {
  cuda.copy_to_device_async(device_buffer, host.data(), host.size(), nullptr);
}

TEST(StepFenceTest, KeepsDepthStepsInFlightAndWaitsByPollingNeverByAHostSync) {
  FakeCuda cuda;
  std::vector<std::byte> host(1 << 20);
  void* buffer = cuda.allocate(host.size());
  StepFence fence(0, 2, &cuda);
  cuda.clear_calls();
  for (int step = 0; step < 6; ++step) {
    fence.wait_for_previous();
    // Each step queues two operations (its work, its mark). Once two steps were marked, only
    // the last one may still be queued: the one two back is done.
    EXPECT_LE(cuda.queued(nullptr), step >= 2 ? 2u : 2u * static_cast<unsigned>(step))
        << "step " << step;
    queue_step(cuda, host, buffer);
    fence.mark(nullptr);
  }
  EXPECT_GT(cuda.idles(), 0) << "the fence waited for the device";
  // The fence is feedscope's own: none of its calls may be one the trace counts as the user's
  // host sync (gpu_trace.cc), or every profiled GPU run shows a sync per step.
  for (const FakeCuda::Call& call : cuda.calls())
    EXPECT_FALSE(is_synchronous_runtime_call(call.name)) << call.name;
  fence.wait_all();
  EXPECT_EQ(cuda.queued(nullptr), 0u) << "wait_all leaves nothing queued before its mark";
  cuda.release(buffer);
}

TEST(StepFenceTest, NoWaitBeforeDepthStepsWereMarked) {
  FakeCuda cuda;
  cuda.device_runs_while_host_idles = false;
  StepFence fence(0, 3, &cuda);
  for (int step = 0; step < 3; ++step) {
    fence.wait_for_previous();  // would poll forever (and throw) if it waited on an unrun mark
    fence.mark(nullptr);
  }
  EXPECT_EQ(cuda.idles(), 0);
}

TEST(StepFenceTest, EventsAreMadeAndRecordedOnTheStepsDeviceWhicheverIsCurrent) {
  // cuda:1 while device 0 is current (libtorch leaves the current device alone): the fence's
  // events belong to device 1 and its marks go on device 1's stream. The fake rejects an event
  // recorded on another device's stream, as CUDA does.
  FakeCuda cuda(2);
  ASSERT_EQ(cuda.current_device(), 0);
  StepFence fence(1, 2, &cuda);
  EXPECT_EQ(fence.device(), 1);
  for (int step = 0; step < 4; ++step) {
    fence.wait_for_previous();
    EXPECT_NO_THROW(fence.mark(nullptr));
    EXPECT_EQ(cuda.current_device(), 0) << "the caller's current device is restored";
  }
  EXPECT_EQ(cuda.queued(cuda.legacy_stream(0)), 0u) << "nothing marked on device 0";
  // Marks 0 and 1 were waited for (and ran); marks 2 and 3 are still queued on device 1.
  EXPECT_EQ(cuda.queued(cuda.legacy_stream(1)), 2u);
  for (const FakeCuda::Call& call : cuda.calls())
    if (call.name == "cudaEventRecord" || call.name == "cudaEventCreateWithFlags") {
      EXPECT_EQ(call.device, 1) << call.name;
    }
}

TEST(StepFenceTest, ADepthBelowOneIsRejected) {
  FakeCuda cuda;
  EXPECT_THROW(StepFence(0, 0, &cuda), std::invalid_argument);
}

TEST(StepFenceTest, EveryEventIsDestroyed) {
  FakeCuda cuda;
  {
    StepFence fence(0, 4, &cuda);
    EXPECT_EQ(cuda.live_events(), 4);
  }
  EXPECT_EQ(cuda.live_events(), 0);
}

TEST(StepFenceTest, WithoutADeviceConstructionSaysWhy) {
  if (copy_engine_available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(StepFence(0, 2), DeviceError);
}

}  // namespace
}  // namespace feedscope
