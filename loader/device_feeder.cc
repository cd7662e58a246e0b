#include "loader/device_feeder.h"

#include <utility>

namespace feedscope {

DeviceFeeder::DeviceFeeder(BatchLoader& loader, CopyEngine* engine, SpanRegistry* spans)
    : loader_(loader), engine_(engine) {
  if (engine_ != nullptr && spans != nullptr) copy_ring_ = &spans->add_lane(LaneRole::copy, &copy_lane_);
  timings_.reserve(16);
}

std::optional<DeviceBatch> DeviceFeeder::fetch() {
  if (epoch_done_) return std::nullopt;
  std::optional<Batch> batch = loader_.next();
  if (!batch) {
    epoch_done_ = true;
    return std::nullopt;
  }
  DeviceBatch out;
  out.index = batch->index;
  out.epoch = batch->epoch;
  out.size = batch->size;
  if (engine_ == nullptr) {
    out.data = batch->data;
    out.labels = batch->labels;
    out.host = std::move(*batch);
    return out;
  }
  // Data and labels share the slab, so one copy moves both: up to the end of the labels.
  const std::size_t bytes =
      loader_.labels_offset() + sizeof(std::int64_t) * static_cast<std::size_t>(batch->size);
  const std::int64_t submit_begin = now_ns();
  out.copy = engine_->submit(std::move(batch->slab), bytes, batch->index);
  last_submit_ns_ += now_ns() - submit_begin;
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

std::optional<DeviceBatch> DeviceFeeder::next() {
  last_submit_ns_ = 0;
  if (engine_ == nullptr) return fetch();  // nothing to overlap: no batch held ahead
  record_copies();  // also hands the slabs of finished copies back to the loader
  if (!ahead_) ahead_ = fetch();
  if (!ahead_) return std::nullopt;
  std::optional<DeviceBatch> current = std::move(ahead_);
  ahead_ = fetch();
  return current;
}

void DeviceFeeder::begin_epoch(std::uint64_t epoch) {
  ahead_.reset();
  epoch_done_ = false;
  loader_.begin_epoch(epoch);
}

}  // namespace feedscope
