#include "loader/torch_adapter.h"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <set>

namespace feedscope {
namespace {

// A user's own torch::data dataset: sample i is a 2x3 float tensor filled with i, label i % 4;
// one index may be made to return the wrong shape or a float target.
class FilledDataset : public torch::data::datasets::Dataset<FilledDataset> {
 public:
  explicit FilledDataset(std::size_t n) : n_(n) {}
  torch::data::Example<> get(std::size_t index) override {
    if (index == wrong_shape) return {torch::zeros({3, 2}), torch::tensor(std::int64_t{0})};
    if (index == float_target) return {torch::zeros({2, 3}), torch::tensor(0.5)};
    return {torch::full({2, 3}, static_cast<float>(index)),
            torch::tensor(static_cast<std::int64_t>(index % 4))};
  }
  torch::optional<std::size_t> size() const override { return n_; }

  std::size_t wrong_shape = static_cast<std::size_t>(-1);
  std::size_t float_target = static_cast<std::size_t>(-1);

 private:
  std::size_t n_;
};

using Adapter = TorchDatasetAdapter<FilledDataset>;

TEST(TorchAdapterTest, LearnsTheSpecFromSampleZeroAndLoadsEverySampleThroughTheBatchLoader) {
  auto dataset = std::make_shared<Adapter>(FilledDataset(37), Adapter::Options{4, false, "filled"});
  EXPECT_EQ(dataset->spec().to_string(), "2x3 float32");
  EXPECT_EQ(dataset->size(), 37u);
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 8;
  BatchLoader loader(dataset, std::make_shared<RandomSampler>(37, 1), o);
  std::shared_ptr<const PinnedPool> pool = loader.shared_pool();
  std::multiset<std::int64_t> seen;
  while (auto batch = loader.next()) {
    const std::int64_t size = batch->size;
    const BatchTensors t = batch_tensors(std::move(*batch), dataset->spec());
    ASSERT_EQ(t.data.sizes(), (std::vector<std::int64_t>{size, 2, 3}));
    ASSERT_EQ(t.labels.sizes(), (std::vector<std::int64_t>{size}));
    for (std::int64_t i = 0; i < size; ++i) {
      const torch::Tensor sample = t.data[i];
      const auto index = static_cast<std::int64_t>(sample[0][0].item<float>());
      EXPECT_TRUE(torch::equal(sample, torch::full({2, 3}, static_cast<float>(index))));
      EXPECT_EQ(t.labels[i].item<std::int64_t>(), index % 4);
      seen.insert(index);
    }
  }
  ASSERT_EQ(seen.size(), 37u);
  EXPECT_EQ(std::set<std::int64_t>(seen.begin(), seen.end()).size(), 37u) << "a sample came twice";
}

TEST(TorchAdapterTest, BatchTensorsViewTheSlabAndKeepItUntilTheLastTensorGoes) {
  auto dataset = std::make_shared<Adapter>(FilledDataset(16));
  LoaderOptions o;
  o.num_workers = 0;
  o.batch_size = 4;
  std::shared_ptr<const PinnedPool> pool;
  torch::Tensor labels;
  {
    BatchLoader loader(dataset, std::make_shared<SequentialSampler>(16), o);
    pool = loader.shared_pool();
    std::optional<Batch> batch = loader.next();
    const std::byte* slab = batch->data;
    BatchTensors t = batch_tensors(std::move(*batch), dataset->spec());
    EXPECT_EQ(t.data.data_ptr(), static_cast<const void*>(slab)) << "a view, not a copy";
    EXPECT_EQ(pool->slabs_in_use(), 1);
    labels = t.labels;
  }
  EXPECT_EQ(pool->slabs_in_use(), 1) << "the labels tensor still holds the slab";
  EXPECT_EQ(labels[3].item<std::int64_t>(), 3);
  labels = torch::Tensor();
  EXPECT_EQ(pool->slabs_in_use(), 0);
}

TEST(TorchAdapterTest, SamplesThatDoNotFitAreSampleErrorsNamingTheIndex) {
  FilledDataset inner(20);
  inner.wrong_shape = 7;
  inner.float_target = 9;
  auto dataset = std::make_shared<Adapter>(inner, Adapter::Options{4, true, "mine"});
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 5;
  o.bad_sample = BadSamplePolicy::skip;
  o.max_bad_ratio = 1.0;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(20), o);
  std::int64_t samples = 0;
  while (auto batch = loader.next()) samples += batch->size;
  EXPECT_EQ(samples, 18);
  const DataErrors errors = loader.data_errors();
  ASSERT_EQ(errors.examples.size(), 2u);
  EXPECT_EQ(errors.examples[0].source, "mine#7");
  EXPECT_NE(errors.examples[0].message.find("3x2 Float; every sample must be 2x3 float32"),
            std::string::npos) << errors.examples[0].message;
  EXPECT_NE(errors.examples[1].message.find("one integer class label"), std::string::npos)
      << errors.examples[1].message;
}

TEST(TorchAdapterTest, UnsupportedFirstSampleIsADatasetError) {
  class Doubles : public torch::data::datasets::Dataset<Doubles> {
   public:
    torch::data::Example<> get(std::size_t) override {
      return {torch::zeros({4}, torch::kFloat64), torch::tensor(std::int64_t{0})};
    }
    torch::optional<std::size_t> size() const override { return 3; }
  };
  try {
    TorchDatasetAdapter<Doubles> adapter{Doubles()};
    FAIL() << "float64 data accepted";
  } catch (const DatasetError& e) {
    EXPECT_NE(std::string(e.what()).find("allowed: float32, uint8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace feedscope
