#include "loader/batch_loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "tests/loader/gated_dataset.h"
#include "tests/loader/index_dataset.h"

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

using testing::IndexDataset;

// The dataset indexes one epoch delivered, decoded from the batch bytes; checks every label and
// that batches come numbered 0, 1, 2, ... in order.
std::vector<std::size_t> drain_indexes(BatchLoader& loader) {
  std::vector<std::size_t> indexes;
  std::int64_t expected_batch = 0;
  while (auto batch = loader.next()) {
    EXPECT_EQ(batch->index, expected_batch++);
    const std::size_t bytes = loader.dataset().spec().bytes();
    for (std::int64_t i = 0; i < batch->size; ++i) {
      const std::size_t index = IndexDataset::decode(batch->data + static_cast<std::size_t>(i) * bytes);
      EXPECT_EQ(batch->labels[i], IndexDataset::label_of(index));
      indexes.push_back(index);
    }
  }
  return indexes;
}

enum class Order { sequential, random, distributed };

struct Grid {
  Order order;
  int workers;
  int prefetch;
  bool drop_last;
  bool next_epoch;  // prefetch_next_epoch: epochs 1 and 2 are adopted, already started
};

class EverySampleOnceTest : public ::testing::TestWithParam<Grid> {};

TEST_P(EverySampleOnceTest, EachEpochVisitsEverySampleExactlyOnce) {
  const Grid g = GetParam();
  constexpr std::size_t kSize = 103;  // prime: not a multiple of the batch size or world size
  constexpr int kBatch = 10;
  constexpr std::size_t kWorld = 3;
  auto dataset = std::make_shared<IndexDataset>(kSize);
  LoaderOptions o;
  o.num_workers = g.workers;
  o.prefetch = g.prefetch;
  o.batch_size = kBatch;
  o.drop_last = g.drop_last;
  o.prefetch_next_epoch = g.next_epoch;
  const std::size_t ranks = g.order == Order::distributed ? kWorld : 1;
  std::vector<std::unique_ptr<BatchLoader>> loaders;
  for (std::size_t rank = 0; rank < ranks; ++rank) {
    std::shared_ptr<const IndexSampler> sampler;
    if (g.order == Order::sequential) sampler = std::make_shared<SequentialSampler>(kSize);
    if (g.order == Order::random) sampler = std::make_shared<RandomSampler>(kSize, 42);
    // drop_last applies twice here, as in PyTorch: the sampler cuts 103 to 102 (34 per rank),
    // then the loader drops each rank's partial batch of 4.
    if (g.order == Order::distributed)
      sampler = std::make_shared<DistributedSampler>(kSize, rank, kWorld, true, 42, g.drop_last);
    loaders.push_back(std::make_unique<BatchLoader>(dataset, sampler, o));
  }
  std::vector<std::size_t> previous;
  for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
    std::map<std::size_t, int> seen;
    std::vector<std::size_t> all;
    for (auto& loader : loaders) {
      loader->begin_epoch(epoch);
      const std::vector<std::size_t> mine = drain_indexes(*loader);
      for (std::size_t i : mine) ++seen[i];
      all.insert(all.end(), mine.begin(), mine.end());
    }
    for (const auto& [index, count] : seen) ASSERT_LT(index, kSize);
    if (g.order == Order::distributed) {
      // torch: 103 over 3 ranks is 35 each with 2 padded repeats; with drop_last, 3 full
      // batches per rank and no repeats.
      EXPECT_EQ(all.size(), g.drop_last ? 90u : 105u);
      std::size_t repeats = 0;
      for (const auto& [index, count] : seen) repeats += static_cast<std::size_t>(count - 1);
      EXPECT_EQ(repeats, g.drop_last ? 0u : 2u);
      EXPECT_EQ(seen.size(), g.drop_last ? 90u : kSize);
    } else {
      EXPECT_EQ(all.size(), g.drop_last ? 100u : kSize);
      EXPECT_EQ(seen.size(), all.size()) << "a sample came twice";
    }
    if (g.order == Order::sequential) {
      for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], i);
    } else if (epoch > 0) {
      EXPECT_NE(all, previous) << "a new epoch reshuffles";
    }
    previous = all;
  }
}

std::vector<Grid> full_grid() {
  std::vector<Grid> grid;
  for (Order order : {Order::sequential, Order::random, Order::distributed})
    for (int workers : {0, 1, 2, 4})
      for (int prefetch : {1, 2, 4})
        for (bool drop_last : {false, true})
          for (bool next_epoch : {false, true})
            grid.push_back({order, workers, prefetch, drop_last, next_epoch});
  return grid;
}

INSTANTIATE_TEST_SUITE_P(SamplerWorkersPrefetchDropLast, EverySampleOnceTest,
                         ::testing::ValuesIn(full_grid()),
                         [](const ::testing::TestParamInfo<Grid>& info) {
                           const Grid& g = info.param;
                           const char* order = g.order == Order::sequential ? "sequential"
                                               : g.order == Order::random   ? "random"
                                                                            : "distributed";
                           return std::string(order) + "_workers" + std::to_string(g.workers) +
                                  "_prefetch" + std::to_string(g.prefetch) +
                                  (g.drop_last ? "_droplast" : "") +
                                  (g.next_epoch ? "_nextepoch" : "");
                         });

TEST(BatchLoaderTest, SameSeedSameOrderDifferentEpochDifferentOrder) {
  auto dataset = std::make_shared<IndexDataset>(97);
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 8;
  const auto run = [&](std::shared_ptr<const IndexSampler> sampler, std::uint64_t epoch) {
    BatchLoader loader(dataset, std::move(sampler), o);
    loader.begin_epoch(epoch);
    return drain_indexes(loader);
  };
  for (std::size_t rank : {0u, 1u}) {
    const auto make = [&](std::uint64_t seed) -> std::shared_ptr<const IndexSampler> {
      if (rank == 0) return std::make_shared<RandomSampler>(97, seed);
      return std::make_shared<DistributedSampler>(97, 1, 2, true, seed, false);
    };
    EXPECT_EQ(run(make(5), 2), run(make(5), 2));
    EXPECT_NE(run(make(5), 2), run(make(5), 3));
  }
}

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
  o.num_workers = -2;  // -1 is kAuto
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

// The reason names what is true: the dataset's size, the sampler's share where it differs, the
// batch size, and drop_last only where it is on and drops the samples.
TEST(BatchLoaderTest, EmptyEpochReasonSaysWhatLeavesNoBatch) {
  LoaderOptions o;
  o.num_workers = 0;
  o.batch_size = 4;
  o.drop_last = true;
  {
    BatchLoader loader(std::make_shared<CountingDataset>(3), std::make_shared<SequentialSampler>(3), o);
    EXPECT_EQ(loader.batches_per_epoch(), 0u);
    EXPECT_EQ(loader.empty_epoch_reason(),
              "no batch of batch_size 4 in an epoch: the dataset holds 3 samples, and drop_last "
              "drops a partial batch");
  }
  {
    // 10 samples over 4 ranks with drop_last: 2 each.
    BatchLoader loader(std::make_shared<CountingDataset>(10),
                       std::make_shared<DistributedSampler>(10, 1, 4, false, 0, true), o);
    EXPECT_EQ(loader.empty_epoch_reason(),
              "no batch of batch_size 4 in an epoch: the sampler's share is 2 of the dataset's 10 "
              "samples, and drop_last drops a partial batch");
  }
  o.drop_last = false;
  {
    BatchLoader loader(std::make_shared<CountingDataset>(3), std::make_shared<SequentialSampler>(3), o);
    EXPECT_EQ(loader.batches_per_epoch(), 1u);
    EXPECT_EQ(loader.empty_epoch_reason(), "");
  }
  {
    BatchLoader loader(std::make_shared<CountingDataset>(0), std::make_shared<SequentialSampler>(0), o);
    EXPECT_EQ(loader.empty_epoch_reason(),
              "no batch of batch_size 4 in an epoch: the dataset holds 0 samples");
  }
  {
    BatchLoader loader(std::make_shared<CountingDataset>(10), std::make_shared<SequentialSampler>(0), o);
    EXPECT_EQ(loader.empty_epoch_reason(),
              "no batch of batch_size 4 in an epoch: the sampler's share is 0 of the dataset's 10 "
              "samples");
  }
}

LoaderOptions skip_options(int workers, int batch_size, double max_bad_ratio) {
  LoaderOptions o;
  o.num_workers = workers;
  o.batch_size = batch_size;
  o.bad_sample = BadSamplePolicy::skip;
  o.max_bad_ratio = max_bad_ratio;
  return o;
}

TEST(BatchLoaderTest, SkipPolicyCompactsTheBatchAndRecordsTheExamples) {
  for (int workers : {0, 2}) {
    auto dataset = std::make_shared<IndexDataset>(40, std::set<std::size_t>{3, 4, 17});
    BatchLoader loader(dataset, std::make_shared<SequentialSampler>(40), skip_options(workers, 10, 1.0));
    std::vector<std::int64_t> sizes;
    std::vector<std::size_t> indexes;
    while (auto batch = loader.next()) {
      sizes.push_back(batch->size);
      for (std::int64_t i = 0; i < batch->size; ++i) {
        const std::size_t index = IndexDataset::decode(batch->data + static_cast<std::size_t>(i) * 32);
        EXPECT_EQ(batch->labels[i], IndexDataset::label_of(index));
        indexes.push_back(index);
      }
    }
    EXPECT_EQ(sizes, (std::vector<std::int64_t>{8, 9, 10, 10}));
    std::vector<std::size_t> expected;
    for (std::size_t i = 0; i < 40; ++i)
      if (i != 3 && i != 4 && i != 17) expected.push_back(i);
    EXPECT_EQ(indexes, expected) << "later samples shift down in order";
    const DataErrors errors = loader.data_errors();
    EXPECT_EQ(errors.bad, 3u);
    EXPECT_EQ(errors.attempted, 40u);
    ASSERT_EQ(errors.examples.size(), 3u);
    EXPECT_EQ(errors.examples[0].index, 3u);
    EXPECT_EQ(errors.examples[2].index, 17u);
    EXPECT_EQ(errors.examples[2].source, "/data/part-17.bin");
    EXPECT_NE(errors.examples[2].message.find("checksum mismatch"), std::string::npos);
    EXPECT_NE(errors.examples[2].message.find("/data/part-17.bin"), std::string::npos);
  }
}

TEST(BatchLoaderTest, SkipPolicyPassesOverAnEmptiedBatchAndKeepsOnlyTheFirstExamples) {
  std::set<std::size_t> bad;
  for (std::size_t i = 4; i < 8; ++i) bad.insert(i);  // all of batch 2
  auto dataset = std::make_shared<IndexDataset>(12, bad);
  LoaderOptions o = skip_options(1, 2, 1.0);
  o.error_examples = 2;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(12), o);
  std::vector<std::int64_t> batches;
  while (auto batch = loader.next()) batches.push_back(batch->index);
  EXPECT_EQ(batches, (std::vector<std::int64_t>{0, 1, 4, 5})) << "no empty batch is delivered";
  const DataErrors errors = loader.data_errors();
  EXPECT_EQ(errors.bad, 4u);
  ASSERT_EQ(errors.examples.size(), 2u);
  EXPECT_EQ(errors.examples[1].index, 5u);
}

TEST(BatchLoaderTest, SkipPolicyThrowsBadDataErrorOnceOverTheRatio) {
  // Every 10th sample is bad (10 %); tolerance 5 % with a floor of 100: the 6th bad sample, at
  // 60 attempted, exceeds 0.05 x 100, whatever the worker count.
  std::set<std::size_t> bad;
  for (std::size_t i = 0; i < 1000; i += 10) bad.insert(i);
  for (int workers : {0, 1, 3}) {
    auto dataset = std::make_shared<IndexDataset>(1000, bad);
    LoaderOptions o = skip_options(workers, 10, 0.05);
    o.bad_ratio_floor = 100;
    BatchLoader loader(dataset, std::make_shared<SequentialSampler>(1000), o);
    int delivered = 0;
    try {
      while (loader.next()) ++delivered;
      FAIL() << "10 % bad data passed a 5 % tolerance";
    } catch (const BadDataError& e) {
      EXPECT_EQ(delivered, 5);
      EXPECT_EQ(e.errors().bad, 6u);
      EXPECT_EQ(e.errors().attempted, 60u);
      const std::string what = e.what();
      EXPECT_NE(what.find("6 of 60"), std::string::npos) << what;
      EXPECT_NE(what.find("/data/part-0.bin"), std::string::npos) << "names the first file: " << what;
    }
    EXPECT_THROW(loader.next(), BadDataError) << "bad data stays bad";
  }
}

TEST(BatchLoaderTest, OneEarlyBadSampleDoesNotAbortUnderTheRatioFloor) {
  auto dataset = std::make_shared<IndexDataset>(500, std::set<std::size_t>{0});
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(500), skip_options(2, 16, 0.01));
  EXPECT_EQ(drain_indexes(loader).size(), 499u);
  EXPECT_EQ(loader.data_errors().bad, 1u);
}

TEST(BatchLoaderTest, FailPolicyThrowsTheSampleErrorNamingTheFile) {
  for (int workers : {0, 2}) {
    auto dataset = std::make_shared<IndexDataset>(30, std::set<std::size_t>{12});
    LoaderOptions o;
    o.num_workers = workers;
    o.batch_size = 5;
    BatchLoader loader(dataset, std::make_shared<SequentialSampler>(30), o);
    int delivered = 0;
    try {
      while (loader.next()) ++delivered;
      FAIL() << "a bad sample passed the fail policy";
    } catch (const SampleError& e) {
      EXPECT_EQ(delivered, 2);
      EXPECT_EQ(e.index(), 12u);
      EXPECT_NE(std::string(e.what()).find("/data/part-12.bin"), std::string::npos) << e.what();
    }
    EXPECT_EQ(loader.data_errors().bad, 1u);
    EXPECT_TRUE(loader.next()) << "the loader goes on past the failed batch if asked";
  }
}

// Counts loads running right now, so a test sees whether any outlived the loader.
class ActiveDataset final : public Dataset {
 public:
  explicit ActiveDataset(std::size_t n) : inner_(n) {}
  std::size_t size() const override { return inner_.size(); }
  const SampleSpec& spec() const override { return inner_.spec(); }
  std::int64_t num_classes() const override { return inner_.num_classes(); }
  std::int64_t load(std::size_t index, std::span<std::byte> out, LoadContext& ctx) const override {
    ++active;
    ++loads;
    const std::int64_t label = inner_.load(index, out, ctx);
    --active;
    return label;
  }
  std::string describe(std::size_t index) const override { return inner_.describe(index); }
  std::string name() const override { return "active"; }
  mutable std::atomic<int> active{0};
  mutable std::atomic<int> loads{0};

 private:
  IndexDataset inner_;
};

TEST(BatchLoaderTest, DestructionWithSlabsInFlightAndABatchHeldJoinsAndReturnsEverySlab) {
  auto dataset = std::make_shared<ActiveDataset>(200000);
  std::shared_ptr<const PinnedPool> pool;
  std::optional<Batch> held;
  {
    LoaderOptions o;
    o.num_workers = 3;
    o.batch_size = 512;
    o.prefetch = 4;
    BatchLoader loader(dataset, std::make_shared<SequentialSampler>(200000), o);
    pool = loader.shared_pool();
    held = loader.next();
    ASSERT_TRUE(held);
    ASSERT_GT(loader.batches_in_flight(), 0) << "next() refills the pipeline before returning";
    EXPECT_GE(pool->slabs_in_use(), 1 + loader.batches_in_flight());
  }
  EXPECT_EQ(dataset->active.load(), 0) << "a worker was still loading after the destructor";
  const int loads = dataset->loads.load();
  EXPECT_EQ(pool->slabs_in_use(), 1) << "only the held batch keeps its slab";
  EXPECT_EQ(IndexDataset::decode(held->data + 32 * 511), 511u) << "the held batch is intact";
  held.reset();
  EXPECT_EQ(pool->slabs_in_use(), 0);
  EXPECT_EQ(dataset->loads.load(), loads) << "nothing loads once the loader is gone";
}


// What a fresh loader delivers of `epoch`: what adopting or dropping a started epoch must match.
std::vector<std::size_t> fresh_epoch(std::shared_ptr<const Dataset> dataset,
                                     std::shared_ptr<const IndexSampler> sampler,
                                     const LoaderOptions& options, std::uint64_t epoch) {
  BatchLoader fresh(std::move(dataset), std::move(sampler), options);
  fresh.begin_epoch(epoch);
  return drain_indexes(fresh);
}

// Epoch e + 1's first batches load while epoch e's last ones are consumed: once epoch 0 is
// drained, its successor is loading without begin_epoch(), and adopting it loads nothing twice and
// delivers what a fresh loader's epoch 1 holds, batch for batch.
TEST(BatchLoaderTest, WorkersStartTheNextEpochBeforeItIsAskedFor) {
  constexpr int kSize = 40;
  auto dataset = std::make_shared<ActiveDataset>(kSize);
  auto sampler = std::make_shared<RandomSampler>(kSize, 3);
  LoaderOptions o;
  o.num_workers = 2;
  o.prefetch = 2;
  o.batch_size = 4;
  o.prefetch_next_epoch = true;
  BatchLoader loader(dataset, sampler, o);
  EXPECT_EQ(drain_indexes(loader).size(), static_cast<std::size_t>(kSize));
  // Epoch 1's batches scheduled while epoch 0's last ones were awaited: loading, or loaded and
  // collected. Only next() schedules more, so this is all the loading to come.
  const auto started = [&] { return loader.batches_in_flight() + loader.batches_ready(); };
  const int ahead = started();
  EXPECT_GE(ahead, o.num_workers * o.prefetch) << "every worker's prefetch, at least";
  EXPECT_LE(ahead, loader.pool().slab_count());
  const auto settled_loads = [&](int expected) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (dataset->loads.load() < expected && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // nothing more comes
    return dataset->loads.load();
  };
  const int epoch0 = kSize + ahead * o.batch_size;
  EXPECT_EQ(settled_loads(epoch0), epoch0) << "epoch 1's first batches, loaded unasked";

  loader.begin_epoch(1);
  EXPECT_EQ(drain_indexes(loader), fresh_epoch(std::make_shared<IndexDataset>(kSize), sampler, o, 1));
  // Epoch 1 loaded once (the batches started ahead are not loaded again), and epoch 2's first
  // batches are loading in turn.
  const int epoch1 = 2 * kSize + started() * o.batch_size;
  EXPECT_EQ(settled_loads(epoch1), epoch1) << "a sample of epoch 1 loaded twice";
}

// Asking for another epoch than the one started drops the started work: the epoch asked for comes
// whole and in its own order, and every slab comes back.
TEST(BatchLoaderTest, BeginningAnotherEpochDropsTheOneStartedAhead) {
  constexpr std::size_t kSize = 40;
  auto dataset = std::make_shared<IndexDataset>(kSize);
  auto sampler = std::make_shared<RandomSampler>(kSize, 3);
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 4;
  o.prefetch_next_epoch = true;
  BatchLoader loader(dataset, sampler, o);
  drain_indexes(loader);  // epoch 0; epoch 1 starts loading
  loader.begin_epoch(5);
  EXPECT_EQ(drain_indexes(loader), fresh_epoch(dataset, sampler, o, 5));
  loader.begin_epoch(9);  // not 6, which has started by now
  EXPECT_EQ(loader.pool().slabs_in_use(), 0) << "begin_epoch() drains what another epoch started";
}

// begin_epoch(epoch + 1) before the current epoch is consumed: its undelivered batches (ready, or
// still loading when the next epoch is adopted) never surface, and their slabs return.
TEST(BatchLoaderTest, AdoptingTheNextEpochMidEpochDropsTheRestOfTheCurrentOne) {
  constexpr std::size_t kSize = 40;
  auto dataset = std::make_shared<IndexDataset>(kSize);
  auto sampler = std::make_shared<RandomSampler>(kSize, 3);
  for (const int prefetch : {1, 2, 4}) {
    LoaderOptions o;
    o.num_workers = 2;
    o.prefetch = prefetch;
    o.batch_size = 4;
    o.prefetch_next_epoch = true;
    BatchLoader loader(dataset, sampler, o);
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(loader.next());  // 2 of 10 batches left
    loader.begin_epoch(1);
    std::vector<std::size_t> got;
    while (auto batch = loader.next()) {
      EXPECT_EQ(batch->epoch, 1u) << "a batch of the abandoned epoch 0";
      const std::size_t bytes = dataset->spec().bytes();
      for (std::int64_t i = 0; i < batch->size; ++i)
        got.push_back(IndexDataset::decode(batch->data + static_cast<std::size_t>(i) * bytes));
    }
    EXPECT_EQ(got, fresh_epoch(dataset, sampler, o, 1)) << "prefetch " << prefetch;
    loader.begin_epoch(9);
    EXPECT_EQ(loader.pool().slabs_in_use(), 0) << "prefetch " << prefetch;
  }
}

// Backpressure at every worker count: a consumer that keeps every batch stops the loading once
// the slabs run out (not one sample loaded beyond them, no allocation), the next call is a clear
// error rather than a wait that never ends, and letting go resumes where the epoch was.
TEST(BatchLoaderTest, HoardedSlabsStopTheLoadingAtAnyWorkerCountAndLettingGoResumes) {
  for (const int workers : {0, 1, 3}) {
    auto dataset = std::make_shared<ActiveDataset>(1000);
    LoaderOptions o;
    o.num_workers = workers;
    o.prefetch = 2;
    o.spare_slabs = 1;
    o.batch_size = 2;
    BatchLoader loader(dataset, std::make_shared<SequentialSampler>(1000), o);
    std::vector<Batch> hoard;
    try {
      for (int i = 0; i < 100; ++i) hoard.push_back(*loader.next());
      FAIL() << workers << " workers: 100 batches held from a pool of " << loader.pool().slab_count();
    } catch (const LoaderError& e) {
      EXPECT_NE(std::string(e.what()).find("held by batches still alive"), std::string::npos) << e.what();
    }
    EXPECT_EQ(static_cast<int>(hoard.size()), loader.pool().slab_count()) << workers << " workers";
    EXPECT_EQ(dataset->loads.load(), static_cast<int>(hoard.size()) * 2)
        << workers << " workers loaded beyond the slabs";
    EXPECT_EQ(loader.pool().slabs_in_use(), loader.pool().slab_count());
    const auto held = static_cast<std::int64_t>(hoard.size());
    hoard.clear();
    std::optional<Batch> next = loader.next();
    ASSERT_TRUE(next) << workers << " workers did not recover";
    EXPECT_EQ(next->index, held);
    EXPECT_EQ(IndexDataset::decode(next->data), static_cast<std::size_t>(held) * 2);
  }
}

// A loop that keeps the last batches it got (max_extra_slabs): the pool grows rather than take
// the workers' slabs, no held batch is ever written over, and past the bound next() is the clear
// error, not a wait.
TEST(BatchLoaderTest, KeptBatchesGrowThePoolUpToItsBoundAndAreNeverOverwritten) {
  for (const int workers : {0, 2}) {
    auto dataset = std::make_shared<ActiveDataset>(1000);
    LoaderOptions o;
    o.num_workers = workers;
    o.prefetch = 2;
    o.batch_size = 2;
    o.max_extra_slabs = 5;
    BatchLoader loader(dataset, std::make_shared<SequentialSampler>(1000), o);
    const int start = loader.pool().slab_count();
    std::vector<Batch> kept;
    try {
      for (int i = 0; i < 100; ++i) kept.push_back(*loader.next());
      FAIL() << workers << " workers: 100 batches kept from a pool bounded at "
             << loader.pool().max_slab_count();
    } catch (const LoaderError& e) {
      EXPECT_NE(std::string(e.what()).find("the pool grew by 5, its most"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(loader.pool().slab_count(), start + 5) << workers << " workers";
    EXPECT_EQ(static_cast<int>(kept.size()), start + 5) << workers << " workers";
    for (std::size_t b = 0; b < kept.size(); ++b)
      EXPECT_EQ(IndexDataset::decode(kept[b].data), b * 2) << "batch " << b << " was overwritten";
    kept.clear();
    EXPECT_TRUE(loader.next()) << workers << " workers did not recover";
  }
}

TEST(BatchLoaderTest, ALoopThatKeepsNoMoreThanTheSparesNeverGrowsThePool) {
  auto dataset = std::make_shared<ActiveDataset>(1000);
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 2;
  o.max_extra_slabs = 8;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(1000), o);
  std::optional<Batch> previous;
  while (auto batch = loader.next()) previous = std::move(batch);  // two alive at the hand-over
  EXPECT_EQ(loader.pool().slab_count(), slab_count(o));
}

TEST(BatchLoaderTest, TryNextNeverWaitsAndTakesEachBatchOnceItIsCollated) {
  auto dataset = std::make_shared<testing::GatedDataset>(16, /*first_gated=*/4);
  LoaderOptions lo;
  lo.num_workers = 2;
  lo.batch_size = 4;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(16), lo);
  testing::OpenOnExit open_at_exit{*dataset};
  std::optional<Batch> first = loader.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 0);
  EXPECT_FALSE(loader.try_next()) << "batch 1 is held back: nothing, at once";
  EXPECT_FALSE(loader.try_next());
  dataset->open();
  std::vector<std::int64_t> got;
  while (got.size() < 3) {  // each comes once collated, in order; none is skipped
    if (std::optional<Batch> batch = loader.try_next()) {
      for (std::int64_t i = 0; i < batch->size; ++i)
        EXPECT_EQ(IndexDataset::decode(batch->data + i * 32),
                  static_cast<std::size_t>(4 * batch->index + i));
      got.push_back(batch->index);
    } else {
      std::this_thread::yield();
    }
  }
  EXPECT_EQ(got, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_FALSE(loader.try_next()) << "the epoch's end";
  EXPECT_FALSE(loader.next());
}

TEST(BatchLoaderTest, TryNextWithoutWorkersLeavesTheLoadToNext) {
  LoaderOptions lo;
  lo.num_workers = 0;
  lo.batch_size = 4;
  BatchLoader loader(std::make_shared<IndexDataset>(8), std::make_shared<SequentialSampler>(8), lo);
  EXPECT_FALSE(loader.try_next()) << "the load would be the caller's own: it is next()'s";
  std::optional<Batch> batch = loader.next();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->index, 0);
}

}  // namespace
}  // namespace feedscope
