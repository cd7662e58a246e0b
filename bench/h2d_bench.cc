// Host-to-device copies on a GPU machine, each pair measured side by side in one run:
//  1. feedscope's copy engine (pinned_memory/copy_engine.h) against a bare cudaMemcpyAsync of the
//     same bytes from the same host memory, pinned and pageable, 1 MiB to 1 GiB. The goal
//     (docs/benchmarks.md) is the engine's pinned copy at 90 % of the bare one or better.
//  2. The loader's copy overlapped with the step: the BatchLoader and DeviceFeeder deliver batches
//     one ahead as in `feedscope run`, and a step of known length (bench/spin_kernel.cu) reads each.
//     The copy is hidden when the device never idles between steps: events right before and after
//     each step's kernel give the device's gap from one step's end to the next one's start (the
//     bubble), and the hidden share is 1 - bubble / copy. The timed steps lie in one epoch (the
//     next one prefetched, as `run` sets it), so no epoch restart is booked on the copy; a second
//     row keeps the bench's earlier loop (epochs of 16 batches, no prefetch_next_epoch) beside it.
//     Each row also gives the host's time inside next(). "Copy alone" is the copy itself: the
//     engine's event timing of batches copied from slabs filled beforehand, without the loader.
// Section 1 times the copy itself on both sides with CUDA events on the stream that copies (the
// engine's own CopyTiming, events around its cudaMemcpyAsync; the bare side's around its own), so
// the ratio is copy against copy; the host clock from submission to done on both sides is kept
// beside it (the engine's includes the wake-up of its polling wait). Medians over repeats that
// alternate the two sides. Exits 77 where no CUDA device is present.
//
// usage: h2d_bench [--max-mib N (1024)] [--overlap-mib N (64)] [--workers N]
//                  [--epoch-batches N (45: the warm-up and the timed steps)] [--overlap-only]
//                  [--json FILE]
// --overlap-only: section 2 alone (the device check's one call, which has no time for the sweep).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/spin_kernel.h"
#include "loader/batch_loader.h"
#include "loader/device_feeder.h"
#include "loader/index_sampler.h"
#include "loader/synthetic_dataset.h"
#include "pinned_memory/copy_engine.h"
#include "pinned_memory/errors.h"
#include "pinned_memory/host_allocator.h"
#include "pinned_memory/pinned_pool.h"
#include "pinned_memory/step_fence.h"

namespace {

using namespace feedscope;
using Clock = std::chrono::steady_clock;
constexpr std::size_t kMiB = std::size_t{1} << 20;

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw DeviceError(std::string(call) + " failed: " + cudaGetErrorName(status) + " (" +
                      cudaGetErrorString(status) + ")");
}
#define CHECK(call) check((call), #call)

double seconds_since(Clock::time_point begin) {
  return std::chrono::duration<double>(Clock::now() - begin).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Never zeros (METHOD: they hide unwritten outputs): a different word at every offset.
void fill_pattern(std::byte* data, std::size_t bytes) {
  auto* words = reinterpret_cast<std::uint64_t*>(data);
  for (std::size_t i = 0; i < bytes / 8; ++i) words[i] = (i + 1) * 0x9E3779B97F4A7C15ull;
}

// The first and last 64 KiB on the device equal the host's.
void verify(const void* device, const std::byte* host, std::size_t bytes, const char* what) {
  const std::size_t n = std::min(bytes / 2, 64 * std::size_t{1024});
  std::vector<std::byte> back(n);
  for (const std::size_t offset : {std::size_t{0}, bytes - n}) {
    CHECK(cudaMemcpy(back.data(), static_cast<const std::byte*>(device) + offset, n,
                     cudaMemcpyDeviceToHost));
    if (std::memcmp(back.data(), host + offset, n) != 0)
      throw std::runtime_error(std::string(what) + ": the bytes on the device differ from the "
                               "host's at offset " + std::to_string(offset));
  }
}

// The overlap loops (section 2).
constexpr int kBatch = 32;
constexpr int kWarmup = 5;
constexpr int kSteps = 40;
// The comparison's epochs: the bench's earlier loop, which restarted 2-3 times in its timed steps.
constexpr int kShortEpoch = 16;

struct Options {
  std::size_t max_bytes = 1024 * kMiB;
  std::size_t overlap_bytes = 64 * kMiB;
  int workers = 0;  // 0: min(8, cores - 2)
  // The overlap loop's epoch: by default the warm-up and the timed steps, so none restarts in it.
  int epoch_batches = kWarmup + kSteps;
  bool overlap_only = false;  // section 2 alone
  std::string json_path;
};

// --- 1. The engine against a bare cudaMemcpyAsync --------------------------------------------------

// One memory kind at one size: the same slab is the source of both sides. GB/s from event times
// (the copy) and from the host clock (submission to done, what a caller waiting on it sees).
struct Pair {
  double bare_gbps = 0;
  double engine_gbps = 0;
  double bare_host_gbps = 0;
  double engine_host_gbps = 0;
};

Pair measure_pair(std::unique_ptr<HostAllocator> allocator, std::size_t bytes, void* device_dst,
                  cudaStream_t stream, int repeats, const char* what) {
  auto pool = PinnedPool::create(bytes, 1, std::move(allocator));
  CopyEngine engine({.device = 0, .buffer_bytes = bytes, .buffers = 2});
  std::byte* host = nullptr;
  {
    Slab slab = pool->acquire();
    host = slab.data();
    fill_pattern(host, bytes);
  }
  cudaEvent_t begin_event = nullptr, end_event = nullptr;
  CHECK(cudaEventCreate(&begin_event));
  CHECK(cudaEventCreate(&end_event));
  struct Times {
    double copy_s = 0;  // events
    double host_s = 0;  // submission to done
  };
  const auto bare = [&] {
    const Clock::time_point begin = Clock::now();
    CHECK(cudaEventRecord(begin_event, stream));
    CHECK(cudaMemcpyAsync(device_dst, host, bytes, cudaMemcpyHostToDevice, stream));
    CHECK(cudaEventRecord(end_event, stream));
    CHECK(cudaStreamSynchronize(stream));
    const double host_s = seconds_since(begin);
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, begin_event, end_event));
    return Times{ms / 1e3, host_s};
  };
  std::int64_t tag = 0;
  std::vector<CopyTiming> timings;
  const auto through_engine = [&](bool check_bytes) {
    Slab slab = pool->acquire();  // the loader hands the engine a collated slab: not timed
    const Clock::time_point begin = Clock::now();
    DeviceCopy copy = engine.submit(std::move(slab), bytes, tag++);
    engine.wait_idle();
    const double host_s = seconds_since(begin);
    if (check_bytes) verify(copy.data(), host, bytes, what);
    timings.clear();
    engine.reclaim(&timings);  // the slab goes back to the pool, with the copy's event timing
    copy.release_after(nullptr);
    if (timings.size() != 1) throw std::runtime_error("the copy engine timed no copy");
    return Times{static_cast<double>(timings[0].end_ns - timings[0].begin_ns) / 1e9, host_s};
  };
  bare();
  through_engine(true);
  verify(device_dst, host, bytes, what);
  std::vector<double> bare_s, engine_s, bare_host_s, engine_host_s;
  const auto keep = [](const Times& t, std::vector<double>& copy, std::vector<double>& host_side) {
    copy.push_back(t.copy_s);
    host_side.push_back(t.host_s);
  };
  for (int r = 0; r < repeats; ++r) {
    if (r % 2 == 0) {
      keep(bare(), bare_s, bare_host_s);
      keep(through_engine(false), engine_s, engine_host_s);
    } else {
      keep(through_engine(false), engine_s, engine_host_s);
      keep(bare(), bare_s, bare_host_s);
    }
  }
  CHECK(cudaEventDestroy(begin_event));
  CHECK(cudaEventDestroy(end_event));
  const double b = static_cast<double>(bytes);
  return {b / median(bare_s) / 1e9, b / median(engine_s) / 1e9, b / median(bare_host_s) / 1e9,
          b / median(engine_host_s) / 1e9};
}

nlohmann::json measure_h2d(const Options& o) {
  std::printf("\nH2D: feedscope's copy engine against a bare cudaMemcpyAsync of the same bytes from\n"
              "the same host memory (GB/s; the copy timed with events on its stream on both sides;\n"
              "medians of alternating repeats)\n\n");
  std::printf("%9s %7s | %12s %12s %6s | %13s %12s %6s | %15s\n", "size", "repeats",
              "bare pinned", "feedscope", "ratio", "bare pageable", "feedscope", "ratio",
              "pinned/pageable");
  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t bytes = kMiB; bytes <= o.max_bytes; bytes *= 4) {
    void* dst = nullptr;
    CHECK(cudaMalloc(&dst, bytes));
    // About 4 GiB a side at small sizes, at least 5 repeats at 1 GiB.
    const int repeats = static_cast<int>(std::clamp<std::size_t>(4096 * kMiB / bytes, 5, 41));
    const Pair pinned = measure_pair(make_pinned_allocator(), bytes, dst, stream, repeats, "pinned");
    const Pair pageable =
        measure_pair(make_page_allocator(), bytes, dst, stream, repeats, "pageable");
    CHECK(cudaFree(dst));
    std::printf("%5zu MiB %7d | %12.2f %12.2f %6.3f | %13.2f %12.2f %6.3f | %15.2f\n",
                bytes / kMiB, repeats, pinned.bare_gbps, pinned.engine_gbps,
                pinned.engine_gbps / pinned.bare_gbps, pageable.bare_gbps, pageable.engine_gbps,
                pageable.engine_gbps / pageable.bare_gbps, pinned.engine_gbps / pageable.engine_gbps);
    std::fflush(stdout);
    rows.push_back({{"bytes", bytes},
                    {"repeats", repeats},
                    {"timing", "events"},
                    {"bare_pinned_gbps", pinned.bare_gbps},
                    {"engine_pinned_gbps", pinned.engine_gbps},
                    {"bare_pageable_gbps", pageable.bare_gbps},
                    {"engine_pageable_gbps", pageable.engine_gbps},
                    {"host_clock", {{"bare_pinned_gbps", pinned.bare_host_gbps},
                                    {"engine_pinned_gbps", pinned.engine_host_gbps},
                                    {"bare_pageable_gbps", pageable.bare_host_gbps},
                                    {"engine_pageable_gbps", pageable.engine_host_gbps}}}});
  }
  CHECK(cudaStreamDestroy(stream));
  return rows;
}

// --- 2. The loader's copy overlapped with the step ---------------------------------------------------


// Cycles of the SM clock per millisecond, from timing long spins with events.
double spin_cycles_per_ms(std::uint32_t* sink) {
  constexpr std::int64_t kCycles = 20'000'000;
  cudaEvent_t begin = nullptr, end = nullptr;
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&end));
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    CHECK(cudaEventRecord(begin, nullptr));
    CHECK(bench::launch_spin(nullptr, kCycles, sink, nullptr));
    CHECK(cudaEventRecord(end, nullptr));
    CHECK(cudaEventSynchronize(end));
    float elapsed = 0;
    CHECK(cudaEventElapsedTime(&elapsed, begin, end));
    if (i > 0) ms.push_back(elapsed);  // the first launch loads the module
  }
  CHECK(cudaEventDestroy(begin));
  CHECK(cudaEventDestroy(end));
  return static_cast<double>(kCycles) / median(ms);
}

// A loader and the epoch it is in: several step loops take turns on one loader.
struct Rig {
  std::unique_ptr<BatchLoader> loader;
  std::uint64_t epoch = 0;
};

// Epochs of `epoch_batches` batches. `prefetch_next_epoch` as `feedscope run` sets it: the workers
// start the next epoch while the last batches of this one are consumed.
Rig make_loader(std::size_t sample_floats, int workers, bool pinned, int epoch_batches,
                bool prefetch_next_epoch) {
  SyntheticDataset::Options d;
  d.shape = {static_cast<std::int64_t>(sample_floats)};
  d.count = static_cast<std::size_t>(kBatch) * static_cast<std::size_t>(epoch_batches);
  auto dataset = std::make_shared<SyntheticDataset>(d);
  LoaderOptions lo;
  lo.num_workers = workers;
  lo.batch_size = kBatch;
  lo.prefetch = 2;
  lo.pin_memory = pinned;
  lo.prefetch_next_epoch = prefetch_next_epoch;
  return {std::make_unique<BatchLoader>(dataset, std::make_shared<SequentialSampler>(d.count), lo)};
}

// Milliseconds per call of `step` over kSteps calls after kWarmup, the device idle at both ends;
// `drain` runs before the last synchronize, for work the device has not been handed yet.
template <typename Step, typename Drain>
double ms_per_call(Step&& step, Drain&& drain) {
  Clock::time_point begin;
  for (int i = 0; i < kWarmup + kSteps; ++i) {
    if (i == kWarmup) {
      CHECK(cudaDeviceSynchronize());
      begin = Clock::now();
    }
    step();
  }
  drain();
  CHECK(cudaDeviceSynchronize());
  return seconds_since(begin) * 1e3 / kSteps;
}

// The next batch, starting another epoch where this one has ended; counts the restarts.
DeviceBatch next_batch(DeviceFeeder& feeder, Rig& rig, int* restarts) {
  std::optional<DeviceBatch> batch = feeder.next();
  if (!batch) {
    feeder.begin_epoch(++rig.epoch);
    batch = feeder.next();
    if (restarts != nullptr) ++*restarts;
  }
  if (!batch) throw std::runtime_error("an epoch of the bench's loader delivered no batch");
  return std::move(*batch);
}

// Milliseconds per batch with no step: the loader alone (`engine` null) or the loader and the copy.
// Starts on a fresh epoch, as the step loops do.
double ms_per_batch(Rig& rig, CopyEngine* engine) {
  DeviceFeeder feeder(*rig.loader, engine);
  feeder.begin_epoch(++rig.epoch);
  return ms_per_call([&] { next_batch(feeder, rig, nullptr).release_after(nullptr); },
                     [&] {
                       if (engine != nullptr) engine->wait_idle();
                     });
}

double ms_per_step_alone(std::int64_t cycles, std::uint32_t* sink) {
  StepFence fence(0, 2);
  return ms_per_call(
      [&] {
        fence.wait_for_previous();
        CHECK(bench::launch_spin(nullptr, cycles, sink, nullptr));
        fence.mark(nullptr);
      },
      [] {});
}

// Milliseconds per copy of one `bytes` batch through `engine`, from slabs filled once up front, so
// that nothing of the loader (reading, collating, its queues) is in it: the median of the engine's
// own timing of each copy (CopyTiming: events around the cudaMemcpyAsync on the copy stream), the
// stream kept busy with copies back to back. Also how many copies were timed.
std::pair<double, std::size_t> ms_per_copy(CopyEngine& engine, std::size_t bytes) {
  constexpr int kSlabs = 4;  // one more than the engine's buffers: the stream never waits on us
  auto pool = PinnedPool::create(bytes, kSlabs, make_pinned_allocator());
  {
    std::vector<Slab> all;
    for (int i = 0; i < kSlabs; ++i) {
      all.push_back(pool->acquire());
      fill_pattern(all.back().data(), bytes);
    }
  }
  std::vector<CopyTiming> timings;
  for (int i = 0; i < kWarmup + kSteps; ++i) {
    Slab slab = pool->try_acquire();
    while (!slab) {  // every slab is still being copied from: take back the finished ones
      engine.reclaim(&timings);
      std::this_thread::yield();
      slab = pool->try_acquire();
    }
    DeviceCopy copy = engine.submit(std::move(slab), bytes, i);
    copy.release_after(nullptr);  // no step reads it: the buffer is free again at once
  }
  engine.wait_idle();
  engine.reclaim(&timings);
  std::vector<double> ms;
  for (const CopyTiming& t : timings)
    if (t.tag >= kWarmup) ms.push_back(static_cast<double>(t.end_ns - t.begin_ns) / 1e6);
  if (ms.empty()) throw std::runtime_error("the copy engine reported no copy timing");
  return {median(ms), ms.size()};
}

// One step loop with the copy running ahead, seen from both sides. The device's: events on the
// step's stream right before and after each timed step's kernel; the gap from one step's end to the
// next one's start is the device idle between them (a copy not done yet, a batch the host had not
// queued). The host's: wall time per step, and its time inside next() (and begin_epoch() at a
// restart), where a loader that falls behind blocks it.
struct OverlapRun {
  int epoch_batches = 0;
  bool prefetch_next_epoch = false;
  int restarts = 0;          // epochs begun inside the timed steps
  double wall_ms = 0;        // per step, host clock
  double device_ms = 0;      // per step: first timed kernel's start to last one's end, events
  double bubble_ms = 0;      // mean device gap between consecutive steps
  double bubble_max_ms = 0;  // the longest one
  double next_ms = 0;        // per step: the host inside next()
  double hidden = 0;         // 1 - bubble / copy, within [0, 1]
};

OverlapRun run_overlap(Rig& rig, CopyEngine& engine, std::int64_t cycles, std::uint32_t* sink,
                       double copy_ms) {
  OverlapRun r;
  r.epoch_batches = static_cast<int>(rig.loader->batches_per_epoch());
  r.prefetch_next_epoch = rig.loader->options().prefetch_next_epoch;
  DeviceFeeder feeder(*rig.loader, &engine);
  feeder.begin_epoch(++rig.epoch);  // each loop starts on a fresh epoch: restarts are its own
  StepFence fence(0, 2);
  std::vector<cudaEvent_t> begins(kSteps, nullptr), ends(kSteps, nullptr);
  for (int t = 0; t < kSteps; ++t) {
    CHECK(cudaEventCreate(&begins[static_cast<std::size_t>(t)]));
    CHECK(cudaEventCreate(&ends[static_cast<std::size_t>(t)]));
  }
  double next_s = 0;
  Clock::time_point begin;
  for (int i = 0; i < kWarmup + kSteps; ++i) {
    const int t = i - kWarmup;  // the timed step's number, negative in the warm-up
    if (t == 0) {
      CHECK(cudaDeviceSynchronize());
      begin = Clock::now();
    }
    const Clock::time_point next_begin = Clock::now();
    DeviceBatch batch = next_batch(feeder, rig, t >= 0 ? &r.restarts : nullptr);
    if (t >= 0) next_s += seconds_since(next_begin);
    fence.wait_for_previous();
    batch.order_before(nullptr);
    if (t >= 0) CHECK(cudaEventRecord(begins[static_cast<std::size_t>(t)], nullptr));
    CHECK(bench::launch_spin(batch.data, cycles, sink, nullptr));
    if (t >= 0) CHECK(cudaEventRecord(ends[static_cast<std::size_t>(t)], nullptr));
    fence.mark(nullptr);
    batch.release_after(nullptr);
  }
  engine.wait_idle();
  CHECK(cudaDeviceSynchronize());
  r.wall_ms = seconds_since(begin) * 1e3 / kSteps;
  r.next_ms = next_s * 1e3 / kSteps;
  const auto elapsed = [](cudaEvent_t from, cudaEvent_t to) {
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, from, to));
    return static_cast<double>(ms);
  };
  r.device_ms = elapsed(begins.front(), ends.back()) / kSteps;
  double gaps = 0;
  for (std::size_t t = 1; t < begins.size(); ++t) {
    const double gap = std::max(0.0, elapsed(ends[t - 1], begins[t]));
    gaps += gap;
    r.bubble_max_ms = std::max(r.bubble_max_ms, gap);
  }
  r.bubble_ms = gaps / (kSteps - 1);
  r.hidden = std::clamp(1.0 - r.bubble_ms / copy_ms, 0.0, 1.0);
  for (std::size_t t = 0; t < begins.size(); ++t) {
    CHECK(cudaEventDestroy(begins[t]));
    CHECK(cudaEventDestroy(ends[t]));
  }
  return r;
}

nlohmann::json overlap_json(const OverlapRun& r) {
  return {{"epoch_batches", r.epoch_batches}, {"prefetch_next_epoch", r.prefetch_next_epoch},
          {"restarts", r.restarts},           {"wall_ms", r.wall_ms},
          {"device_ms", r.device_ms},         {"bubble_ms", r.bubble_ms},
          {"bubble_max_ms", r.bubble_max_ms}, {"next_ms", r.next_ms},
          {"hidden_fraction", r.hidden}};
}

void print_overlap_row(const OverlapRun& r, const char* what) {
  std::printf("  %-34s %8d %8.3f %8.3f %8.3f %8.3f %8.3f %7.0f %%\n", what, r.restarts, r.wall_ms,
              r.device_ms, r.bubble_ms, r.bubble_max_ms, r.next_ms, 100 * r.hidden);
}

nlohmann::json measure_overlap(const Options& o) {
  const int workers =
      o.workers > 0 ? o.workers
                    : std::clamp(static_cast<int>(std::thread::hardware_concurrency()) - 2, 1, 8);
  const std::size_t sample_floats = o.overlap_bytes / kBatch / sizeof(float);
  std::uint32_t* sink = nullptr;
  CHECK(cudaMalloc(reinterpret_cast<void**>(&sink), sizeof(std::uint32_t)));
  const double cycles_per_ms = spin_cycles_per_ms(sink);

  double loader_ms = 0;
  {
    Rig cpu = make_loader(sample_floats, workers, false, o.epoch_batches, true);
    loader_ms = ms_per_batch(cpu, nullptr);
  }
  std::size_t batch_bytes = sample_floats * sizeof(float) * kBatch;
  double copy_ms = 0, loader_copy_ms = 0, step_ms = 0;
  std::size_t copies_timed = 0;
  OverlapRun main, short_epochs;
  {
    Rig rig = make_loader(sample_floats, workers, true, o.epoch_batches, true);
    CopyEngine engine({.device = 0, .buffer_bytes = rig.loader->pool().slab_bytes(), .buffers = 3});
    std::tie(copy_ms, copies_timed) = ms_per_copy(engine, batch_bytes);
    // The loader's batches through the engine, no step: the loader's rate or the copy's, whichever
    // is lower; a cross-check of the two above.
    loader_copy_ms = ms_per_batch(rig, &engine);
    // A step twice the longer of the copy and the loader's own time per batch: then neither the
    // copy nor the loader is the limit, and a copy hidden behind the step costs nothing (in series
    // it would add its own length). A step shorter than the loader's time measures the loader.
    const double feed_ms = std::max({copy_ms, loader_ms, loader_copy_ms});
    const auto cycles = static_cast<std::int64_t>(2 * feed_ms * cycles_per_ms);
    step_ms = ms_per_step_alone(cycles, sink);
    main = run_overlap(rig, engine, cycles, sink, copy_ms);
    rig = Rig{};  // its pinned slabs go before the comparison's are made
    // The bench's earlier loop: epochs of 16 batches, the workers idle at each epoch's end.
    Rig short_rig = make_loader(sample_floats, workers, true, kShortEpoch, false);
    short_epochs = run_overlap(short_rig, engine, cycles, sink, copy_ms);
  }
  CHECK(cudaFree(sink));

  const double hidden_wall =
      std::clamp((step_ms + copy_ms - main.wall_ms) / copy_ms, 0.0, 1.0);
  const double over_compute = (main.wall_ms - step_ms) / step_ms;
  std::printf("\nThe loader's copy overlapped with the step: batches of %zu MiB (%d samples), %d "
              "workers,\npinned slabs, the DeviceFeeder one batch ahead; %d timed steps after %d of "
              "warm-up, each loop from a fresh epoch\n\n",
              batch_bytes / kMiB, kBatch, workers, kSteps, kWarmup);
  std::printf("  loader alone (no copy, no step)        %8.3f ms/batch\n", loader_ms);
  std::printf("  copy alone (H2D of a filled slab)      %8.3f ms   %.2f GB/s (median of %zu copies, "
              "the engine's event timing)\n",
              copy_ms, static_cast<double>(batch_bytes) / copy_ms / 1e6, copies_timed);
  std::printf("  loader + copy, no step                 %8.3f ms/batch\n", loader_copy_ms);
  std::printf("  step alone (spin kernel, no data)      %8.3f ms/step\n", step_ms);
  std::printf("\n  step with the copy running ahead, ms per step (device: events around each "
              "kernel; bubble: the\n  device idle from one step's end to the next one's start; "
              "next(): the host inside it)\n");
  std::printf("  %-34s %8s %8s %8s %8s %8s %8s %9s\n", "epochs", "restarts", "wall", "device",
              "bubble", "max", "next()", "hidden");
  char what[64];
  std::snprintf(what, sizeof what, "%d batches, next epoch prefetched", main.epoch_batches);
  print_overlap_row(main, what);
  std::snprintf(what, sizeof what, "%d batches, not prefetched (old)", short_epochs.epoch_batches);
  print_overlap_row(short_epochs, what);
  std::printf("\n  copy hidden behind the step            %8.0f %%   (1 - device bubble / copy "
              "alone; from wall time: %.0f %%)\n",
              100 * main.hidden, 100 * hidden_wall);
  std::printf("  step with the copy over step alone     %+8.1f %%   (wall; goal: at most +5 %%)\n",
              100 * over_compute);
  return {{"batch_bytes", batch_bytes},       {"batch_size", kBatch},
          {"workers", workers},               {"steps", kSteps},
          {"loader_ms", loader_ms},           {"copy_ms", copy_ms},
          {"copies_timed", copies_timed},     {"loader_copy_ms", loader_copy_ms},
          {"step_ms", step_ms},               {"with_prefetch_ms", main.wall_ms},
          {"hidden_fraction", main.hidden},   {"hidden_from", "device_gaps"},
          {"hidden_wall_fraction", hidden_wall},
          {"over_compute_fraction", over_compute},
          {"timed", overlap_json(main)},      {"short_epochs", overlap_json(short_epochs)}};
}

std::size_t parse_mib(const std::string& flag, const char* value) {
  const long v = std::strtol(value, nullptr, 10);
  if (v < 1 || v > 64 * 1024) throw std::invalid_argument(flag + ": '" + value + "' is not 1 to 65536 MiB");
  return static_cast<std::size_t>(v) * kMiB;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--overlap-only") {
        o.overlap_only = true;
        continue;
      }
      if (a != "--max-mib" && a != "--overlap-mib" && a != "--workers" && a != "--epoch-batches" &&
          a != "--json")
        throw std::invalid_argument("unknown option " + a);
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      const char* value = argv[++i];
      if (a == "--max-mib") o.max_bytes = parse_mib(a, value);
      else if (a == "--overlap-mib") o.overlap_bytes = parse_mib(a, value);
      else if (a == "--workers") o.workers = std::max(1, std::atoi(value));
      else if (a == "--epoch-batches") o.epoch_batches = std::max(1, std::atoi(value));
      else o.json_path = value;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h2d_bench: %s\nusage: h2d_bench [--max-mib N] [--overlap-mib N] "
                         "[--workers N] [--epoch-batches N] [--overlap-only] [--json FILE]\n",
                 e.what());
    return 2;
  }
  std::string why;
  if (!copy_engine_available(&why)) {
    std::fprintf(stderr, "h2d_bench: %s; this bench measures host-to-device copies and needs a "
                         "GPU (scripts/device_check.sh runs it on one)\n", why.c_str());
    return 77;
  }
  try {
    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("h2d_bench on %s (compute %d.%d)\n", prop.name, prop.major, prop.minor);
    nlohmann::json out = {{"device", prop.name}};
    if (!o.overlap_only) out["h2d"] = measure_h2d(o);
    out["overlap"] = measure_overlap(o);
    if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h2d_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
