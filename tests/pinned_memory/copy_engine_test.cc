#include "pinned_memory/copy_engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "pinned_memory/errors.h"

#if FEEDSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace feedscope {
namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TEST(CopyEngineTest, WithoutADeviceConstructionSaysWhy) {
  std::string why;
  if (copy_engine_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(why.empty());
  CopyEngine::Options o;
  o.buffer_bytes = 4096;
  try {
    CopyEngine engine(o);
    FAIL() << "made a copy engine without a device";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(CopyEngineTest, BadOptionsAreRejectedBeforeAnyDeviceWork) {
  CopyEngine::Options o;
  o.buffer_bytes = 0;
  EXPECT_THROW(CopyEngine{o}, std::invalid_argument);
  o.buffer_bytes = 4096;
  o.buffers = 1;
#if FEEDSCOPE_WITH_CUDA
  EXPECT_THROW(CopyEngine{o}, std::invalid_argument);
#else
  EXPECT_THROW(CopyEngine{o}, DeviceError);
#endif
}

TEST(CopyEngineTest, AMovedFromOrEmptyDeviceCopyIsInert) {
  DeviceCopy empty;
  EXPECT_FALSE(empty);
  empty.order_before(nullptr);  // no engine: nothing to order
  empty.release_after(nullptr);
  DeviceCopy moved(std::move(empty));
  EXPECT_FALSE(moved);
}

TEST(StepFenceTest, WithoutCudaItIsANoOp) {
#if FEEDSCOPE_WITH_CUDA
  GTEST_SKIP() << "built with CUDA: the fence needs a device (see StepFenceGpuTest)";
#else
  StepFence fence(2);
  for (int i = 0; i < 5; ++i) {
    fence.wait_for_previous();
    fence.mark(nullptr);
  }
#endif
}

#if FEEDSCOPE_WITH_CUDA

class CopyEngineGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!copy_engine_available(&why)) GTEST_SKIP() << why;
  }
};

std::vector<std::byte> device_bytes(const DeviceCopy& copy, cudaStream_t stream) {
  std::vector<std::byte> out(copy.bytes());
  copy.order_before(stream);
  EXPECT_EQ(cudaMemcpyAsync(out.data(), copy.data(), out.size(), cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return out;
}

TEST_F(CopyEngineGpuTest, CopiesArriveIntactAndSlabsComeBackWithTimings) {
  auto pool = PinnedPool::create(1 << 20, 4, make_pinned_allocator());
  CopyEngine::Options o;
  o.buffer_bytes = pool->slab_bytes();
  CopyEngine engine(o);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const std::int64_t before = steady_ns();
  for (int round = 0; round < 6; ++round) {
    Slab slab = pool->acquire();
    for (std::size_t i = 0; i < slab.size(); ++i)
      slab.data()[i] = static_cast<std::byte>((i * 7 + static_cast<std::size_t>(round)) & 0xff);
    const std::vector<std::byte> expected(slab.data(), slab.data() + 100000);
    DeviceCopy copy = engine.submit(std::move(slab), 100000, round);
    EXPECT_EQ(device_bytes(copy, stream), expected) << "round " << round;
    copy.release_after(stream);
  }
  engine.wait_idle();
  std::vector<CopyTiming> timings;
  engine.reclaim(&timings);
  EXPECT_EQ(pool->slabs_in_use(), 0) << "every copied slab is back in its pool";
  ASSERT_EQ(timings.size(), 6u);
  const std::int64_t after = steady_ns();
  for (std::size_t i = 0; i < timings.size(); ++i) {
    EXPECT_EQ(timings[i].tag, static_cast<std::int64_t>(i));
    EXPECT_EQ(timings[i].bytes, 100000u);
    EXPECT_TRUE(timings[i].pinned);
    EXPECT_LE(timings[i].begin_ns, timings[i].end_ns);
    // On the host clock: inside the test's window, give or take the anchor's few microseconds.
    EXPECT_GT(timings[i].begin_ns, before - 1'000'000);
    EXPECT_LT(timings[i].end_ns, after + 1'000'000);
  }
  cudaStreamDestroy(stream);
}

TEST_F(CopyEngineGpuTest, EveryBufferHeldThrowsInsteadOfWaitingForever) {
  auto pool = PinnedPool::create(4096, 6, make_pinned_allocator());
  CopyEngine::Options o;
  o.buffer_bytes = pool->slab_bytes();
  o.buffers = 2;
  CopyEngine engine(o);
  DeviceCopy a = engine.submit(pool->acquire(), 4096, 0);
  DeviceCopy b = engine.submit(pool->acquire(), 4096, 1);
  EXPECT_EQ(engine.buffers_in_use(), 2);
  EXPECT_THROW(engine.submit(pool->acquire(), 4096, 2), CopyEngineExhausted);
  std::byte* const a_buffer = a.data();
  a.release_after(nullptr);
  DeviceCopy c = engine.submit(pool->acquire(), 4096, 3);  // a's buffer, after a's reader
  EXPECT_EQ(c.data(), a_buffer);
  EXPECT_THROW(engine.submit(pool->acquire(), 8192 + pool->slab_bytes(), 4), std::invalid_argument);
}

TEST_F(CopyEngineGpuTest, ABufferIsNotOverwrittenBeforeItsReaderIsDone) {
  // The reader is a slow device-to-host copy on another stream; the next copy into the same
  // buffer must wait for it, so the reader sees the first batch's bytes, never the second's.
  auto pool = PinnedPool::create(64 << 20, 3, make_pinned_allocator());
  CopyEngine::Options o;
  o.buffer_bytes = pool->slab_bytes();
  o.buffers = 2;
  CopyEngine engine(o);
  cudaStream_t reader = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking), cudaSuccess);
  const std::size_t n = 64 << 20;
  std::vector<std::byte> seen(n);
  Slab first = pool->acquire();
  std::memset(first.data(), 0x11, n);
  DeviceCopy a = engine.submit(std::move(first), n, 0);
  a.order_before(reader);
  ASSERT_EQ(cudaMemcpyAsync(seen.data(), a.data(), n, cudaMemcpyDeviceToHost, reader), cudaSuccess);
  a.release_after(reader);
  DeviceCopy b = engine.submit(pool->acquire(), 16, 1);  // the other buffer
  Slab third = pool->acquire();
  std::memset(third.data(), 0x22, n);
  DeviceCopy c = engine.submit(std::move(third), n, 2);  // a's buffer again
  ASSERT_EQ(cudaStreamSynchronize(reader), cudaSuccess);
  EXPECT_EQ(seen.front(), std::byte{0x11});
  EXPECT_EQ(seen.back(), std::byte{0x11});
  cudaStreamDestroy(reader);
}

TEST_F(CopyEngineGpuTest, StepFenceBoundsTheStepsInFlight) {
  StepFence fence(2);
  for (int i = 0; i < 10; ++i) {
    fence.wait_for_previous();
    fence.mark(nullptr);
  }
  SUCCEED();
}

#endif  // FEEDSCOPE_WITH_CUDA

}  // namespace
}  // namespace feedscope
