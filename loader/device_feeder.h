#pragma once
// Feeds the step with batches on its device. Takes batches from the BatchLoader and starts each
// one's copy (pinned_memory/copy_engine.h) as soon as it is collated, one batch ahead of the
// step, so that the copy of batch i+1 runs while step i computes. It never waits for batch i+1
// before handing out batch i: the look-ahead takes only a batch already collated, and only where
// its copy would not block the host; otherwise the next call takes it, once the caller has queued
// step i. Without a CopyEngine (the CPU path) a batch is its own device view and the h2d stage is 0.
#include <cstdint>
#include <exception>
#include <optional>
#include <vector>

#include "loader/batch_loader.h"
#include "loader/span_recorder.h"
#include "pinned_memory/copy_engine.h"

namespace feedscope {

// One batch where the step runs: device memory with a CopyEngine, else the host slab itself.
// Move-only. Destruction releases it (the device buffer after the work queued on the legacy
// default stream; release_after() names another stream).
struct DeviceBatch {
  std::int64_t index = -1;
  std::uint64_t epoch = 0;
  std::int64_t size = 0;
  std::byte* data = nullptr;       // size samples of the dataset's SampleSpec
  std::int64_t* labels = nullptr;  // size int64 labels
  bool on_device = false;

  // Makes the work queued on `stream` from now on wait for the copy (no host block).
  void order_before(void* stream) const { copy.order_before(stream); }
  // Gives the memory back once the work queued on `stream` so far is done.
  void release_after(void* stream) noexcept {
    copy.release_after(stream);
    host = Batch{};
  }

  Batch host;       // the CPU path: the batch, holding its slab
  DeviceCopy copy;  // the device path: the engine's buffer
};

// Not thread-safe: the training thread calls next() and begin_epoch(). The loader and engine must
// outlive the feeder; the feeder must outlive the DeviceBatches it returned.
class DeviceFeeder {
 public:
  // `engine` null: the CPU path. `spans` null: no h2d spans. `clock`: the time the submit and
  // buffer-wait figures are read on (tests pass their own).
  DeviceFeeder(BatchLoader& loader, CopyEngine* engine, SpanRegistry* spans = nullptr,
               std::int64_t (*clock)() noexcept = &now_ns);

  // The next batch of the epoch, its copy queued (and the next one's started where it is collated
  // already); nullopt at the end of the epoch. Waits only for this batch, never for the one after.
  // Rethrows the loader's errors; one met taking the look-ahead comes from the call after.
  std::optional<DeviceBatch> next();
  // Starts another epoch on the loader, dropping a batch prefetched from the last one.
  void begin_epoch(std::uint64_t epoch);

  // Nanoseconds the last next() spent in the copy calls (CopyEngine::submit): time the training
  // thread works, not waits. From pageable memory it is the copy itself, which CUDA stages through
  // a bounce buffer before the call returns.
  std::int64_t last_submit_ns() const noexcept { return last_submit_ns_; }
  // Nanoseconds the last next() waited, before a copy from pageable memory, for the copy stream's
  // earlier work: the previous copy and the step that last read the buffer
  // (CopyEngine::wait_until_submit_ready). The device's time, kept out of last_submit_ns().
  std::int64_t last_buffer_wait_ns() const noexcept { return last_buffer_wait_ns_; }
  // Bytes copied to the device so far, by the source memory kind.
  std::uint64_t h2d_bytes(bool pinned) const noexcept { return h2d_bytes_[pinned ? 1 : 0]; }
  bool on_device() const noexcept { return engine_ != nullptr; }

 private:
  DeviceBatch to_device(Batch batch);
  void look_ahead();
  void record_copies();

  BatchLoader& loader_;
  CopyEngine* engine_;
  std::int64_t (*clock_)() noexcept;
  SpanRing* copy_ring_ = nullptr;
  std::uint16_t copy_lane_ = 0;
  std::optional<Batch> held_back_;     // collated; its copy would have blocked the host
  std::optional<DeviceBatch> ahead_;   // its copy queued
  std::exception_ptr pending_error_;  // met taking the look-ahead, thrown by the next call
  bool epoch_done_ = false;
  std::vector<CopyTiming> timings_;  // reused: no allocation per batch in steady state
  std::uint64_t h2d_bytes_[2] = {0, 0};
  std::int64_t last_submit_ns_ = 0;
  std::int64_t last_buffer_wait_ns_ = 0;
};

}  // namespace feedscope
