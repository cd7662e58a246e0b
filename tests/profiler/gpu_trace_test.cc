#include "profiler/gpu_trace.h"

#include <gtest/gtest.h>

namespace feedscope {
namespace {

constexpr std::int64_t us = 1000;
constexpr std::int64_t ms = 1000 * us;

KernelRecord kernel(std::int64_t start, std::int64_t end, std::uint32_t stream = 7) {
  KernelRecord k;
  k.name = "k";
  k.start_ns = start;
  k.end_ns = end;
  k.stream = stream;
  return k;
}

MemcpyRecord copy(MemcpyKind kind, MemoryKind src, std::uint64_t bytes, std::int64_t start,
                  std::int64_t end) {
  MemcpyRecord m;
  m.kind = kind;
  m.src = src;
  m.bytes = bytes;
  m.start_ns = start;
  m.end_ns = end;
  return m;
}

RuntimeApiRecord api(const char* name, std::int64_t start, std::int64_t end,
                     std::uint32_t correlation) {
  RuntimeApiRecord r;
  r.name = name;
  r.start_ns = start;
  r.end_ns = end;
  r.correlation_id = correlation;
  return r;
}

TEST(ActivityTraceTest, EmptyActivityGivesZerosNotNaN) {
  const GpuTraceSummary s = summarize_gpu_trace({}, {{0, 10 * ms}, {20 * ms, 30 * ms}});
  EXPECT_EQ(s.steps, 2);
  EXPECT_DOUBLE_EQ(s.step_wall_s, 0.020);
  EXPECT_EQ(s.kernels, 0);
  EXPECT_EQ(s.mean_kernel_us, 0);
  EXPECT_EQ(s.gpu_busy_ratio, 0);
  EXPECT_EQ(s.launch_gaps, 0);
  EXPECT_EQ(s.syncs_per_step, 0);
  EXPECT_FALSE(s.h2d_pinned_gbps);
  EXPECT_FALSE(s.h2d_pageable_gbps);
}

TEST(ActivityTraceTest, RecordsLeftOutByTheSourceAreCountedAndSaidOnlyWhenThereAreSome) {
  GpuActivity a;
  a.kernels.push_back(kernel(0, 5 * us));
  GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}});
  EXPECT_EQ(s.records_bad_timestamps, 0u);
  EXPECT_EQ(s.buffers_incomplete, 0u);
  EXPECT_TRUE(gpu_trace_losses(s).empty());
  a.dropped = 1;
  a.bad_timestamps = 4;
  a.incomplete_buffers = 2;
  s = summarize_gpu_trace(a, {{0, 10 * ms}});
  EXPECT_EQ(s.records_bad_timestamps, 4u);
  EXPECT_EQ(s.buffers_incomplete, 2u);
  const std::vector<std::string> losses = gpu_trace_losses(s);
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_EQ(losses[0].rfind("1 GPU activity records were dropped", 0), 0u) << losses[0];
  EXPECT_EQ(losses[1].rfind("4 GPU activity records were left out for timestamps of 0", 0), 0u)
      << losses[1];
  EXPECT_EQ(losses[2].rfind("2 CUPTI buffers ended at an incomplete record", 0), 0u) << losses[2];
  EXPECT_NE(losses[2].find("a forced flush"), std::string::npos) << "which flush cut them: " << losses[2];
}

TEST(ActivityTraceTest, NoStepsGivesNoRatios) {
  GpuActivity a;
  a.kernels.push_back(kernel(0, 5 * us));
  a.dropped = 3;
  const GpuTraceSummary s = summarize_gpu_trace(a, {});
  EXPECT_EQ(s.steps, 0);
  EXPECT_EQ(s.kernels, 0);
  EXPECT_EQ(s.dropped, 3u);
}

TEST(ActivityTraceTest, OverlappingKernelsOnTwoStreamsCountOnce) {
  GpuActivity a;
  // Stream 1 busy [1, 5) ms, stream 2 busy [3, 7) ms: union [1, 7) = 6 ms, not 8.
  a.kernels.push_back(kernel(1 * ms, 5 * ms, 1));
  a.kernels.push_back(kernel(3 * ms, 7 * ms, 2));
  // A memcpy inside the union adds nothing; one after a gap adds its length.
  a.memcpys.push_back(copy(MemcpyKind::h2d, MemoryKind::pinned, 100, 4 * ms, 6 * ms));
  a.memcpys.push_back(copy(MemcpyKind::h2d, MemoryKind::pinned, 100, 8 * ms, 9 * ms));
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}});
  EXPECT_NEAR(s.gpu_busy_s, 0.007, 1e-12);
  EXPECT_NEAR(s.gpu_busy_ratio, 0.7, 1e-12);
  EXPECT_EQ(s.kernels, 2);
  EXPECT_NEAR(s.mean_kernel_us, 4000, 1e-9);
  // The H2D share is the union of the two copies: 3 ms of 10.
  EXPECT_NEAR(s.h2d_share, 0.3, 1e-12);
}

TEST(ActivityTraceTest, GapsAreIdleTimeBetweenActivityWithinAStep) {
  GpuActivity a;
  // Step 1: kernels at [0,1) [3,4) [4,5) ms -> one gap of 2 ms (3-4 and 4-5 touch).
  a.kernels.push_back(kernel(0, 1 * ms));
  a.kernels.push_back(kernel(3 * ms, 4 * ms));
  a.kernels.push_back(kernel(4 * ms, 5 * ms));
  // Step 2 starts at 10 ms: the idle time between the steps is no launch gap.
  a.kernels.push_back(kernel(12 * ms, 13 * ms));
  a.kernels.push_back(kernel(17 * ms, 18 * ms));
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}, {10 * ms, 20 * ms}});
  EXPECT_EQ(s.launch_gaps, 2);
  EXPECT_NEAR(s.mean_gap_us, 3000, 1e-9);
  EXPECT_NEAR(s.gap_share, 6.0 / 20.0, 1e-12);
  EXPECT_NEAR(s.kernels_per_step, 2.5, 1e-12);
}

TEST(ActivityTraceTest, ActivityOutsideTheStepsIsLeftOutAndStraddlersAreClipped) {
  GpuActivity a;
  a.kernels.push_back(kernel(-5 * ms, -4 * ms));       // before: warm-up
  a.kernels.push_back(kernel(-1 * ms, 2 * ms));        // straddles the step's begin
  a.kernels.push_back(kernel(9 * ms, 12 * ms));        // straddles the step's end
  a.kernels.push_back(kernel(11 * ms, 12 * ms, 3));    // between steps
  a.kernels.push_back(kernel(100 * ms, 200 * ms));     // after the run
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}, {20 * ms, 30 * ms}});
  // Inside: [0,2) and [9,10): 3 ms of a 20 ms step wall.
  EXPECT_NEAR(s.gpu_busy_ratio, 3.0 / 20.0, 1e-12);
  // Only kernels that start inside a step count: the one at 9 ms.
  EXPECT_EQ(s.kernels, 1);
  EXPECT_NEAR(s.mean_kernel_us, 3000, 1e-9);
  EXPECT_EQ(s.launch_gaps, 1);
}

TEST(ActivityTraceTest, WindowsInAnyOrderGiveTheSameAnswer) {
  GpuActivity a;
  a.kernels.push_back(kernel(1 * ms, 2 * ms));
  a.kernels.push_back(kernel(21 * ms, 23 * ms));
  const GpuTraceSummary s1 = summarize_gpu_trace(a, {{0, 10 * ms}, {20 * ms, 30 * ms}});
  const GpuTraceSummary s2 = summarize_gpu_trace(a, {{20 * ms, 30 * ms}, {0, 10 * ms}});
  EXPECT_EQ(s1.kernels, 2);
  EXPECT_EQ(s2.kernels, 2);
  EXPECT_DOUBLE_EQ(s1.gpu_busy_ratio, s2.gpu_busy_ratio);
  EXPECT_NEAR(s1.gpu_busy_ratio, 3.0 / 20.0, 1e-12);
}

TEST(ActivityTraceTest, H2dBytesSplitByPinnedAndPageableWithTheirBandwidth) {
  GpuActivity a;
  // 1 GB pinned in 50 ms = 20 GB/s; 300 MB pageable in 100 ms = 3 GB/s.
  a.memcpys.push_back(copy(MemcpyKind::h2d, MemoryKind::pinned, 500'000'000, 0, 25 * ms));
  a.memcpys.push_back(copy(MemcpyKind::h2d, MemoryKind::pinned, 500'000'000, 30 * ms, 55 * ms));
  a.memcpys.push_back(copy(MemcpyKind::h2d, MemoryKind::pageable, 300'000'000, 60 * ms, 160 * ms));
  a.memcpys.push_back(copy(MemcpyKind::d2h, MemoryKind::device, 4096, 170 * ms, 171 * ms));
  a.memcpys.push_back(copy(MemcpyKind::d2d, MemoryKind::device, 1 << 20, 172 * ms, 173 * ms));
  // After the last step: not part of the run's copies.
  a.memcpys.push_back(copy(MemcpyKind::h2d, MemoryKind::pinned, 999, 500 * ms, 501 * ms));
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 100 * ms}, {100 * ms, 200 * ms}});
  EXPECT_EQ(s.h2d_pinned_bytes, 1'000'000'000u);
  EXPECT_EQ(s.h2d_pageable_bytes, 300'000'000u);
  EXPECT_EQ(s.d2h_bytes, 4096u);
  ASSERT_TRUE(s.h2d_pinned_gbps);
  ASSERT_TRUE(s.h2d_pageable_gbps);
  EXPECT_NEAR(*s.h2d_pinned_gbps, 20.0, 1e-9);
  EXPECT_NEAR(*s.h2d_pageable_gbps, 3.0, 1e-9);
  EXPECT_NEAR(s.h2d_pageable_s_per_step, 0.050, 1e-12);
}

TEST(ActivityTraceTest, SyncCallAndItsSyncRecordCountOnce) {
  GpuActivity a;
  a.runtime.push_back(api("cudaStreamSynchronize", 1 * ms, 3 * ms, 42));
  SyncRecord same;
  same.type = SyncType::stream;
  same.start_ns = 1 * ms;
  same.end_ns = 3 * ms;
  same.correlation_id = 42;
  a.syncs.push_back(same);
  // A device-side wait does not block the host.
  SyncRecord wait_event = same;
  wait_event.type = SyncType::stream_wait_event;
  wait_event.correlation_id = 43;
  a.syncs.push_back(wait_event);
  // Synchronous copy (per-thread default stream variant) counts; its Async form does not.
  a.runtime.push_back(api("cudaMemcpy_ptds", 4 * ms, 5 * ms, 44));
  a.runtime.push_back(api("cudaMemcpyAsync", 6 * ms, 6 * ms + 5 * us, 45));
  a.runtime.push_back(api("cudaLaunchKernel", 7 * ms, 7 * ms + 4 * us, 46));
  a.runtime.push_back(api("cudaLaunchKernel", 8 * ms, 8 * ms + 6 * us, 47));
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}});
  EXPECT_EQ(s.syncs, 2);
  EXPECT_NEAR(s.sync_wait_s, 0.003, 1e-12);
  EXPECT_EQ(s.launch_calls, 2);
  EXPECT_NEAR(s.mean_launch_call_us, 5.0, 1e-9);
  EXPECT_EQ(s.syncs_by_call, (std::map<std::string, std::int64_t>{{"cudaMemcpy", 1},
                                                                 {"cudaStreamSynchronize", 1}}));
}

KernelRecord launched(std::int64_t start, std::int64_t end, std::uint32_t correlation,
                      std::uint32_t graph = 0) {
  KernelRecord k = kernel(start, end);
  k.correlation_id = correlation;
  k.graph_id = graph;
  return k;
}

// CUDA 13's `<<<>>>` is __cudaLaunchKernel; Triton's launches under torch.compile are the driver's
// cuLaunchKernel; a CUDA graph's replay is one cuGraphLaunch for all its kernels.
TEST(ActivityTraceTest, LaunchesCountCuda13sCompiledLaunchDriverLaunchesAndGraphReplaysOnce) {
  GpuActivity a;
  a.runtime.push_back(api("__cudaLaunchKernel", 1 * ms, 1 * ms + 4 * us, 1));
  a.kernels.push_back(launched(1 * ms + 10 * us, 1 * ms + 20 * us, 1));
  a.runtime.push_back(api("__cudaLaunchKernel_ptsz", 2 * ms, 2 * ms + 4 * us, 2));
  a.kernels.push_back(launched(2 * ms + 10 * us, 2 * ms + 20 * us, 2));
  RuntimeApiRecord triton = api("cuLaunchKernel", 3 * ms, 3 * ms + 6 * us, 3);
  triton.domain = ApiDomain::driver;
  a.runtime.push_back(triton);
  a.kernels.push_back(launched(3 * ms + 10 * us, 3 * ms + 20 * us, 3));
  RuntimeApiRecord replay = api("cuGraphLaunch", 4 * ms, 4 * ms + 10 * us, 4);
  replay.domain = ApiDomain::driver;
  a.runtime.push_back(replay);
  for (int i = 0; i < 5; ++i)
    a.kernels.push_back(launched(4 * ms + (20 + 10 * i) * us, 4 * ms + (25 + 10 * i) * us, 4, 9));
  // cudaGetDevice is no launch.
  a.runtime.push_back(api("cudaGetDevice", 5 * ms, 5 * ms + 1 * us, 5));
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}});
  EXPECT_EQ(s.launch_calls, 4);
  EXPECT_EQ(s.driver_launch_calls, 1) << "cuLaunchKernel; a graph replay is counted in graphs";
  EXPECT_EQ(s.launches_without_call, 0);
  EXPECT_NEAR(s.mean_launch_call_us, 6.0, 1e-9);
  EXPECT_EQ(s.kernels, 8);
}

// A kernel whose launch the trace did not record (a launch API it did not select, a CUPTI that
// traced no driver calls) still cost a launch: counted from the kernel, and not timed.
TEST(ActivityTraceTest, AKernelWithoutALaunchCallCountsAsALaunch) {
  GpuActivity a;
  a.runtime.push_back(api("cudaLaunchKernel", 1 * ms, 1 * ms + 5 * us, 1));
  a.kernels.push_back(launched(1 * ms + 10 * us, 1 * ms + 20 * us, 1));
  a.kernels.push_back(launched(2 * ms, 2 * ms + 10 * us, 77));  // cuLaunchKernel, not traced
  a.kernels.push_back(launched(3 * ms, 3 * ms + 10 * us, 0));   // no correlation at all
  // Launched in the step before (outside the windows), run in this one: its launch is counted
  // there, not twice.
  a.runtime.push_back(api("cudaLaunchKernel", 10 * ms + 500 * us, 10 * ms + 505 * us, 2));
  a.kernels.push_back(launched(20 * ms + 10 * us, 20 * ms + 20 * us, 2));
  // A sync's call id is not a launch's: the kernel still counts.
  a.runtime.push_back(api("cudaStreamSynchronize", 4 * ms, 5 * ms, 3));
  a.kernels.push_back(launched(4 * ms + 10 * us, 4 * ms + 20 * us, 3));
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}, {20 * ms, 30 * ms}});
  EXPECT_EQ(s.launch_calls, 1 + 3);
  EXPECT_EQ(s.launches_without_call, 3);
  EXPECT_EQ(s.driver_launch_calls, 0);
  EXPECT_NEAR(s.mean_launch_call_us, 5.0, 1e-9) << "the mean is the timed calls'";
}

TEST(ActivityTraceTest, TheTracingModeReachesTheSummaryAndReadsInWords) {
  GpuActivity a;
  EXPECT_FALSE(summarize_gpu_trace(a, {{0, 10 * ms}}).tracing);
  TracingMode t;
  t.runtime_calls = TracingMode::Calls::selected;
  t.runtime_callbacks = 41;
  t.driver_calls = TracingMode::Calls::selected;
  t.driver_callbacks = 8;
  t.completed_syncs_only = true;
  a.tracing = t;
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}});
  ASSERT_TRUE(s.tracing);
  EXPECT_EQ(*s.tracing, t);
  EXPECT_EQ(describe_tracing(t), "runtime calls: the 41 the summary reads; driver launches: 8 "
                                 "calls; sync records: completed queries only");
  TracingMode fallback;
  fallback.note = "every runtime call traced: cuptiActivityEnableRuntimeApi is not in this CUPTI";
  EXPECT_EQ(describe_tracing(fallback),
            "runtime calls: all; driver launches: not traced; sync records: every query (every "
            "runtime call traced: cuptiActivityEnableRuntimeApi is not in this CUPTI)");
}

TEST(ActivityTraceTest, SyncsAreNamedByTheCallThatMadeThemOrByTheirKind) {
  GpuActivity a;
  // torch's .item(): an async copy to pageable memory, which CUPTI records as a stream sync.
  a.runtime.push_back(api("cudaMemcpyAsync", 1 * ms, 2 * ms, 7));
  a.syncs.push_back({SyncType::stream, 1 * ms, 2 * ms, 0, 7});
  // One made through the driver API: no runtime call of the trace has its correlation id.
  a.syncs.push_back({SyncType::event, 3 * ms, 4 * ms, 0, 99});
  a.syncs.push_back({SyncType::event, 3 * ms, 4 * ms, 0, 99});
  // A query that found its event done: CUPTI records it as a sync, but the host never waited.
  a.runtime.push_back(api("cudaEventQuery", 5 * ms, 5 * ms + 2 * us, 8));
  a.syncs.push_back({SyncType::event, 5 * ms, 5 * ms + 1 * us, 0, 8});
  // .item() in C++: cudaMemcpyAsync into a pageable scalar blocks until the step's kernels are
  // done (2 ms here), and CUPTI makes no sync record of it.
  a.runtime.push_back(api("cudaMemcpyAsync", 6 * ms, 8 * ms, 9));
  MemcpyRecord d2h = copy(MemcpyKind::d2h, MemoryKind::device, 4, 8 * ms - 2 * us, 8 * ms);
  d2h.dst = MemoryKind::pageable;
  d2h.correlation_id = 9;
  a.memcpys.push_back(d2h);
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}});
  EXPECT_EQ(s.syncs, 4);
  EXPECT_EQ(s.syncs_by_call, (std::map<std::string, std::int64_t>{{"cudaMemcpyAsync", 1},
                                                                 {"cudaMemcpyAsync to pageable memory", 1},
                                                                 {"event synchronize", 2}}));
  EXPECT_NEAR(s.sync_wait_s, 0.001 + 0.002 + 0.002, 1e-12);
  // Followed by the stream sync .item() makes next, the copy is the same sync: its wait counts,
  // the sync once.
  a.runtime.push_back(api("cudaStreamSynchronize", 8 * ms + 5 * us, 8 * ms + 9 * us, 10));
  const GpuTraceSummary item = summarize_gpu_trace(a, {{0, 10 * ms}});
  EXPECT_EQ(item.syncs, 4);
  EXPECT_EQ(item.syncs_by_call.count("cudaMemcpyAsync to pageable memory"), 0u);
  EXPECT_EQ(item.syncs_by_call.at("cudaStreamSynchronize"), 1);
  EXPECT_NEAR(item.sync_wait_s, 0.005 + 4e-6, 1e-12);
}

// torch's .to(device) without non_blocking: cudaMemcpyAsync, then cudaStreamSynchronize on the
// same thread, waiting for the work queued before it.
TEST(ActivityTraceTest, ASyncRightAfterAnInputCopyOnTheSameThreadIsCountedApart) {
  GpuActivity a;
  RuntimeApiRecord to_device = api("cudaMemcpyAsync", 1 * ms, 1 * ms + 200 * us, 20);
  to_device.thread_id = 1;
  a.runtime.push_back(to_device);
  MemcpyRecord h2d = copy(MemcpyKind::h2d, MemoryKind::pageable, 1 << 20, 1 * ms, 1 * ms + 150 * us);
  h2d.correlation_id = 20;
  a.memcpys.push_back(h2d);
  RuntimeApiRecord wait = api("cudaStreamSynchronize", 1 * ms + 250 * us, 3 * ms, 21);
  wait.thread_id = 1;
  a.runtime.push_back(wait);
  // Another thread's sync at the same moment, and this thread's own long after: not the copy's.
  RuntimeApiRecord other_thread = api("cudaStreamSynchronize", 1 * ms + 300 * us, 2 * ms, 22);
  other_thread.thread_id = 2;
  a.runtime.push_back(other_thread);
  RuntimeApiRecord later = api("cudaStreamSynchronize", 6 * ms, 7 * ms, 23);
  later.thread_id = 1;
  a.runtime.push_back(later);
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}});
  EXPECT_EQ(s.syncs, 3);
  EXPECT_EQ(s.syncs_after_h2d, 1);
  EXPECT_NEAR(s.sync_after_h2d_wait_s, 0.00175, 1e-12);
  EXPECT_EQ(s.syncs_by_call.at("cudaStreamSynchronize"), 3) << "still counted among the syncs";
}

TEST(ActivityTraceTest, KernelsFromCudaGraphsAndDriverLaunchesAreCounted) {
  GpuActivity a;
  const auto graph_kernel = [&](std::int64_t start, std::uint32_t graph, std::uint32_t launch) {
    KernelRecord k = kernel(start, start + 100 * us);
    k.graph_id = graph;
    k.correlation_id = launch;
    a.kernels.push_back(k);
  };
  graph_kernel(1 * ms, 5, 100);  // graph 5, replayed by launch 100: two kernels
  graph_kernel(2 * ms, 5, 100);
  graph_kernel(3 * ms, 5, 101);  // and again
  graph_kernel(4 * ms, 6, 102);
  a.kernels.push_back(kernel(5 * ms, 6 * ms));  // launched on its own
  RuntimeApiRecord triton = api("cuLaunchKernel", 7 * ms, 7 * ms + 3 * us, 103);
  triton.domain = ApiDomain::driver;
  a.runtime.push_back(triton);
  a.runtime.push_back(api("cuMemAlloc", 8 * ms, 8 * ms + 3 * us, 104));
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}});
  EXPECT_EQ(s.kernels, 5);
  EXPECT_EQ(s.graph_kernels, 4);
  EXPECT_EQ(s.graphs, 2);
  EXPECT_EQ(s.graph_replays, 3);
  EXPECT_EQ(s.driver_launch_calls, 1);
}

TEST(ActivityTraceTest, CollectivesAreSplitFromTheDevicesOwnWork) {
  GpuActivity a;
  KernelRecord all_reduce = kernel(0, 6 * ms);
  all_reduce.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  a.kernels.push_back(all_reduce);
  a.kernels.push_back(kernel(5 * ms, 8 * ms, 8));
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}});
  EXPECT_NEAR(s.gpu_busy_ratio, 0.8, 1e-12);
  EXPECT_NEAR(s.collective_s, 0.006, 1e-12);
  EXPECT_NEAR(s.collective_share, 0.6, 1e-12);
  EXPECT_NEAR(s.collective_alone_share, 0.5, 1e-12) << "0-5 ms: NCCL with nothing beside it";
  EXPECT_TRUE(is_collective_kernel("ncclKernel_AllReduce_RING_LL_Sum_float"));
  EXPECT_FALSE(is_collective_kernel("volta_sgemm_128x64_nn"));
  EXPECT_EQ(summarize_gpu_trace(GpuActivity{}, {{0, 10 * ms}}).collective_s, 0);
}

TEST(ActivityTraceTest, SeveralDevicesAreEachSummarized) {
  GpuActivity a;
  a.kernels.push_back(kernel(0, 9 * ms));
  KernelRecord other = kernel(0, 1 * ms);
  other.device = 1;
  a.kernels.push_back(other);
  MemcpyRecord to_other = copy(MemcpyKind::h2d, MemoryKind::pinned, 1 << 20, 2 * ms, 3 * ms);
  to_other.device = 1;
  a.memcpys.push_back(to_other);
  const GpuTraceSummary s = summarize_gpu_trace(a, {{0, 10 * ms}});
  EXPECT_NEAR(s.gpu_busy_ratio, 0.9, 1e-12) << "busy while any device is";
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0].device, 0u);
  EXPECT_NEAR(s.devices[0].busy_ratio, 0.9, 1e-12);
  EXPECT_EQ(s.devices[1].device, 1u);
  EXPECT_EQ(s.devices[1].kernels, 1);
  EXPECT_NEAR(s.devices[1].busy_ratio, 0.2, 1e-12);
  a.kernels.pop_back();
  a.memcpys.clear();
  EXPECT_TRUE(summarize_gpu_trace(a, {{0, 10 * ms}}).devices.empty()) << "one device: no list";
}

TEST(ActivityTraceTest, RuntimeCallNames) {
  EXPECT_TRUE(is_synchronous_runtime_call("cudaDeviceSynchronize"));
  EXPECT_TRUE(is_synchronous_runtime_call("cudaEventSynchronize"));
  EXPECT_TRUE(is_synchronous_runtime_call("cudaMemcpy"));
  EXPECT_FALSE(is_synchronous_runtime_call("cudaMemcpyAsync"));
  EXPECT_FALSE(is_synchronous_runtime_call("cudaStreamWaitEvent"));
  EXPECT_TRUE(is_launch_runtime_call("cudaLaunchKernel_ptsz"));
  EXPECT_FALSE(is_launch_runtime_call("cudaMalloc"));
}

}  // namespace
}  // namespace feedscope

namespace feedscope {
namespace {

constexpr std::int64_t s_ = 1000 * ms;

TEST(KernelActiveWindowsTest, FromTheFirstKernelToTheLastLessLongSilences) {
  GpuActivity a;
  // Start-up: context, modules, the model moved in; no kernel yet.
  a.runtime.push_back(api("cudaGetDeviceCount", 0, 1 * ms, 1));
  a.memcpys.push_back(copy(MemcpyKind::h2d, MemoryKind::pageable, 1 << 20, 1 * s_, 2 * s_));
  // Training from 6 s to 20 s, a step of launches every 100 ms, silent in between (the loop waits
  // for data: these short silences stay in).
  std::uint32_t id = 10;
  for (std::int64_t t = 6 * s_; t < 20 * s_; t += 100 * ms) {
    if (t >= 12 * s_ && t < 15 * s_) continue;  // a checkpoint written by the CPU: 3 s of nothing
    a.runtime.push_back(api("cudaLaunchKernel", t, t + 10 * us, id++));
    a.kernels.push_back(kernel(t + 20 * us, t + 50 * ms));
  }
  // Teardown after the last kernel.
  a.runtime.push_back(api("cudaFree", 21 * s_, 21 * s_ + 1 * ms, 2));
  const ActiveWindows w = kernel_active_windows(a);
  ASSERT_EQ(w.windows.size(), 2u);
  EXPECT_EQ(w.windows[0].begin_ns, 6 * s_ + 20 * us);
  EXPECT_EQ(w.windows[0].end_ns, 11 * s_ + 900 * ms + 50 * ms);  // the last kernel before the pause
  EXPECT_EQ(w.windows[1].begin_ns, 15 * s_);                      // the first launch after it
  EXPECT_EQ(w.windows[1].end_ns, 19 * s_ + 900 * ms + 50 * ms);
  ASSERT_EQ(w.idle.size(), 1u);
  EXPECT_EQ(w.idle[0].begin_ns, w.windows[0].end_ns);
  EXPECT_EQ(w.before_ns, 6 * s_ + 20 * us);
  EXPECT_EQ(w.after_ns, 21 * s_ + 1 * ms - w.windows[1].end_ns);
  // Over those windows the GPU is busy half the time, as the loop is; over the program's whole
  // CUDA lifetime it would read a third of that.
  const GpuTraceSummary s = summarize_gpu_trace(a, w.windows);
  EXPECT_NEAR(s.gpu_busy_ratio, 0.5, 0.01);
}

TEST(KernelActiveWindowsTest, ASilenceShortOrSmallAgainstTheRunStaysIn) {
  GpuActivity a;
  std::uint32_t id = 1;
  // 100 s of steps with one 2.5 s stall in the middle: long, but under a tenth of the run.
  for (std::int64_t t = 0; t < 100 * s_; t += 100 * ms) {
    if (t >= 50 * s_ && t < 52500 * ms) continue;
    a.runtime.push_back(api("cudaLaunchKernel", t, t + 10 * us, id++));
    a.kernels.push_back(kernel(t + 20 * us, t + 50 * ms));
  }
  const ActiveWindows w = kernel_active_windows(a);
  EXPECT_EQ(w.windows.size(), 1u);
  EXPECT_TRUE(w.idle.empty());
  EXPECT_TRUE(kernel_active_windows(GpuActivity{}).windows.empty());
}

}  // namespace
}  // namespace feedscope
