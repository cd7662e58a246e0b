#include "profiler/cupti_activity_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "loader/span_recorder.h"
#include "pinned_memory/device_probe.h"

#if FEEDSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "profiler/detail/cupti_api.h"
#include "profiler/detail/cupti_records.h"
#include "profiler/gpu_trace.h"
#endif

namespace feedscope {
namespace {

TEST(CuptiActivitySourceTest, WithoutADeviceSaysWhyAndEveryCallIsSafe) {
  const DeviceProbe probe = probe_cuda();
  if (probe.available()) GTEST_SKIP() << "a CUDA device is present";
  const auto source = make_cupti_source();
  EXPECT_FALSE(source->start());
  const std::string reason = source->unavailable_reason();
  EXPECT_FALSE(reason.empty());
#if FEEDSCOPE_WITH_CUDA
  // Where CUPTI loads, the reason is the device the runtime could not find.
  if (detail::cupti().loaded)
    EXPECT_EQ(reason, "CUPTI: no CUDA device to trace: " + probe.unavailable_reason);
  else
    EXPECT_EQ(reason, "CUPTI: " + detail::cupti().reason);
#else
  EXPECT_NE(reason.find("built without CUDA"), std::string::npos) << reason;
#endif
  EXPECT_TRUE(source->collect().empty());
  source->stop();
  EXPECT_FALSE(source->start()) << "a failed source stays failed";
  source->stop();
  EXPECT_TRUE(source->collect().empty());
  EXPECT_EQ(source->unavailable_reason(), reason);
}

TEST(CuptiActivitySourceTest, AFailedSourceDoesNotBlockTheNextOne) {
  if (probe_cuda().available()) GTEST_SKIP() << "a CUDA device is present";
  const auto first = make_cupti_source();
  first->start();
  const auto second = make_cupti_source();
  second->start();
  EXPECT_EQ(second->unavailable_reason().find("another activity source"), std::string::npos)
      << second->unavailable_reason();
}

#if FEEDSCOPE_WITH_CUDA

TEST(CuptiActivitySourceTest, GpuRecordsCopiesMemsetsAndCallsOnTheNowNsClock) {
  const DeviceProbe probe = probe_cuda();
  if (!probe.available()) GTEST_SKIP() << "no CUDA device: " << probe.unavailable_reason;
  constexpr std::size_t kBytes = 8u << 20;
  void* device = nullptr;
  void* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&device, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&pinned, kBytes), cudaSuccess);
  std::vector<char> pageable(kBytes, 1);
  std::memset(pinned, 2, kBytes);

  const auto source = make_cupti_source();
  ASSERT_TRUE(source->start()) << source->unavailable_reason();
  // The timestamp callback, or the offset and why CUPTI refused the callback: both place the
  // records below, and the JUnit output says which this CUPTI took.
  RecordProperty("cupti_clock", detail::cupti_clock());
  EXPECT_FALSE(detail::cupti_clock().empty());
  const std::int64_t begin = now_ns();
  EXPECT_EQ(cudaMemcpy(device, pageable.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(device, pinned, kBytes, cudaMemcpyHostToDevice, nullptr), cudaSuccess);
  EXPECT_EQ(cudaMemset(device, 0, kBytes), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::int64_t end = now_ns();
  source->stop();
  const GpuActivity a = source->collect();
  cudaFree(device);
  cudaFreeHost(pinned);

  const auto h2d_from = [&](MemoryKind kind) {
    return std::count_if(a.memcpys.begin(), a.memcpys.end(), [&](const MemcpyRecord& m) {
      return m.kind == MemcpyKind::h2d && m.src == kind && m.bytes == kBytes;
    });
  };
  EXPECT_EQ(h2d_from(MemoryKind::pageable), 1);
  EXPECT_EQ(h2d_from(MemoryKind::pinned), 1);
  ASSERT_EQ(a.memsets.size(), 1u);
  EXPECT_EQ(a.memsets[0].bytes, kBytes);
  const auto called = [&](const char* name) {
    return std::any_of(a.runtime.begin(), a.runtime.end(),
                       [&](const RuntimeApiRecord& r) { return r.name == name; });
  };
  EXPECT_TRUE(called("cudaMemcpy"));
  EXPECT_TRUE(called("cudaDeviceSynchronize"));
  // The source says which calls CUPTI recorded; the JUnit output says which mode this CUPTI took.
  ASSERT_TRUE(a.tracing);
  RecordProperty("cupti_tracing", describe_tracing(*a.tracing));
  EXPECT_NE(a.tracing->runtime_calls, TracingMode::Calls::none);
  // The host's wait is the runtime's cudaDeviceSynchronize record; no SYNCHRONIZATION kind by
  // default (cupti_records.h's tracing_request).
  EXPECT_FALSE(a.tracing->sync_records);
  EXPECT_TRUE(a.syncs.empty());
  // Converted to now_ns(): inside the window measured around the calls, give or take the
  // clock-offset sampling error.
  constexpr std::int64_t kSlack = 1'000'000;
  for (const MemcpyRecord& m : a.memcpys) {
    EXPECT_GE(m.start_ns, begin - kSlack);
    EXPECT_LE(m.end_ns, end + kSlack);
    EXPECT_LE(m.start_ns, m.end_ns);
  }
}

TEST(CuptiActivitySourceTest, GpuOnlyOneSourceRecordsAtATime) {
  const DeviceProbe probe = probe_cuda();
  if (!probe.available()) GTEST_SKIP() << "no CUDA device: " << probe.unavailable_reason;
  const auto first = make_cupti_source();
  ASSERT_TRUE(first->start()) << first->unavailable_reason();
  const auto second = make_cupti_source();
  EXPECT_FALSE(second->start());
  EXPECT_NE(second->unavailable_reason().find("another activity source"), std::string::npos);
  first->stop();
}

#endif

}  // namespace
}  // namespace feedscope
