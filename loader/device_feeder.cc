#include "loader/device_feeder.h"

#include <utility>

namespace feedscope {

DeviceFeeder::DeviceFeeder(BatchLoader& loader, CopyEngine* engine, SpanRegistry* spans,
                           std::int64_t (*clock)() noexcept)
    : loader_(loader), engine_(engine), clock_(clock) {
  if (engine_ != nullptr && spans != nullptr) copy_ring_ = &spans->add_lane(LaneRole::copy, &copy_lane_);
  timings_.reserve(16);
}

DeviceBatch DeviceFeeder::to_device(Batch batch) {
  DeviceBatch out;
  out.index = batch.index;
  out.epoch = batch.epoch;
  out.size = batch.size;
  if (engine_ == nullptr) {
    out.data = batch.data;
    out.labels = batch.labels;
    out.host = std::move(batch);
    return out;
  }
  // Data and labels share the slab, so one copy moves both: up to the end of the labels.
  const std::size_t bytes =
      loader_.labels_offset() + sizeof(std::int64_t) * static_cast<std::size_t>(batch.size);
  const std::int64_t wait_begin = clock_();
  engine_->wait_until_submit_ready(batch.slab.pinned());
  const std::int64_t submit_begin = clock_();
  out.copy = engine_->submit(std::move(batch.slab), bytes, batch.index);
  last_submit_ns_ += clock_() - submit_begin;
  last_buffer_wait_ns_ += submit_begin - wait_begin;
  out.data = out.copy.data();
  out.labels = reinterpret_cast<std::int64_t*>(out.copy.data() + loader_.labels_offset());
  out.on_device = true;
  return out;
}

void DeviceFeeder::record_copies() {
  timings_.clear();
  engine_->reclaim(&timings_);
  for (const CopyTiming& t : timings_) {
    h2d_bytes_[t.pinned ? 1 : 0] += t.bytes;
    if (copy_ring_ != nullptr)
      copy_ring_->push(Span{t.begin_ns, t.end_ns, t.tag, Stage::h2d, copy_lane_});
  }
}

// The next batch's copy, started without a wait: only where the loader has it collated, and (from
// pageable memory) where the copy stream is free, else the next call takes it.
void DeviceFeeder::look_ahead() {
  if (epoch_done_) return;
  try {
    if (!held_back_) held_back_ = loader_.try_next();
    if (held_back_ && engine_->can_submit_now(held_back_->slab.pinned())) {
      ahead_ = to_device(std::move(*held_back_));
      held_back_.reset();
    }
  } catch (...) {  // not this batch's: the caller meets it at the next call
    pending_error_ = std::current_exception();
  }
}

std::optional<DeviceBatch> DeviceFeeder::next() {
  last_submit_ns_ = 0;
  last_buffer_wait_ns_ = 0;
  if (engine_ == nullptr) {  // nothing to overlap: no batch held ahead
    if (epoch_done_) return std::nullopt;
    std::optional<Batch> batch = loader_.next();
    epoch_done_ = !batch;
    if (!batch) return std::nullopt;
    return to_device(std::move(*batch));
  }
  if (pending_error_) std::rethrow_exception(std::exchange(pending_error_, nullptr));
  record_copies();  // also hands the slabs of finished copies back to the loader
  if (!ahead_) {
    // The caller has queued the step on the batch before: waiting here overlaps it.
    if (!held_back_ && !epoch_done_) {
      held_back_ = loader_.next();
      epoch_done_ = !held_back_;
    }
    if (!held_back_) return std::nullopt;
    ahead_ = to_device(std::move(*held_back_));
    held_back_.reset();
  }
  std::optional<DeviceBatch> current = std::move(ahead_);
  ahead_.reset();
  look_ahead();
  return current;
}

void DeviceFeeder::begin_epoch(std::uint64_t epoch) {
  ahead_.reset();
  held_back_.reset();
  pending_error_ = nullptr;
  epoch_done_ = false;
  loader_.begin_epoch(epoch);
}

}  // namespace feedscope
