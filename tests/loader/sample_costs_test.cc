#include "loader/sample_costs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "loader/batch_loader.h"
#include "loader/index_sampler.h"
#include "tests/loader/index_dataset.h"

namespace feedscope {
namespace {

constexpr std::int64_t kMs = 1'000'000;

TEST(SampleCostRecorderTest, BucketsAreWithinAnEighthOfTheirBound) {
  for (const std::int64_t ns : {1LL, 7LL, 999LL, 1'000'000LL, 123'456'789LL, 60'000'000'000LL}) {
    const int b = SampleCostSnapshot::bucket_of(ns);
    EXPECT_LE(SampleCostSnapshot::bucket_low_ns(b), static_cast<double>(ns)) << ns;
    EXPECT_GT(SampleCostSnapshot::bucket_low_ns(b + 1), static_cast<double>(ns)) << ns;
    EXPECT_LE(SampleCostSnapshot::bucket_low_ns(b + 1) / SampleCostSnapshot::bucket_low_ns(b), 1.125 + 1e-9);
  }
}

// 990 samples at 1 ms and 10 at 100 ms, over two workers: the tail is measured, the slowest named
// once each, whatever the epoch that saw them slowest.
TEST(SampleCostRecorderTest, MergesWorkersIntoQuantilesSharesAndTheSlowest) {
  SampleCostRecorder r(2);
  for (std::size_t i = 0; i < 1000; ++i) r.record(static_cast<int>(i % 2), i, i % 100 == 7 ? 100 * kMs : kMs);
  r.record(0, 7, 90 * kMs);  // a second epoch: sample 7 again, a little faster
  const SampleCostSnapshot s = r.snapshot();
  EXPECT_EQ(s.count, 1001u);
  EXPECT_NEAR(s.quantile_ms(0.5), 1.0, 0.13);
  EXPECT_NEAR(s.quantile_ms(0.9), 1.0, 0.13);
  EXPECT_GT(s.quantile_ms(0.995), 80.0);
  EXPECT_DOUBLE_EQ(s.quantile_ms(1.0), 100.0);
  // The slowest 1 % (10 samples): 1 s of the 2.08 s in all.
  EXPECT_NEAR(s.slowest_share(0.01), 1000.0 / 2080, 0.02);
  EXPECT_EQ(s.count_at_least(4 * kMs), 11u);
  ASSERT_EQ(s.slowest.size(), 20u);
  EXPECT_EQ(s.slowest[0].ns, 100 * kMs);
  for (std::size_t k = 0; k < 10; ++k) EXPECT_EQ(s.slowest[k].index % 100, 7u) << k;
  EXPECT_EQ(std::count_if(s.slowest.begin(), s.slowest.end(), [](const SlowSampleCost& c) { return c.index == 7; }), 1);
}

// A dataset where sample kSlow takes 40 ms of spinning and every other one nothing: its cost is
// set, not measured against a threshold.
class OneSlowSample final : public Dataset {
 public:
  static constexpr std::size_t kSlow = 37;
  std::size_t size() const override { return inner_.size(); }
  const SampleSpec& spec() const override { return inner_.spec(); }
  std::int64_t num_classes() const override { return 5; }
  std::int64_t load(std::size_t index, std::span<std::byte> out, LoadContext& ctx) const override {
    if (index == kSlow)
      for (const std::int64_t until = now_ns() + 40 * kMs; now_ns() < until;) {
      }
    return inner_.load(index, out, ctx);
  }
  std::string describe(std::size_t index) const override { return inner_.describe(index); }
  std::string name() const override { return "one-slow"; }

 private:
  testing::IndexDataset inner_{256};
};

TEST(SampleCostRecorderTest, TheLoaderRecordsEverySampleAndNamesTheSlowest) {
  auto dataset = std::make_shared<OneSlowSample>();
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 16;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(dataset->size()), o);
  std::size_t samples = 0;
  while (auto batch = loader.next()) samples += static_cast<std::size_t>(batch->size);
  const SampleCostSnapshot s = loader.sample_costs();
  EXPECT_EQ(s.count, samples);
  const auto slow = std::find_if(s.slowest.begin(), s.slowest.end(),
                                 [](const SlowSampleCost& c) { return c.index == OneSlowSample::kSlow; });
  ASSERT_NE(slow, s.slowest.end());
  EXPECT_GE(slow->ns, 40 * kMs);
  EXPECT_EQ(slow->file.file, "/data/part-37.bin");
  EXPECT_LE(s.wait_on_slowest_ns, s.wait_ns);
}

}  // namespace
}  // namespace feedscope
