#include "pinned_memory/copy_engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "pinned_memory/errors.h"
#include "pinned_memory/step_fence.h"
#include "profiler/gpu_trace.h"
#include "tests/pinned_memory/fake_cuda.h"

#if FEEDSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>
#include <unistd.h>
#endif

namespace feedscope {
namespace {

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
  EXPECT_THROW(CopyEngine{o}, std::invalid_argument);
}

TEST(CopyEngineTest, AMovedFromOrEmptyDeviceCopyIsInert) {
  DeviceCopy empty;
  EXPECT_FALSE(empty);
  empty.order_before(nullptr);  // no engine: nothing to order
  empty.release_after(nullptr);
  DeviceCopy moved(std::move(empty));
  EXPECT_FALSE(moved);
}

// --- On a simulated device (tests/pinned_memory/fake_cuda.h) ------------------------------------

using testing::FakeCuda;

struct FakeEngine {
  // `pinned_slabs` false: pageable slabs, whose copy CUDA makes the host wait for.
  explicit FakeEngine(int buffers = 3, int devices = 1, int device = 0, int extra_buffers = 0,
                      bool pinned_slabs = true)
      : cuda(devices, /*bytes_per_ms=*/1000.0),
        pool(PinnedPool::create(4096, 8,
                                pinned_slabs ? std::unique_ptr<HostAllocator>(
                                                   std::make_unique<testing::FakePinnedAllocator>())
                                             : make_page_allocator())) {
    CopyEngine::Options o;
    o.device = device;
    o.buffer_bytes = pool->slab_bytes();
    o.buffers = buffers;
    o.max_extra_buffers = extra_buffers;
    o.ops = &cuda;
    engine = std::make_unique<CopyEngine>(o);
  }
  Slab slab(std::byte fill) {
    Slab s = pool->acquire();
    std::memset(s.data(), static_cast<int>(fill), s.size());
    return s;
  }
  FakeCuda cuda;
  std::shared_ptr<PinnedPool> pool;
  std::unique_ptr<CopyEngine> engine;
};

TEST(CopyEngineTest, EveryCopysTimingReachesTheCollectorAlsoWhenSubmitRetiredItsSlab) {
  // A copy that finishes before the next submit is retired inside that submit (its slab goes
  // back to the pool there). Its timing must still reach reclaim(&timings): it is the h2d span
  // and the h2d bytes of a copy-bound run.
  FakeEngine f(3, 1, 0, 0, /*pinned_slabs=*/false);
  for (int round = 0; round < 6; ++round) {
    DeviceCopy copy = f.engine->submit(f.slab(std::byte(round)), 500 * (round + 1), round);
    f.cuda.run_all();  // the copy (and the reader's release) are done before the next submit
    copy.release_after(nullptr);
    f.cuda.run_all();
  }
  std::vector<CopyTiming> timings;
  f.engine->reclaim(&timings);
  ASSERT_EQ(timings.size(), 6u);
  for (std::size_t i = 0; i < timings.size(); ++i) {
    EXPECT_EQ(timings[i].tag, static_cast<std::int64_t>(i));
    EXPECT_EQ(timings[i].bytes, 500u * (i + 1));
    EXPECT_FALSE(timings[i].pinned);
    // 1000 bytes a millisecond on the fake device.
    EXPECT_NEAR(static_cast<double>(timings[i].end_ns - timings[i].begin_ns),
                5e5 * static_cast<double>(i + 1), 1e3);
    if (i > 0) {
      EXPECT_GE(timings[i].begin_ns, timings[i - 1].end_ns);
    }
  }
  EXPECT_EQ(f.pool->slabs_in_use(), 0);
  ASSERT_EQ(f.cuda.copies().size(), 6u);
  EXPECT_EQ(f.cuda.copies()[5].first, std::byte{5});
  timings.clear();
  f.engine->reclaim(&timings);
  EXPECT_TRUE(timings.empty()) << "a timing is handed out once";
}

TEST(CopyEngineTest, TimingsNobodyCollectsAreBoundedAndCounted) {
  FakeEngine f;
  const std::size_t n = CopyEngine::kKeptTimings + 10;
  for (std::size_t i = 0; i < n; ++i) {
    f.engine->submit(f.slab(std::byte{1}), 16, static_cast<std::int64_t>(i));
    f.cuda.run_all();
  }
  f.engine->reclaim(nullptr);
  EXPECT_EQ(f.engine->timings_dropped(), 10u);
  std::vector<CopyTiming> timings;
  f.engine->reclaim(&timings);
  ASSERT_EQ(timings.size(), CopyEngine::kKeptTimings);
  EXPECT_EQ(timings.front().tag, 10) << "the newest are kept";
}

TEST(CopyEngineTest, ABufferIsOverwrittenOnlyAfterItsReaderIsDone) {
  FakeEngine f(/*buffers=*/2);
  void* reader = f.cuda.create_stream();  // the step's stream, held back: its reads take long
  f.cuda.hold(reader, true);
  DeviceCopy a = f.engine->submit(f.slab(std::byte{0x11}), 64, 0);
  std::byte* const a_buffer = a.data();
  a.order_before(reader);
  a.release_after(reader);
  DeviceCopy b = f.engine->submit(f.slab(std::byte{0x22}), 64, 1);
  b.release_after(nullptr);
  DeviceCopy c = f.engine->submit(f.slab(std::byte{0x33}), 64, 2);
  ASSERT_EQ(c.data(), a_buffer) << "two buffers: the third copy reuses the first's";
  f.cuda.run_all();
  EXPECT_EQ(f.cuda.copies().size(), 2u) << "the third copy waits for the reader";
  EXPECT_EQ(a_buffer[0], std::byte{0x11}) << "what the reader reads is still the first batch";
  f.cuda.hold(reader, false);
  f.cuda.run_all();
  EXPECT_EQ(f.cuda.copies().size(), 3u);
  EXPECT_EQ(a_buffer[63], std::byte{0x33});
  c.release_after(nullptr);
  f.cuda.destroy_stream(reader);
}

TEST(CopyEngineTest, ABufferReleasedAfterTwoStreamsIsOverwrittenOnlyAfterBoth) {
  FakeEngine f(/*buffers=*/2);
  void* taken_on = f.cuda.create_stream();  // a side stream, done with the batch at once
  void* read_on = f.cuda.create_stream();   // where it is read after all, held back: long reads
  f.cuda.hold(read_on, true);
  DeviceCopy a = f.engine->submit(f.slab(std::byte{0x11}), 64, 0);
  std::byte* const a_buffer = a.data();
  a.order_before(taken_on);
  f.cuda.clear_calls();
  a.release_after(taken_on, read_on);
  int records = 0;
  for (const FakeCuda::Call& call : f.cuda.calls()) records += call.name == "cudaEventRecord";
  EXPECT_EQ(records, 2) << "one release event a stream, neither stream waiting for the other";
  EXPECT_EQ(f.cuda.queued(read_on), 1u);
  DeviceCopy b = f.engine->submit(f.slab(std::byte{0x22}), 64, 1);
  f.cuda.clear_calls();
  b.release_after(nullptr, nullptr);
  records = 0;
  for (const FakeCuda::Call& call : f.cuda.calls()) records += call.name == "cudaEventRecord";
  EXPECT_EQ(records, 1) << "the same stream twice: one release";
  DeviceCopy c = f.engine->submit(f.slab(std::byte{0x33}), 64, 2);
  ASSERT_EQ(c.data(), a_buffer);
  f.cuda.run_all();
  EXPECT_EQ(f.cuda.copies().size(), 2u) << "the third copy waits for the stream still reading";
  EXPECT_EQ(a_buffer[0], std::byte{0x11});
  f.cuda.hold(read_on, false);
  f.cuda.run_all();
  EXPECT_EQ(f.cuda.copies().size(), 3u);
  EXPECT_EQ(a_buffer[63], std::byte{0x33});
  c.release_after(nullptr);
  f.cuda.run_all();
  f.cuda.destroy_stream(taken_on);
  f.cuda.destroy_stream(read_on);
}

TEST(CopyEngineTest, APageableCopyWaitsForItsBuffersReaderBeforeTheCopyCallNotInIt) {
  // From pageable memory cudaMemcpyAsync returns only once the copy stream's earlier work is done,
  // the wait for the buffer's last reader included: a caller timing submit() would book the step
  // two batches back as copy time. The engine waits for it first, on the host, by polling.
  FakeEngine f(/*buffers=*/2, 1, 0, 0, /*pinned_slabs=*/false);
  void* reader = f.cuda.create_stream();
  DeviceCopy a = f.engine->submit(f.slab(std::byte{0x11}), 64, 0);
  std::byte* const a_buffer = a.data();
  f.cuda.run_all();
  f.cuda.hold(reader, true);  // the step reading `a` takes long
  a.order_before(reader);
  a.release_after(reader);
  DeviceCopy b = f.engine->submit(f.slab(std::byte{0x22}), 64, 1);
  f.cuda.run_all();
  b.release_after(nullptr);
  f.cuda.run_all();
  EXPECT_FALSE(f.engine->can_submit_now(false)) << "the next buffer is a's, still being read";
  EXPECT_TRUE(f.engine->can_submit_now(true)) << "a pinned copy would leave the wait to the device";

  std::size_t copies_when_read = 0;
  std::byte first_when_read{};
  f.cuda.on_idle = [&](int attempt) {
    if (attempt != 3) return;  // the host has polled a while: the step ends
    copies_when_read = f.cuda.copies().size();
    first_when_read = a_buffer[0];
    f.cuda.hold(reader, false);
  };
  f.engine->wait_until_submit_ready(false);
  EXPECT_EQ(copies_when_read, 2u) << "no copy was queued while the reader ran";
  EXPECT_EQ(first_when_read, std::byte{0x11});
  EXPECT_TRUE(f.engine->can_submit_now(false));

  const int idles = f.cuda.idles();
  DeviceCopy c = f.engine->submit(f.slab(std::byte{0x33}), 64, 2);
  EXPECT_EQ(c.data(), a_buffer);
  EXPECT_EQ(f.cuda.idles(), idles) << "submit() itself waited for nothing: it is the copy alone";
  f.cuda.run_all();
  EXPECT_EQ(a_buffer[63], std::byte{0x33});
  c.release_after(nullptr);
  f.cuda.destroy_stream(reader);
}

TEST(CopyEngineTest, BatchesKeptOnTheDeviceAddBuffersUpToTheBoundThenItSaysSo) {
  FakeEngine f(/*buffers=*/2, 1, 0, /*extra_buffers=*/2);
  std::vector<DeviceCopy> kept;
  for (int i = 0; i < 4; ++i) kept.push_back(f.engine->submit(f.slab(std::byte(i + 1)), 64, i));
  EXPECT_EQ(f.engine->buffers(), 4);
  EXPECT_EQ(f.engine->device_bytes(), 4 * f.pool->slab_bytes());
  EXPECT_THROW(f.engine->submit(f.slab(std::byte{9}), 64, 4), CopyEngineExhausted);
  f.cuda.run_all();
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(kept[static_cast<std::size_t>(i)].data()[0], std::byte(i + 1)) << "copy " << i;
  kept.clear();
  f.cuda.run_all();
  EXPECT_NO_THROW(f.engine->submit(f.slab(std::byte{9}), 64, 5));
  EXPECT_EQ(f.engine->buffers(), 4) << "freed buffers are reused, not added to";
}

TEST(CopyEngineTest, ItsWaitsPollAndNoneIsAHostSync) {
  // The engine waits for copies on the training thread (a full timing pool, wait_idle,
  // shutdown). A profiler must not see those as the user's syncs.
  FakeEngine f(/*buffers=*/2);
  f.cuda.clear_calls();
  for (int i = 0; i < 8; ++i) {
    DeviceCopy copy = f.engine->submit(f.slab(std::byte{1}), 512, i);  // the device runs only
    copy.release_after(nullptr);                                       // while the host waits
  }
  f.engine->wait_idle();
  std::vector<CopyTiming> timings;
  f.engine->reclaim(&timings);
  EXPECT_EQ(timings.size(), 8u);
  EXPECT_GT(f.cuda.idles(), 0) << "the timing pool ran out, so a submit waited";
  EXPECT_EQ(f.pool->slabs_in_use(), 0);
  for (const FakeCuda::Call& call : f.cuda.calls())
    EXPECT_FALSE(is_synchronous_runtime_call(call.name)) << call.name;
}

TEST(CopyEngineTest, OnDeviceOneEverythingIsMadeAndQueuedThere) {
  FakeEngine f(/*buffers=*/3, /*devices=*/2, /*device=*/1);
  EXPECT_EQ(f.cuda.current_device(), 0);
  DeviceCopy copy = f.engine->submit(f.slab(std::byte{7}), 128, 0);
  copy.order_before(nullptr);  // device 1's legacy stream: the step's, on cuda:1
  copy.release_after(nullptr);
  EXPECT_EQ(f.cuda.current_device(), 0) << "the caller's current device is restored";
  EXPECT_EQ(f.cuda.errors(), 0) << "no event was recorded on another device's stream";
  EXPECT_EQ(f.cuda.queued(f.cuda.legacy_stream(0)), 0u);
  EXPECT_GT(f.cuda.queued(f.cuda.legacy_stream(1)), 0u);
  for (const FakeCuda::Call& call : f.cuda.calls())
    if (call.name != "cudaGetDevice" && call.name != "cudaSetDevice" &&
        call.name != "cudaGetDeviceCount") {
      EXPECT_EQ(call.device, 1) << call.name;
    }
}

TEST(CopyEngineTest, ShutdownWaitsForTheCopiesInFlightAndFreesEverything) {
  auto f = std::make_unique<FakeEngine>();
  f->engine->submit(f->slab(std::byte{1}), 256, 0);
  f->engine->submit(f->slab(std::byte{2}), 256, 1);
  EXPECT_EQ(f->cuda.copies().size(), 0u);
  f->engine.reset();
  EXPECT_EQ(f->cuda.copies().size(), 2u) << "the copies ran before their memory went away";
  EXPECT_EQ(f->pool->slabs_in_use(), 0);
  EXPECT_EQ(f->cuda.live_events(), 0);
  EXPECT_EQ(f->cuda.live_streams(), 0);
  EXPECT_EQ(f->cuda.live_allocations(), 0);
}
#if FEEDSCOPE_WITH_CUDA

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CopyEngineGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!copy_engine_available(&why)) GTEST_SKIP() << why;
  }
  // Two device buffers of `pool`'s slab size: the third copy reuses the first's.
  static CopyEngine::Options two_buffers(const PinnedPool& pool) {
    CopyEngine::Options o;
    o.buffer_bytes = pool.slab_bytes();
    o.buffers = 2;
    return o;
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
  CopyEngine engine(two_buffers(*pool));
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

// The side-stream prefetcher on a device: the batch taken on a side stream, read on the legacy
// default stream after a 50 ms stall there (a host function), then released after both. The next
// copy into its buffer must wait for the default stream's read, not only the side stream's.
TEST_F(CopyEngineGpuTest, ABufferReadOnTheDefaultStreamIsNotOverwrittenBeforeThatRead) {
  auto pool = PinnedPool::create(1 << 20, 3, make_pinned_allocator());
  CopyEngine engine(two_buffers(*pool));
  cudaStream_t side = nullptr;
  cudaEvent_t side_done = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&side_done, cudaEventDisableTiming), cudaSuccess);
  const std::size_t n = pool->slab_bytes();
  std::byte* seen = nullptr;  // pinned: the read is asynchronous, as a step's
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&seen), n), cudaSuccess);
  Slab first = pool->acquire();
  std::memset(first.data(), 0x11, n);
  DeviceCopy a = engine.submit(std::move(first), n, 0);
  std::byte* const a_buffer = a.data();
  a.order_before(side);
  ASSERT_EQ(cudaEventRecord(side_done, side), cudaSuccess);  // main.wait_stream(side)
  ASSERT_EQ(cudaStreamWaitEvent(nullptr, side_done, 0), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(nullptr, [](void*) { ::usleep(50'000); }, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(seen, a.data(), n, cudaMemcpyDeviceToHost, nullptr), cudaSuccess);
  a.release_after(side, nullptr);
  DeviceCopy b = engine.submit(pool->acquire(), 16, 1);  // the other buffer
  Slab third = pool->acquire();
  std::memset(third.data(), 0x22, n);
  DeviceCopy c = engine.submit(std::move(third), n, 2);  // a's buffer again
  ASSERT_EQ(c.data(), a_buffer);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(seen[0], std::byte{0x11});
  EXPECT_EQ(seen[n - 1], std::byte{0x11});
  cudaFreeHost(seen);
  cudaEventDestroy(side_done);
  cudaStreamDestroy(side);
}

TEST_F(CopyEngineGpuTest, StepFenceBoundsTheStepsInFlight) {
  StepFence fence(0, 2);
  for (int i = 0; i < 10; ++i) {
    fence.wait_for_previous();
    fence.mark(nullptr);
  }
  fence.wait_all();
  SUCCEED();
}

#endif  // FEEDSCOPE_WITH_CUDA

}  // namespace
}  // namespace feedscope
