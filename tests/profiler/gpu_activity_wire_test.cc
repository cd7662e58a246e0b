#include "profiler/gpu_activity_wire.h"
#include "profiler/watched_gpu.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "loader/detail/crc32c.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

// One record of every kind, every enum value somewhere, names a parser could trip on.
GpuActivity every_kind() {
  GpuActivity a;
  a.kernels.push_back({"void gemm<float, \"tile\\128\">(\x01\n)", 100, 200, 1, 7, 11});
  a.kernels.push_back({"", -5, 0, 0, 0, 0});
  a.kernels.push_back({"void gemm<float, \"tile\\128\">(\x01\n)", 300, 400, 1, 7, 12, 4294967295u});
  a.kernels.push_back({std::string("nul\0inside", 10) + "\xff\xfe ünïcödé", 500, 600, 2, 3, 13, 5});
  a.memcpys.push_back({MemcpyKind::h2d, MemoryKind::pinned, 1 << 20, 10, 20, 0, 13, 10,
                       MemoryKind::device});
  a.memcpys.push_back({MemcpyKind::d2h, MemoryKind::device, 4, 30, 40, 1, 14, 14,
                       MemoryKind::pageable});
  a.memcpys.push_back({MemcpyKind::d2d, MemoryKind::device, ~0ull, 50, 60, 2, 15, 15,
                       MemoryKind::device});
  a.memcpys.push_back({MemcpyKind::other, MemoryKind::other, 0, 70, 80, 3, 16, 16,
                       MemoryKind::other});
  a.memsets.push_back({4096, 5, 6, 0, 7, 9});
  for (SyncType t : {SyncType::event, SyncType::stream, SyncType::context,
                     SyncType::stream_wait_event, SyncType::other})
    a.syncs.push_back({t, 1000 + static_cast<int>(t), 2000, 4, 17});
  a.runtime.push_back({"cudaLaunchKernel", 90, 95, 1234, 11});
  a.runtime.push_back({"cudaStreamSynchronize", 96, 99, 4294967295u, 4294967295u});
  a.runtime.push_back({"cuLaunchKernel", 97, 98, 1234, 12, ApiDomain::driver});
  a.dropped = 3;
  a.not_kept = 7;
  a.kept_until_ns = 12345;
  a.bad_timestamps = 5;
  a.incomplete_buffers = 2;
  return a;
}

void expect_same(const GpuActivity& a, const GpuActivity& b) {
  ASSERT_EQ(a.kernels.size(), b.kernels.size());
  for (std::size_t i = 0; i < a.kernels.size(); ++i) {
    EXPECT_EQ(a.kernels[i].name, b.kernels[i].name) << i;
    EXPECT_EQ(a.kernels[i].start_ns, b.kernels[i].start_ns) << i;
    EXPECT_EQ(a.kernels[i].end_ns, b.kernels[i].end_ns) << i;
    EXPECT_EQ(a.kernels[i].device, b.kernels[i].device) << i;
    EXPECT_EQ(a.kernels[i].stream, b.kernels[i].stream) << i;
    EXPECT_EQ(a.kernels[i].correlation_id, b.kernels[i].correlation_id) << i;
    EXPECT_EQ(a.kernels[i].graph_id, b.kernels[i].graph_id) << i;
  }
  ASSERT_EQ(a.memcpys.size(), b.memcpys.size());
  for (std::size_t i = 0; i < a.memcpys.size(); ++i) {
    const MemcpyRecord &x = a.memcpys[i], &y = b.memcpys[i];
    EXPECT_EQ(x.kind, y.kind) << i;
    EXPECT_EQ(x.src, y.src) << i;
    EXPECT_EQ(x.dst, y.dst) << i;
    EXPECT_EQ(x.bytes, y.bytes) << i;
    EXPECT_EQ(x.start_ns, y.start_ns) << i;
    EXPECT_EQ(x.end_ns, y.end_ns) << i;
    EXPECT_EQ(x.device, y.device) << i;
    EXPECT_EQ(x.stream, y.stream) << i;
    EXPECT_EQ(x.correlation_id, y.correlation_id) << i;
  }
  ASSERT_EQ(a.memsets.size(), b.memsets.size());
  for (std::size_t i = 0; i < a.memsets.size(); ++i) {
    const MemsetRecord &x = a.memsets[i], &y = b.memsets[i];
    EXPECT_EQ(x.bytes, y.bytes);
    EXPECT_EQ(x.start_ns, y.start_ns);
    EXPECT_EQ(x.end_ns, y.end_ns);
    EXPECT_EQ(x.device, y.device);
    EXPECT_EQ(x.stream, y.stream);
    EXPECT_EQ(x.correlation_id, y.correlation_id);
  }
  ASSERT_EQ(a.syncs.size(), b.syncs.size());
  for (std::size_t i = 0; i < a.syncs.size(); ++i) {
    const SyncRecord &x = a.syncs[i], &y = b.syncs[i];
    EXPECT_EQ(x.type, y.type) << i;
    EXPECT_EQ(x.start_ns, y.start_ns) << i;
    EXPECT_EQ(x.end_ns, y.end_ns) << i;
    EXPECT_EQ(x.stream, y.stream) << i;
    EXPECT_EQ(x.correlation_id, y.correlation_id) << i;
  }
  ASSERT_EQ(a.runtime.size(), b.runtime.size());
  for (std::size_t i = 0; i < a.runtime.size(); ++i) {
    const RuntimeApiRecord &x = a.runtime[i], &y = b.runtime[i];
    EXPECT_EQ(x.name, y.name) << i;
    EXPECT_EQ(x.start_ns, y.start_ns) << i;
    EXPECT_EQ(x.end_ns, y.end_ns) << i;
    EXPECT_EQ(x.thread_id, y.thread_id) << i;
    EXPECT_EQ(x.correlation_id, y.correlation_id) << i;
    EXPECT_EQ(x.domain, y.domain) << i;
  }
  EXPECT_EQ(a.dropped, b.dropped);
  EXPECT_EQ(a.not_kept, b.not_kept);
  EXPECT_EQ(a.kept_until_ns, b.kept_until_ns);
  EXPECT_EQ(a.bad_timestamps, b.bad_timestamps);
  EXPECT_EQ(a.incomplete_buffers, b.incomplete_buffers);
}

// `frame` with its checksum recomputed, as a writer of its (edited) bytes would have written it.
std::string with_checksum(std::string frame) {
  std::uint32_t crc = detail::crc32c(frame.data(), 12);
  crc = detail::crc32c(frame.data() + 16, frame.size() - 16, crc);
  for (int i = 0; i < 4; ++i) frame[12 + i] = static_cast<char>(crc >> (8 * i));
  return frame;
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(GpuActivityWireTest, EveryRecordKindRoundTrips) {
  feedscope::testing::TempDir dir;
  const GpuActivity a = every_kind();
  write_file(dir / "f", encode_gpu_activity(a));
  const GpuActivityStream s = read_gpu_activity(dir / "f");
  EXPECT_EQ(s.error, "");
  EXPECT_FALSE(s.torn_tail);
  EXPECT_TRUE(s.statuses.empty());
  EXPECT_EQ(s.offset, std::filesystem::file_size(dir / "f"));
  expect_same(a, s.activity);
}

TEST(GpuActivityWireTest, AnEmptyActivityRoundTripsAndAddsNothing) {
  feedscope::testing::TempDir dir;
  write_file(dir / "f", encode_gpu_activity({}) + encode_gpu_status(""));
  const GpuActivityStream s = read_gpu_activity(dir / "f");
  EXPECT_EQ(s.error, "");
  EXPECT_TRUE(s.activity.empty());
  EXPECT_EQ(s.activity.dropped, 0u);
  EXPECT_EQ(s.activity.kept_until_ns, GpuActivity{}.kept_until_ns);
  EXPECT_EQ(s.statuses, std::vector<std::string>{""});
}

TEST(GpuActivityWireTest, StatusesAndBatchesReadInFileOrder) {
  feedscope::testing::TempDir dir;
  GpuActivity first = every_kind(), second = every_kind();
  second.kernels.resize(1);
  second.kernels[0].name = "second";
  write_file(dir / "f", encode_gpu_status("recording") + encode_gpu_activity(first) +
                            encode_gpu_activity(second) +
                            encode_gpu_status("interrupted: another CUPTI client"));
  const GpuActivityStream s = read_gpu_activity(dir / "f");
  EXPECT_EQ(s.error, "");
  EXPECT_EQ(s.statuses,
            (std::vector<std::string>{"recording", "interrupted: another CUPTI client"}));
  GpuActivity expected = every_kind();
  expected.append(std::move(second));
  expect_same(expected, s.activity);
}

TEST(GpuActivityWireTest, ALargeBatchRoundTripsAndRepeatedNamesAreStoredOnce) {
  feedscope::testing::TempDir dir;
  GpuActivity a;
  const std::string name(300, 'k');
  for (int i = 0; i < 200'000; ++i) {
    a.kernels.push_back({name + std::to_string(i % 50), i, i + 1, 0, 7, static_cast<std::uint32_t>(i)});
    a.runtime.push_back({"cudaLaunchKernel", i, i + 1, 1, static_cast<std::uint32_t>(i)});
  }
  const std::string bytes = encode_gpu_activity(a);
  EXPECT_LT(bytes.size(), 200'000u * 80) << "names are not repeated per record";
  write_file(dir / "f", bytes);
  const GpuActivityStream s = read_gpu_activity(dir / "f");
  EXPECT_EQ(s.error, "");
  expect_same(a, s.activity);
}

TEST(GpuActivityWireTest, ATornTailAtEveryByteReadsTheWholeFramesAndResumes) {
  feedscope::testing::TempDir dir;
  const std::string status = encode_gpu_status("recording");
  GpuActivity small;
  small.kernels.push_back({"k", 1, 2, 0, 0, 1});
  small.memcpys.push_back({MemcpyKind::h2d, MemoryKind::pageable, 8, 3, 4, 0, 0, 2,
                           MemoryKind::device});
  const std::string batch = encode_gpu_activity(small);
  const std::string whole = status + batch;
  for (std::size_t cut = 0; cut <= whole.size(); ++cut) {
    write_file(dir / "f", whole.substr(0, cut));
    const GpuActivityStream s = read_gpu_activity(dir / "f");
    SCOPED_TRACE("cut at " + std::to_string(cut));
    EXPECT_EQ(s.error, "");
    const bool at_boundary = cut == 0 || cut == status.size() || cut == whole.size();
    EXPECT_EQ(s.torn_tail, !at_boundary);
    const std::size_t expected_offset =
        cut == whole.size() ? whole.size() : cut >= status.size() ? status.size() : 0;
    EXPECT_EQ(s.offset, expected_offset);
    EXPECT_EQ(s.statuses.size(), cut >= status.size() ? 1u : 0u);
    EXPECT_EQ(s.activity.records(), cut == whole.size() ? 2u : 0u);
    // The rest arrives; reading on from the offset finds exactly what was missing.
    write_file(dir / "f", whole);
    const GpuActivityStream rest = read_gpu_activity(dir / "f", s.offset);
    EXPECT_EQ(rest.error, "");
    EXPECT_FALSE(rest.torn_tail);
    EXPECT_EQ(rest.offset, whole.size());
    EXPECT_EQ(s.statuses.size() + rest.statuses.size(), 1u);
    EXPECT_EQ(s.activity.records() + rest.activity.records(), 2u);
  }
}

TEST(GpuActivityWireTest, ACorruptChecksumIsReportedWithFileAndOffsetAndEarlierFramesKept) {
  feedscope::testing::TempDir dir;
  const std::string status = encode_gpu_status("recording");
  std::string batch = encode_gpu_activity(every_kind());
  batch[batch.size() / 2] ^= 0x10;
  write_file(dir / "f", status + batch + encode_gpu_status("after"));
  const GpuActivityStream s = read_gpu_activity(dir / "f");
  EXPECT_EQ(s.error, (dir / "f").string() + ": checksum mismatch at byte " +
                         std::to_string(status.size()));
  EXPECT_EQ(s.statuses, std::vector<std::string>{"recording"});
  EXPECT_TRUE(s.activity.empty());
  EXPECT_EQ(s.offset, status.size());
  EXPECT_FALSE(s.torn_tail);
}

TEST(GpuActivityWireTest, BadMagicAndAnUnknownVersionAreReportedNotThrown) {
  feedscope::testing::TempDir dir;
  write_file(dir / "f", "garbage that is not a frame at all");
  EXPECT_EQ(read_gpu_activity(dir / "f").error,
            (dir / "f").string() + ": not a feedscope GPU activity frame (bad magic) at byte 0");
  std::string frame = encode_gpu_status("x");
  frame[4] = 9;
  write_file(dir / "f", frame);
  EXPECT_EQ(read_gpu_activity(dir / "f").error,
            (dir / "f").string() + ": frame version 9, this feedscope reads versions 2 to 4 (the "
                                   "file was written by a newer libfeedscope_inject.so) at byte 0");
  frame[4] = 1;
  write_file(dir / "f", frame);
  EXPECT_NE(read_gpu_activity(dir / "f").error.find("frame version 1, this feedscope reads "
                                                    "versions 2 to 4 (the file was written by an "
                                                    "older libfeedscope_inject.so)"),
            std::string::npos);
  const GpuActivityStream missing = read_gpu_activity(dir / "absent");
  EXPECT_NE(missing.error.find("cannot be opened"), std::string::npos) << missing.error;
}

// Version 3 added the kernel's graph id and the call's API; the tracing frame says how CUPTI traced.
TEST(GpuActivityWireTest, GraphIdsDriverCallsAndTheTracingModeRoundTrip) {
  feedscope::testing::TempDir dir;
  GpuActivity a;
  a.kernels.push_back({"triton_poi_fused_add_0", 10, 20, 0, 7, 50, 3});
  a.runtime.push_back({"cuGraphLaunch", 1, 2, 99, 50, ApiDomain::driver});
  a.runtime.push_back({"cudaLaunchKernel", 3, 4, 99, 51, ApiDomain::runtime});
  TracingMode t;
  t.runtime_calls = TracingMode::Calls::all;
  t.runtime_callbacks = 0;
  t.driver_calls = TracingMode::Calls::selected;
  t.driver_callbacks = 8;
  t.completed_syncs_only = true;
  t.note = "every runtime call traced: cuptiActivityEnableRuntimeApi is not in this CUPTI";
  write_file(dir / "f", encode_gpu_status("recording") + encode_gpu_tracing(t) +
                            encode_gpu_activity(a));
  const GpuActivityStream s = read_gpu_activity(dir / "f");
  EXPECT_EQ(s.error, "");
  expect_same(a, s.activity);
  ASSERT_TRUE(s.activity.tracing);
  EXPECT_EQ(*s.activity.tracing, t);
  EXPECT_EQ(s.activity.kernels[0].graph_id, 3u);
  EXPECT_EQ(s.activity.runtime[0].domain, ApiDomain::driver);

  // A file without a tracing frame (a feedscope of version 2) leaves it unsaid.
  write_file(dir / "g", encode_gpu_activity(a));
  EXPECT_FALSE(read_gpu_activity(dir / "g").activity.tracing);
}

// Version 4: a sampled trace's schedule, its windows and the host records left out between them.
TEST(GpuActivityWireTest, ASampledTracesWindowsAndScheduleRoundTrip) {
  feedscope::testing::TempDir dir;
  TracingMode t;
  t.sampling = TraceSampling{1'000'000'000, 10'000'000'000, 5'000'000'000};
  GpuActivity first, second;
  first.kernels.push_back({"k", 10, 20, 0, 7, 50});
  first.traced_windows = {{0, 100}};
  second.traced_windows = {{100, 150}, {1000, 1100}};
  second.outside_windows = 42;
  write_file(dir / "gpu-7.fsgpu", encode_gpu_tracing(t) + encode_gpu_activity(first) +
                                      encode_gpu_activity(second));
  const GpuActivityStream s = read_gpu_activity(dir / "gpu-7.fsgpu");
  EXPECT_EQ(s.error, "");
  ASSERT_TRUE(s.activity.tracing);
  EXPECT_EQ(s.activity.tracing->sampling, t.sampling);
  EXPECT_TRUE(s.activity.sampled());
  EXPECT_EQ(s.activity.traced_windows, (std::vector<TimeWindow>{{0, 150}, {1000, 1100}}));
  EXPECT_EQ(s.activity.outside_windows, 42u);

  // A second process that began later: read where both traced, each over its own life.
  GpuActivity late;
  late.traced_windows = {{120, 400}, {1000, 1100}, {2000, 2100}};
  write_file(dir / "gpu-9.fsgpu", encode_gpu_tracing(t) + encode_gpu_activity(late));
  EXPECT_EQ(read_watch_gpu_dir(dir.path()).activity.traced_windows,
            (std::vector<TimeWindow>{{0, 150}, {1000, 1100}, {2000, 2100}}));

  // A window that ends before it begins is a corrupt frame.
  GpuActivity bad;
  bad.traced_windows = {{5, 4}};
  write_file(dir / "bad", encode_gpu_activity(bad));
  EXPECT_NE(read_gpu_activity(dir / "bad").error.find("records frame that does not parse"),
            std::string::npos);
}

TEST(GpuActivityWireTest, ATracingFrameThatDoesNotParseIsReported) {
  feedscope::testing::TempDir dir;
  std::string frame = encode_gpu_tracing(TracingMode{});
  frame[16] = 9;  // runtime_calls: no such value
  write_file(dir / "f", with_checksum(frame));
  EXPECT_EQ(read_gpu_activity(dir / "f").error,
            (dir / "f").string() + ": tracing frame that does not parse at byte 0");
}

// A version-2 file (no graph ids, every call the runtime's) still reads: version 3 changed only
// the kernel and runtime records, so a batch without them is the same bytes under either version,
// less version 4's tail (the records left out between windows, u64, and the windows, u32 count).
TEST(GpuActivityWireTest, AVersion2FrameStillReads) {
  feedscope::testing::TempDir dir;
  GpuActivity a;
  a.memcpys.push_back({MemcpyKind::h2d, MemoryKind::pinned, 64, 1, 2, 0, 7, 9, MemoryKind::device});
  std::string frame = encode_gpu_activity(a);
  frame.resize(frame.size() - 12);
  const std::uint32_t length = static_cast<std::uint32_t>(frame.size() - 16);
  for (int i = 0; i < 4; ++i) frame[8 + i] = static_cast<char>(length >> (8 * i));
  frame[4] = 2;
  write_file(dir / "f", with_checksum(frame));
  const GpuActivityStream s = read_gpu_activity(dir / "f");
  EXPECT_EQ(s.error, "");
  ASSERT_EQ(s.activity.memcpys.size(), 1u);
  EXPECT_EQ(s.activity.memcpys[0].bytes, 64u);
}

TEST(GpuActivityWireTest, IncrementalReadsFromTheOffsetSeeEachFrameOnce) {
  feedscope::testing::TempDir dir;
  const auto path = dir / "f";
  std::ofstream out(path, std::ios::binary);
  std::uint64_t offset = 0;
  std::size_t kernels = 0;
  for (int round = 0; round < 5; ++round) {
    GpuActivity a;
    for (int i = 0; i <= round; ++i) a.kernels.push_back({"k" + std::to_string(i), i, i + 1, 0, 0, 0});
    out << encode_gpu_activity(a) << std::flush;
    const GpuActivityStream s = read_gpu_activity(path, offset);
    EXPECT_EQ(s.error, "");
    EXPECT_EQ(s.activity.kernels.size(), static_cast<std::size_t>(round + 1));
    kernels += s.activity.kernels.size();
    offset = s.offset;
  }
  EXPECT_EQ(kernels, 15u);
  EXPECT_EQ(offset, std::filesystem::file_size(path));
  EXPECT_TRUE(read_gpu_activity(path, offset).activity.empty());
}

TEST(GpuActivityWireTest, AWatchDirMergesEveryProcessAndKeepsStatusesByPid) {
  feedscope::testing::TempDir dir;
  GpuActivity a;
  a.kernels.push_back({"parent", 1, 2, 0, 0, 1});
  a.dropped = 1;
  GpuActivity b;
  b.kernels.push_back({"child", 3, 4, 0, 0, 1});
  b.dropped = 2;
  write_file(gpu_activity_file(dir.path(), 100), encode_gpu_status("recording") +
                                                     encode_gpu_activity(a));
  write_file(gpu_activity_file(dir.path(), 42), encode_gpu_status("recording") +
                                                    encode_gpu_activity(b) +
                                                    encode_gpu_status("interrupted: x"));
  write_file(gpu_activity_file(dir.path(), 7), encode_gpu_status("unavailable: no CUPTI"));
  std::string corrupt = encode_gpu_status("recording");
  corrupt[20] ^= 1;
  write_file(gpu_activity_file(dir.path(), 9), corrupt);
  write_file(dir / "gpu-x.fsgpu", "ignored");
  write_file(dir / "spans.json", "ignored");
  EXPECT_EQ(gpu_activity_file(dir.path(), 100).filename(), "gpu-100.fsgpu");

  const WatchedGpu w = read_watch_gpu_dir(dir.path());
  ASSERT_EQ(w.activity.kernels.size(), 2u);
  EXPECT_EQ(w.activity.kernels[0].name, "child") << "files are read in pid order";
  EXPECT_EQ(w.activity.kernels[1].name, "parent");
  EXPECT_EQ(w.activity.dropped, 3u);
  EXPECT_EQ(w.statuses_by_pid.size(), 4u);
  EXPECT_EQ(w.statuses_by_pid.at(42), (std::vector<std::string>{"recording", "interrupted: x"}));
  EXPECT_EQ(w.statuses_by_pid.at(7), std::vector<std::string>{"unavailable: no CUPTI"});
  EXPECT_TRUE(w.statuses_by_pid.at(9).empty());
  ASSERT_EQ(w.errors.size(), 1u);
  EXPECT_NE(w.errors[0].find("gpu-9.fsgpu: checksum mismatch at byte 0"), std::string::npos);

  EXPECT_TRUE(read_watch_gpu_dir(dir / "absent").errors.empty());
}

}  // namespace
}  // namespace feedscope

namespace feedscope {
namespace {

// A rank of an NCCL job: its own kernels' busy share and the share its all-reduce kernels took,
// over its own span of CUDA work.
TEST(ProcessGpuTest, BusyAndNcclSharesAreOverTheProcesssOwnSpan) {
  GpuActivity a;
  a.kernels.push_back(KernelRecord{"volta_sgemm_128x64_nn", 1000, 4000, 1, 7, 1});
  a.kernels.push_back(KernelRecord{"ncclDevKernel_AllReduce_Sum_f32_RING_LL", 4000, 9000, 1, 9, 2});
  a.kernels.push_back(KernelRecord{"elementwise_kernel", 9000, 10000, 1, 7, 3});
  a.kernels.push_back(KernelRecord{"elementwise_kernel", 10500, 11000, 1, 7, 4});  // 500 ns idle before
  const ProcessGpu g = summarize_process_gpu(a);
  EXPECT_EQ(g.device, 1u);
  EXPECT_EQ(g.kernels, 4);
  EXPECT_NEAR(g.busy_ratio, 9500.0 / 10000, 1e-9);
  EXPECT_NEAR(g.collective_ratio, 5000.0 / 10000, 1e-9);
  EXPECT_EQ(summarize_process_gpu(GpuActivity{}).kernels, 0);
}

}  // namespace
}  // namespace feedscope
