// BatchLoader's stream mode (sharded datasets), against an in-memory ShardedDataset whose sample
// values name their shard and position, so every test can say exactly which sample went where.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "loader/batch_loader.h"
#include "loader/sharded_dataset.h"

namespace feedscope {
namespace {

// Shard s holds sizes[s] samples; sample i of shard s is the float s * 1000 + i, label s. A sample
// listed in `bad` throws SampleError when read.
class CountingShards final : public ShardedDataset {
 public:
  explicit CountingShards(std::vector<std::size_t> sizes, std::set<float> bad = {})
      : sizes_(std::move(sizes)), bad_(std::move(bad)) {
    for (std::size_t s = 0; s < sizes_.size(); ++s) names_.push_back("shard-" + std::to_string(s));
  }
  const SampleSpec& spec() const override { return spec_; }
  std::int64_t num_classes() const override { return static_cast<std::int64_t>(sizes_.size()); }
  std::string name() const override { return "counting"; }
  std::size_t shard_count() const override { return sizes_.size(); }
  const std::string& shard_path(std::size_t shard) const override { return names_.at(shard); }
  std::unique_ptr<SampleStream> open_stream(std::vector<std::size_t> shards, const ShardPlan&, std::size_t,
                                            std::uint64_t) const override {
    return std::make_unique<Stream>(*this, std::move(shards));
  }

 private:
  struct Stream final : SampleStream {
    Stream(const CountingShards& d, std::vector<std::size_t> shards) : d(d), shards(std::move(shards)) {}
    std::optional<std::int64_t> next(std::span<std::byte> out, LoadContext&) override {
      while (cursor < shards.size() && position == d.sizes_[shards[cursor]]) ++cursor, position = 0;
      if (cursor == shards.size()) return std::nullopt;
      const std::size_t shard = shards[cursor];
      const float value = static_cast<float>(shard * 1000 + position++);
      if (d.bad_.count(value)) throw SampleError(position - 1, d.names_[shard], "planted bad sample");
      std::memcpy(out.data(), &value, sizeof value);
      return static_cast<std::int64_t>(shard);
    }
    const CountingShards& d;
    std::vector<std::size_t> shards;
    std::size_t cursor = 0, position = 0;
  };
  std::vector<std::size_t> sizes_;
  std::set<float> bad_;
  std::vector<std::string> names_;
  SampleSpec spec_{{1}, DType::float32};
};

struct Delivered {
  std::vector<std::vector<float>> batches;
  std::vector<float> all() const {
    std::vector<float> v;
    for (const auto& b : batches) v.insert(v.end(), b.begin(), b.end());
    return v;
  }
};

Delivered epoch(BatchLoader& loader) {
  Delivered d;
  while (std::optional<Batch> batch = loader.next()) {
    const auto* values = reinterpret_cast<const float*>(batch->data);
    d.batches.emplace_back(values, values + batch->size);
    for (std::int64_t i = 0; i < batch->size; ++i)
      EXPECT_EQ(batch->labels[i], static_cast<std::int64_t>(values[i]) / 1000);
    EXPECT_EQ(batch->index, static_cast<std::int64_t>(d.batches.size() - 1));
  }
  return d;
}

std::vector<float> every_sample(const std::vector<std::size_t>& sizes) {
  std::vector<float> v;
  for (std::size_t s = 0; s < sizes.size(); ++s)
    for (std::size_t i = 0; i < sizes[s]; ++i) v.push_back(static_cast<float>(s * 1000 + i));
  return v;
}

std::vector<float> sorted(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(BatchLoaderStreamTest, EverySampleOncePerEpochAcrossRanksAndWorkers) {
  const std::vector<std::size_t> sizes = {7, 13, 5, 9, 11, 3, 8};
  auto data = std::make_shared<CountingShards>(sizes);
  for (int workers : {0, 1, 3}) {
    for (std::uint64_t e : {0u, 1u}) {
      std::vector<float> seen;
      for (std::size_t rank = 0; rank < 2; ++rank) {
        ShardPlan plan;
        plan.rank = rank;
        plan.world_size = 2;
        plan.seed = 5;
        LoaderOptions o;
        o.num_workers = workers;
        o.batch_size = 4;
        BatchLoader loader(data, plan, o);
        loader.begin_epoch(e);
        const std::vector<float> mine = epoch(loader).all();
        seen.insert(seen.end(), mine.begin(), mine.end());
      }
      EXPECT_EQ(sorted(seen), every_sample(sizes)) << workers << " workers, epoch " << e;
    }
  }
}

TEST(BatchLoaderStreamTest, BatchesComeRoundRobinFromEachWorkersShards) {
  // No shuffle: stream 0 reads shards 0 and 2, stream 1 shards 1 and 3, 10 samples each.
  auto data = std::make_shared<CountingShards>(std::vector<std::size_t>{10, 10, 10, 10});
  ShardPlan plan;
  plan.shuffle = false;
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 4;
  BatchLoader loader(data, plan, o);
  const Delivered d = epoch(loader);
  ASSERT_EQ(d.batches.size(), 10u);  // 20 samples per stream: 4 + 4 + 4 + 4 + 4
  EXPECT_EQ(d.batches[0], (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(d.batches[1], (std::vector<float>{1000, 1001, 1002, 1003}));
  EXPECT_EQ(d.batches[2], (std::vector<float>{4, 5, 6, 7}));
  // A batch runs on across the shard boundary of its stream: 8, 9, then shard 2.
  EXPECT_EQ(d.batches[4], (std::vector<float>{8, 9, 2000, 2001}));
  EXPECT_EQ(d.batches[9], (std::vector<float>{3006, 3007, 3008, 3009}));
}

TEST(BatchLoaderStreamTest, DropLastDropsEachStreamsPartialBatch) {
  auto data = std::make_shared<CountingShards>(std::vector<std::size_t>{10, 6});
  ShardPlan plan;
  plan.shuffle = false;
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 4;
  o.drop_last = true;
  BatchLoader loader(data, plan, o);
  const Delivered d = epoch(loader);
  ASSERT_EQ(d.batches.size(), 3u);  // stream 0: 4 + 4 (2 dropped), stream 1: 4 (2 dropped)
  for (const auto& b : d.batches) EXPECT_EQ(b.size(), 4u);
}

TEST(BatchLoaderStreamTest, ShardOrderIsSeededPerEpochAndSplitRanksThenWorkers) {
  ShardPlan plan;
  plan.seed = 3;
  const auto a0 = stream_shards(20, plan, 0, 1, 0);
  EXPECT_EQ(a0, stream_shards(20, plan, 0, 1, 0));
  EXPECT_NE(a0, stream_shards(20, plan, 0, 1, 1));
  plan.seed = 4;
  EXPECT_NE(a0, stream_shards(20, plan, 0, 1, 0));
  // Rank 1 of 2 takes every other shard of the epoch's order; its worker 1 of 2 every other of those.
  plan.world_size = 2;
  plan.rank = 1;
  plan.seed = 3;
  const auto rank1 = stream_shards(20, plan, 0, 1, 0);
  ASSERT_EQ(rank1.size(), 10u);
  for (std::size_t k = 0; k < rank1.size(); ++k) EXPECT_EQ(rank1[k], a0[2 * k + 1]);
  const auto worker1 = stream_shards(20, plan, 1, 2, 0);
  ASSERT_EQ(worker1.size(), 5u);
  for (std::size_t k = 0; k < worker1.size(); ++k) EXPECT_EQ(worker1[k], rank1[2 * k + 1]);
}

TEST(BatchLoaderStreamTest, SkippedSamplesAreCountedAndTheStreamGoesOn) {
  const std::vector<std::size_t> sizes = {10, 10, 10};
  auto data = std::make_shared<CountingShards>(sizes, std::set<float>{3, 1005});
  for (int workers : {0, 2}) {
    ShardPlan plan;
    LoaderOptions o;
    o.num_workers = workers;
    o.batch_size = 4;
    o.bad_sample = BadSamplePolicy::skip;
    o.max_bad_ratio = 0.5;
    BatchLoader loader(data, plan, o);
    std::vector<float> expected = every_sample(sizes);
    std::erase(expected, 3.0f);
    std::erase(expected, 1005.0f);
    EXPECT_EQ(sorted(epoch(loader).all()), expected) << workers << " workers";
    const DataErrors errors = loader.data_errors();
    EXPECT_EQ(errors.bad, 2u);
    EXPECT_EQ(errors.attempted, 30u);
    ASSERT_EQ(errors.examples.size(), 2u);
  }
}

TEST(BatchLoaderStreamTest, FailPolicyStopsAtTheBadSample) {
  auto data = std::make_shared<CountingShards>(std::vector<std::size_t>{10, 10}, std::set<float>{1002});
  for (int workers : {0, 2}) {
    LoaderOptions o;
    o.num_workers = workers;
    o.batch_size = 4;
    BatchLoader loader(data, ShardPlan{}, o);
    try {
      epoch(loader);
      FAIL() << "no error at " << workers << " workers";
    } catch (const SampleError& e) {
      EXPECT_NE(std::string(e.what()).find("shard-1"), std::string::npos) << e.what();
    }
  }
}

TEST(BatchLoaderStreamTest, AnAbandonedEpochRestartsWhole) {
  const std::vector<std::size_t> sizes = {30, 30, 30};
  auto data = std::make_shared<CountingShards>(sizes);
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 4;
  o.prefetch = 3;
  BatchLoader loader(data, ShardPlan{}, o);
  ASSERT_TRUE(loader.next());
  ASSERT_TRUE(loader.next());
  loader.begin_epoch(1);
  EXPECT_EQ(sorted(epoch(loader).all()), every_sample(sizes));
  loader.begin_epoch(2);
  EXPECT_EQ(sorted(epoch(loader).all()), every_sample(sizes));
}

TEST(BatchLoaderStreamTest, ARankWithoutAShardSaysWhy) {
  auto data = std::make_shared<CountingShards>(std::vector<std::size_t>{4, 4});
  ShardPlan plan;
  plan.world_size = 3;
  plan.rank = 2;
  BatchLoader loader(data, plan, LoaderOptions{});
  EXPECT_NE(loader.empty_epoch_reason().find("rank 2 of 3 gets no shard"), std::string::npos);
  EXPECT_FALSE(loader.next());
  plan.rank = 1;
  BatchLoader other(data, plan, LoaderOptions{});
  EXPECT_EQ(other.empty_epoch_reason(), "");
}

}  // namespace
}  // namespace feedscope
