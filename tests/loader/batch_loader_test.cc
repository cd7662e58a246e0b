#include "loader/batch_loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

namespace feedscope {
namespace {

// Sample i is the single int32 value i; its label is i % 7. Optional hooks for failures and
// for measuring concurrency.
class CountingDataset final : public Dataset {
 public:
  explicit CountingDataset(std::size_t n) : n_(n) { spec_ = SampleSpec{{1}, DType::float32}; }
  std::size_t size() const override { return n_; }
  const SampleSpec& spec() const override { return spec_; }
  std::int64_t num_classes() const override { return 7; }
  std::int64_t load(std::size_t index, std::span<std::byte> out, LoadContext& ctx) const override {
    ScopedSpan span(ctx.spans, ctx.role, Stage::read, ctx.batch);
    if (index == fail_index) throw std::runtime_error("checksum mismatch");
    if (concurrency_goal > 0) wait_for_peers();
    const float value = static_cast<float>(value_is_epoch ? ctx.epoch : index);
    std::memcpy(out.data(), &value, sizeof value);
    return static_cast<std::int64_t>(index % 7);
  }
  std::string describe(std::size_t index) const override {
    return "/data/shard-0/" + std::to_string(index) + ".bin";
  }
  std::string name() const override { return "counting"; }

  std::size_t fail_index = static_cast<std::size_t>(-1);
  bool value_is_epoch = false;  // sample value = the epoch the loader says it is loading
  int concurrency_goal = 0;
  mutable std::atomic<int> peak{0};

 private:
  // Blocks until `concurrency_goal` loads run at once (or a timeout): proves real parallelism.
  void wait_for_peers() const {
    std::unique_lock lock(mutex_);
    const int now = ++running_;
    peak = std::max(peak.load(), now);
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return peak >= concurrency_goal; });
    --running_;
  }
  std::size_t n_;
  SampleSpec spec_;
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  mutable int running_ = 0;
};

std::vector<float> drain_epoch(BatchLoader& loader, std::vector<std::int64_t>* batch_indexes = nullptr) {
  std::vector<float> values;
  while (auto batch = loader.next()) {
    if (batch_indexes) batch_indexes->push_back(batch->index);
    const auto* data = reinterpret_cast<const float*>(batch->data);
    for (std::int64_t i = 0; i < batch->size; ++i) {
      values.push_back(data[i]);
      EXPECT_EQ(batch->labels[i], static_cast<std::int64_t>(data[i]) % 7);
    }
  }
  return values;
}

struct Grid {
  int workers;
  int prefetch;
  bool drop_last;
};

class EverySampleOnceTest : public ::testing::TestWithParam<Grid> {};

TEST_P(EverySampleOnceTest, EachEpochVisitsEverySampleExactlyOnce) {
  const Grid g = GetParam();
  constexpr std::size_t kSize = 103;  // not a multiple of the batch size
  auto dataset = std::make_shared<CountingDataset>(kSize);
  auto sampler = std::make_shared<RandomSampler>(kSize, 42);
  LoaderOptions o;
  o.num_workers = g.workers;
  o.prefetch = g.prefetch;
  o.batch_size = 10;
  o.drop_last = g.drop_last;
  BatchLoader loader(dataset, sampler, o);
  for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
    loader.begin_epoch(epoch);
    std::vector<std::int64_t> order;
    const std::vector<float> values = drain_epoch(loader, &order);
    const std::set<float> unique(values.begin(), values.end());
    EXPECT_EQ(unique.size(), values.size()) << "a sample came twice";
    EXPECT_EQ(values.size(), g.drop_last ? 100u : kSize);
    for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], static_cast<std::int64_t>(i));
  }
}

INSTANTIATE_TEST_SUITE_P(WorkersPrefetchDropLast, EverySampleOnceTest,
                         ::testing::Values(Grid{0, 1, false}, Grid{0, 1, true}, Grid{1, 1, false},
                                           Grid{1, 4, true}, Grid{2, 2, false}, Grid{2, 2, true},
                                           Grid{4, 3, false}, Grid{8, 1, true}),
                         [](const ::testing::TestParamInfo<Grid>& info) {
                           const Grid& g = info.param;
                           return "workers" + std::to_string(g.workers) + "_prefetch" +
                                  std::to_string(g.prefetch) + (g.drop_last ? "_droplast" : "");
                         });

TEST(BatchLoaderTest, SameSeedSameOrderAcrossWorkerCounts) {
  auto dataset = std::make_shared<CountingDataset>(64);
  auto sampler = std::make_shared<RandomSampler>(64, 7);
  std::vector<std::vector<float>> runs;
  for (int workers : {0, 1, 3}) {
    LoaderOptions o;
    o.num_workers = workers;
    o.batch_size = 8;
    BatchLoader loader(dataset, sampler, o);
    loader.begin_epoch(5);
    runs.push_back(drain_epoch(loader));
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

TEST(BatchLoaderTest, TellsTheDatasetWhichEpochItLoads) {
  // Per-sample augmentation is seeded by (seed, epoch, index), so the epoch must reach load().
  auto dataset = std::make_shared<CountingDataset>(20);
  dataset->value_is_epoch = true;
  auto sampler = std::make_shared<SequentialSampler>(20);
  for (int workers : {0, 2}) {
    LoaderOptions o;
    o.num_workers = workers;
    o.batch_size = 6;
    BatchLoader loader(dataset, sampler, o);
    for (const std::uint64_t epoch : {3u, 4u}) {
      loader.begin_epoch(epoch);
      std::size_t samples = 0;
      while (auto batch = loader.next()) {
        const auto* data = reinterpret_cast<const float*>(batch->data);
        for (std::int64_t i = 0; i < batch->size; ++i, ++samples)
          EXPECT_EQ(data[i], static_cast<float>(epoch)) << workers << " workers";
      }
      EXPECT_EQ(samples, 20u);
    }
  }
}

TEST(BatchLoaderTest, OutOfOrderModeStillDeliversEverything) {
  auto dataset = std::make_shared<CountingDataset>(200);
  LoaderOptions o;
  o.num_workers = 3;
  o.batch_size = 16;
  o.in_order = false;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(200), o);
  std::vector<std::int64_t> batches;
  const auto values = drain_epoch(loader, &batches);
  EXPECT_EQ(std::set<float>(values.begin(), values.end()).size(), 200u);
  EXPECT_EQ(std::set<std::int64_t>(batches.begin(), batches.end()).size(), 13u);
}

TEST(BatchLoaderTest, WorkerExceptionReachesTheCallerWithIndexAndFile) {
  auto dataset = std::make_shared<CountingDataset>(50);
  dataset->fail_index = 23;
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 5;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(50), o);
  try {
    drain_epoch(loader);
    FAIL() << "expected SampleError";
  } catch (const SampleError& e) {
    EXPECT_EQ(e.index(), 23u);
    EXPECT_EQ(e.source(), "/data/shard-0/23.bin");
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos);
  }
}

TEST(BatchLoaderTest, WorkersRunConcurrentlyEvenBeyondTheCoreCount) {
  auto dataset = std::make_shared<CountingDataset>(64);
  dataset->concurrency_goal = 4;
  LoaderOptions o;
  o.num_workers = 4;
  o.batch_size = 1;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(64), o);
  drain_epoch(loader);
  EXPECT_GE(dataset->peak.load(), 4) << "4 workers never ran 4 loads at once";
}

TEST(BatchLoaderTest, DestructionMidEpochJoinsWorkersAndFreesSlabs) {
  auto dataset = std::make_shared<CountingDataset>(10000);
  {
    LoaderOptions o;
    o.num_workers = 3;
    o.batch_size = 32;
    o.prefetch = 4;
    BatchLoader loader(dataset, std::make_shared<SequentialSampler>(10000), o);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(loader.next());
    EXPECT_GT(loader.pool().slabs_in_use(), 0);
  }  // must return promptly with workers busy
  SUCCEED();
}

TEST(BatchLoaderTest, BatchMayOutliveItsLoader) {
  auto dataset = std::make_shared<CountingDataset>(40);
  std::optional<Batch> kept;
  {
    LoaderOptions o;
    o.num_workers = 2;
    o.batch_size = 4;
    BatchLoader loader(dataset, std::make_shared<SequentialSampler>(40), o);
    kept = loader.next();
  }
  ASSERT_TRUE(kept);
  EXPECT_EQ(reinterpret_cast<const float*>(kept->data)[3], 3.0f);
}

TEST(BatchLoaderTest, HoldingEverySlabIsAClearErrorNotADeadlock) {
  auto dataset = std::make_shared<CountingDataset>(100);
  LoaderOptions o;
  o.num_workers = 1;
  o.prefetch = 1;
  o.spare_slabs = 1;
  o.batch_size = 2;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(100), o);
  std::vector<Batch> hoard;
  hoard.push_back(*loader.next());
  hoard.push_back(*loader.next());
  EXPECT_THROW(loader.next(), LoaderError);
  hoard.clear();
  EXPECT_TRUE(loader.next()) << "recovers once the caller lets go";
}

TEST(BatchLoaderTest, RecordsWorkerSpansOnWorkerLanes) {
  auto dataset = std::make_shared<CountingDataset>(60);
  SpanRegistry spans;
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 6;
  {
    BatchLoader loader(dataset, std::make_shared<SequentialSampler>(60), o, &spans);
    drain_epoch(loader);
  }
  spans.collect();
  const auto all = spans.spans();
  EXPECT_EQ(all.size(), 60u);
  const auto lanes = spans.lanes();
  for (const Span& s : all) {
    EXPECT_EQ(s.stage, Stage::read);
    EXPECT_EQ(lanes.at(s.lane).role, LaneRole::worker);
    EXPECT_LE(s.begin_ns, s.end_ns);
  }
}

TEST(BatchLoaderTest, RejectsBadOptionsNamingTheKey) {
  auto dataset = std::make_shared<CountingDataset>(10);
  auto sampler = std::make_shared<SequentialSampler>(10);
  LoaderOptions o;
  o.num_workers = -1;
  try {
    BatchLoader loader(dataset, sampler, o);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("num_workers"), std::string::npos);
  }
  o.num_workers = 1;
  o.batch_size = 0;
  EXPECT_THROW(BatchLoader(dataset, sampler, o), std::invalid_argument);
}

}  // namespace
}  // namespace feedscope
