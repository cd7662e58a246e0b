#include "loader/device_feeder.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <set>

#include "loader/synthetic_dataset.h"
#include "tests/loader/gated_dataset.h"
#include "tests/pinned_memory/fake_cuda.h"

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

// --- On a simulated device (tests/pinned_memory/fake_cuda.h) ------------------------------------

using testing::FakeCuda;

std::unique_ptr<CopyEngine> fake_engine(FakeCuda& cuda, const BatchLoader& loader, int buffers) {
  CopyEngine::Options o;
  o.buffer_bytes = loader.pool().slab_bytes();
  o.buffers = buffers;
  o.ops = &cuda;
  return std::make_unique<CopyEngine>(o);
}

// The first sample of a batch on the (simulated) device: IndexDataset's bytes name it.
std::size_t first_sample(const DeviceBatch& batch) { return testing::IndexDataset::decode(batch.data); }

TEST(DeviceFeederTest, AReadyBatchIsHandedOutWithoutWaitingForTheNextOne) {
  // Batch 1's samples load only once the test opens the gate. Batch 0 is ready: next() must hand
  // it out, its copy queued, while batch 1 is still loading, or the step on batch 0 waits for the
  // loader's next batch (a GPU bubble at every loader stall). The bound only turns a hang into a
  // failure; the passing run never comes near it.
  auto dataset = std::make_shared<testing::GatedDataset>(16, /*first_gated=*/4);
  LoaderOptions lo;
  lo.num_workers = 2;
  lo.batch_size = 4;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(16), lo);
  FakeCuda cuda;
  std::unique_ptr<CopyEngine> engine = fake_engine(cuda, loader, 3);
  DeviceFeeder feeder(loader, engine.get());
  testing::OpenOnExit open_at_exit{*dataset};

  auto first = std::async(std::launch::async, [&] { return feeder.next(); });
  if (first.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    dataset->open();
    first.wait();
    FAIL() << "next() waited for batch 1 before handing out batch 0";
  }
  std::optional<DeviceBatch> batch0 = first.get();
  ASSERT_TRUE(batch0);
  EXPECT_EQ(batch0->index, 0);
  EXPECT_TRUE(batch0->on_device);
  EXPECT_EQ(engine->buffers_in_use(), 1) << "batch 0's copy only: batch 1 is not collated";
  cuda.run_all();
  EXPECT_EQ(first_sample(*batch0), 0u);
  batch0->release_after(nullptr);

  dataset->open();  // the caller has queued step 0; now batch 1 is worth waiting for
  for (std::int64_t i = 1; i < 4; ++i) {
    std::optional<DeviceBatch> batch = feeder.next();
    ASSERT_TRUE(batch) << i;
    EXPECT_EQ(batch->index, i);
    cuda.run_all();
    EXPECT_EQ(first_sample(*batch), static_cast<std::size_t>(4 * i));
    batch->release_after(nullptr);
    cuda.run_all();
  }
  EXPECT_FALSE(feeder.next());
  feeder.begin_epoch(1);
  std::optional<DeviceBatch> again = feeder.next();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->epoch, 1u);
  EXPECT_EQ(again->index, 0);
  again->release_after(nullptr);
  cuda.run_all();
}

std::int64_t fake_now_ns = 0;
std::int64_t fake_clock() noexcept { return fake_now_ns; }

TEST(DeviceFeederTest, APageableCopysWaitForTheStepTwoBackIsNotBookedAsSubmit) {
  // From pageable memory the copy call returns once the copy stream's earlier work is done, which
  // includes the wait for the step that last read the buffer. That wait is the device's time, not
  // the copy's: last_submit_ns() leaves it to last_buffer_wait_ns(). The clock moves only while
  // the host polls (1 ms a poll), so both figures are exact.
  LoaderOptions lo;
  lo.num_workers = 0;  // loads in next(): no look-ahead, every copy submitted where the test says
  lo.batch_size = 4;
  BatchLoader loader(std::make_shared<testing::IndexDataset>(16),
                     std::make_shared<SequentialSampler>(16), lo);
  FakeCuda cuda;
  std::unique_ptr<CopyEngine> engine = fake_engine(cuda, loader, 2);
  fake_now_ns = 0;
  cuda.on_idle = [](int) { fake_now_ns += 1'000'000; };
  DeviceFeeder feeder(loader, engine.get(), nullptr, &fake_clock);
  void* step_stream = cuda.create_stream();

  std::optional<DeviceBatch> batch0 = feeder.next();  // buffer 0
  ASSERT_TRUE(batch0);
  cuda.run_all();
  batch0->order_before(step_stream);
  cuda.hold(step_stream, true);  // the step reading batch 0 takes long
  batch0->release_after(step_stream);
  std::optional<DeviceBatch> batch1 = feeder.next();  // buffer 1, never read: nothing to wait for
  ASSERT_TRUE(batch1);
  EXPECT_EQ(feeder.last_buffer_wait_ns(), 0);
  EXPECT_EQ(feeder.last_submit_ns(), 0);
  cuda.run_all();
  batch1->release_after(nullptr);
  cuda.run_all();

  const int idles_before = cuda.idles();
  cuda.on_idle = [&](int attempt) {
    fake_now_ns += 1'000'000;
    if (attempt == 4) cuda.hold(step_stream, false);  // step 0 ends while the host polls
  };
  std::optional<DeviceBatch> batch2 = feeder.next();  // buffer 0 again, once step 0 is done
  ASSERT_TRUE(batch2);
  const int polls = cuda.idles() - idles_before;
  EXPECT_GE(polls, 5);
  EXPECT_EQ(feeder.last_buffer_wait_ns(), polls * std::int64_t{1'000'000});
  EXPECT_EQ(feeder.last_submit_ns(), 0) << "the copy call alone: the wait for step 0 is not in it";
  cuda.run_all();
  EXPECT_EQ(first_sample(*batch2), 8u);
  batch2->release_after(nullptr);
  cuda.run_all();
  cuda.destroy_stream(step_stream);
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
