// feedscope::Loader through its public header alone, linked as a user links it (feedscope::loader):
// run's datasets and a torch dataset of the user's, epochs, errors that name the option, batches
// that hold their slab, and a Session that sees inside the loader.
#include <feedscope/loader.h>
#include <feedscope/session.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"

namespace {

// Sample i is a 2x3 tensor filled with i; its label is i % 5.
class Numbered : public torch::data::datasets::Dataset<Numbered> {
 public:
  explicit Numbered(std::size_t n) : n_(n) {}
  torch::data::Example<> get(std::size_t index) override {
    return {torch::full({2, 3}, static_cast<float>(index)),
            torch::tensor(static_cast<std::int64_t>(index % 5))};
  }
  torch::optional<std::size_t> size() const override { return n_; }

 private:
  std::size_t n_;
};

// The samples an epoch delivered, by the value each was filled with.
std::vector<int> epoch_of(feedscope::Loader& loader) {
  std::vector<int> seen;
  for (auto& batch : loader) {
    EXPECT_EQ(batch.data.dim(), 3);
    EXPECT_EQ(batch.target.scalar_type(), torch::kInt64);
    for (std::int64_t i = 0; i < batch.data.size(0); ++i) {
      const int value = static_cast<int>(batch.data[i][0][0].item<float>());
      EXPECT_EQ(batch.target[i].item<std::int64_t>(), value % 5);
      seen.push_back(value);
    }
  }
  return seen;
}

TEST(LoaderTest, RunsDatasetsComeAsTensorsOfTheirShape) {
  feedscope::Loader loader({.dataset = "synthetic:3x8x8", .batch_size = 4, .num_workers = 2,
                            .more = {{"synthetic_samples", "10"}}});
  EXPECT_EQ(loader.size(), std::optional<std::size_t>(10));
  EXPECT_EQ(loader.batches_per_epoch(), std::optional<std::int64_t>(3));
  std::vector<std::int64_t> sizes;
  for (auto& batch : loader) {
    EXPECT_EQ(batch.data.sizes().slice(1), torch::IntArrayRef({3, 8, 8}));
    EXPECT_EQ(batch.data.scalar_type(), torch::kFloat32);
    EXPECT_EQ(batch.target.sizes(), torch::IntArrayRef({batch.data.size(0)}));
    sizes.push_back(batch.data.size(0));
  }
  EXPECT_EQ(sizes, (std::vector<std::int64_t>{4, 4, 2}));
}

TEST(LoaderTest, ATorchDatasetIsLoadedByTheWorkersOncePerEpochInAnOrderOfItsEpoch) {
  feedscope::Loader loader(Numbered(23), {.batch_size = 4, .num_workers = 3, .shuffle = true,
                                          .seed = 7, .num_classes = 5});
  const std::vector<int> first = epoch_of(loader);
  const std::vector<int> second = epoch_of(loader);
  std::vector<int> all(23);
  for (int i = 0; i < 23; ++i) all[static_cast<std::size_t>(i)] = i;
  for (const auto* epoch : {&first, &second}) {
    std::vector<int> sorted = *epoch;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, all);
  }
  EXPECT_NE(first, second);  // each epoch its own order
  loader.set_epoch(0);
  EXPECT_EQ(epoch_of(loader), first);  // a function of (seed, epoch)
}

TEST(LoaderTest, ABadOptionIsRefusedNamingItAndWhoSetIt) {
  const auto message_of = [](auto make) {
    try {
      make();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string m = message_of([] { feedscope::Loader l({.dataset = "synthetic:3x8x8", .batch_size = 0}); });
  EXPECT_NE(m.find("batch_size"), std::string::npos) << m;
  EXPECT_NE(m.find("feedscope::Loader::Options"), std::string::npos) << m;
  m = message_of([] { feedscope::Loader l({.dataset = "images:/no/such/folder"}); });
  EXPECT_NE(m.find("/no/such/folder"), std::string::npos) << m;
  m = message_of([] { feedscope::Loader l({.dataset = "synthetic:3x8x8", .more = {{"no_such_key", "1"}}}); });
  EXPECT_NE(m.find("no_such_key"), std::string::npos) << m;
  m = message_of([] { feedscope::Loader l(Numbered(4), {.dataset = "synthetic:3x8x8"}); });
  EXPECT_NE(m.find("beside a torch dataset"), std::string::npos) << m;
  m = message_of([] { feedscope::Loader l({}); });
  EXPECT_NE(m.find("dataset: missing"), std::string::npos) << m;
}

TEST(LoaderTest, AGpuThatIsNotThereIsNamed) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is here";
  try {
    feedscope::Loader l({.dataset = "synthetic:3x8x8", .device = "cuda"});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("device: 'cuda'"), std::string::npos) << e.what();
  }
}

TEST(LoaderTest, BatchesKeptPastTheBoundAreRefusedNotOverwritten) {
  feedscope::Loader loader({.dataset = "synthetic:1x4x4", .batch_size = 2, .num_workers = 1,
                            .max_held_batches = 4, .more = {{"synthetic_samples", "64"}}});
  std::vector<torch::Tensor> kept;
  try {
    for (auto& batch : loader) kept.push_back(batch.data);
    FAIL() << "kept " << kept.size() << " batches without an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("clone()"), std::string::npos) << e.what();
  }
  // What was kept is still each batch's own: sample k of the epoch is synthetic sample k's.
  std::set<const void*> memory;
  for (const torch::Tensor& t : kept) memory.insert(t.data_ptr());
  EXPECT_EQ(memory.size(), kept.size());
}

TEST(LoaderTest, ASessionItJoinsSeesInsideTheLoader) {
  feedscope::testing::TempDir dir;
  {
    feedscope::Session fs({.report_dir = dir.path().string(), .sample_hz = 0, .print = false});
    feedscope::Loader loader(Numbered(64), {.batch_size = 8, .num_workers = 2});
    loader.attach(fs);
    for (auto& batch : fs.wrap(loader)) {
      auto step = fs.step(batch.data.size(0));
    }
    EXPECT_EQ(fs.finish().bottleneck.empty(), false);
  }
  const nlohmann::json report = nlohmann::json::parse(std::ifstream(dir.path() / "report.json"));
  EXPECT_EQ(report["throughput"]["samples"], 64);
  EXPECT_GT(report["stages"]["read"]["busy_s"].get<double>(), 0);     // the dataset's get()
  EXPECT_GT(report["stages"]["collate"]["busy_s"].get<double>(), 0);  // into the slab
  EXPECT_EQ(report["config"]["batch_size"], 8);
}

}  // namespace
