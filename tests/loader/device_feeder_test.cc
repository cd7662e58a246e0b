#include "loader/device_feeder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "loader/synthetic_dataset.h"

namespace feedscope {
namespace {

// Sample i holds the float i in every element, so a batch's bytes name its samples.
class FloatIndexDataset final : public Dataset {
 public:
  explicit FloatIndexDataset(std::size_t n) : n_(n) { spec_ = SampleSpec{{4}, DType::float32}; }
  std::size_t size() const override { return n_; }
  const SampleSpec& spec() const override { return spec_; }
  std::int64_t num_classes() const override { return 3; }
  std::int64_t load(std::size_t index, std::span<std::byte> out, LoadContext&) const override {
    const float value = static_cast<float>(index);
    for (std::size_t i = 0; i < 4; ++i) std::memcpy(out.data() + i * sizeof value, &value, sizeof value);
    return static_cast<std::int64_t>(index % 3);
  }
  std::string describe(std::size_t index) const override { return "#" + std::to_string(index); }
  std::string name() const override { return "index"; }

 private:
  std::size_t n_;
  SampleSpec spec_;
};

TEST(DeviceFeederTest, CpuPathHandsOverTheSlabItselfAndEveryBatchOnce) {
  auto dataset = std::make_shared<FloatIndexDataset>(103);
  LoaderOptions lo;
  lo.num_workers = 2;
  lo.batch_size = 10;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(103), lo);
  SpanRegistry spans;
  DeviceFeeder feeder(loader, nullptr, &spans);
  EXPECT_FALSE(feeder.on_device());
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    if (epoch > 0) feeder.begin_epoch(epoch);
    std::set<int> seen;
    std::int64_t expected_index = 0;
    while (std::optional<DeviceBatch> batch = feeder.next()) {
      EXPECT_FALSE(batch->on_device);
      EXPECT_EQ(batch->index, expected_index++);
      EXPECT_EQ(batch->epoch, epoch);
      EXPECT_EQ(batch->data, batch->host.data) << "a view of the slab, not a copy";
      for (std::int64_t i = 0; i < batch->size; ++i) {
        float value;
        std::memcpy(&value, batch->data + i * 4 * sizeof(float), sizeof value);
        EXPECT_EQ(batch->labels[i], static_cast<std::int64_t>(value) % 3);
        EXPECT_TRUE(seen.insert(static_cast<int>(value)).second) << value;
      }
      batch->release_after(nullptr);
      EXPECT_FALSE(batch->host.slab) << "released: the slab is back in the pool";
    }
    EXPECT_EQ(seen.size(), 103u);
    EXPECT_EQ(expected_index, 11);
  }
  EXPECT_EQ(feeder.h2d_bytes(true) + feeder.h2d_bytes(false), 0u);
  for (const LaneInfo& lane : spans.lanes()) EXPECT_NE(lane.role, LaneRole::copy);
}

TEST(DeviceFeederTest, EndOfEpochStaysEndedUntilTheNextBegins) {
  auto dataset = std::make_shared<FloatIndexDataset>(5);
  LoaderOptions lo;
  lo.num_workers = 0;
  lo.batch_size = 5;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(5), lo);
  DeviceFeeder feeder(loader, nullptr);
  EXPECT_TRUE(feeder.next());
  EXPECT_FALSE(feeder.next());
  EXPECT_FALSE(feeder.next());
  feeder.begin_epoch(1);
  EXPECT_TRUE(feeder.next());
}

#if FEEDSCOPE_WITH_CUDA
TEST(DeviceFeederGpuTest, BatchesArriveOnTheDeviceOneAheadWithH2dSpans) {
  std::string why;
  if (!copy_engine_available(&why)) GTEST_SKIP() << why;
  auto dataset = std::make_shared<FloatIndexDataset>(64);
  LoaderOptions lo;
  lo.num_workers = 2;
  lo.batch_size = 8;
  lo.pin_memory = true;
  SpanRegistry spans;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(64), lo, &spans);
  CopyEngine::Options eo;
  eo.buffer_bytes = loader.pool().slab_bytes();
  CopyEngine engine(eo);
  DeviceFeeder feeder(loader, &engine, &spans);
  int batches = 0;
  while (std::optional<DeviceBatch> batch = feeder.next()) {
    EXPECT_TRUE(batch->on_device);
    EXPECT_NE(batch->data, nullptr);
    batch->release_after(nullptr);
    ++batches;
  }
  EXPECT_EQ(batches, 8);
  engine.wait_idle();
  feeder.begin_epoch(1);  // reclaims on the next call
  (void)feeder.next();
  EXPECT_GT(feeder.h2d_bytes(true), 0u);
  spans.collect();
  int h2d = 0;
  for (const Span& s : spans.spans()) h2d += s.stage == Stage::h2d ? 1 : 0;
  EXPECT_GE(h2d, 8);
}
#endif

}  // namespace
}  // namespace feedscope
