// A loader whose worker count and prefetch change while it runs: set_setting() by hand, and the
// AutoTuner's moves under kAuto.
#include "loader/batch_loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include "tests/loader/index_dataset.h"

namespace feedscope {
namespace loader_autotune_test {

using testing::IndexDataset;

// One epoch as the training loop sees it: every sample's index (read from its bytes) and label,
// in delivery order.
struct Epoch {
  std::vector<std::size_t> samples;
  std::vector<std::int64_t> labels;
  bool operator==(const Epoch&) const = default;
};

void take(const Batch& b, Epoch& e) {
  const std::size_t bytes = IndexDataset::kWords * 8;
  for (std::int64_t i = 0; i < b.size; ++i) {
    e.samples.push_back(IndexDataset::decode(b.data + static_cast<std::size_t>(i) * bytes));
    e.labels.push_back(b.labels[i]);
  }
}

std::shared_ptr<IndexDataset> dataset() { return std::make_shared<IndexDataset>(997); }
std::shared_ptr<RandomSampler> order() { return std::make_shared<RandomSampler>(997, 11); }

// Two epochs at 0 workers: the order every other setting must give.
std::vector<Epoch> reference(bool prefetch_next_epoch) {
  LoaderOptions o;
  o.num_workers = 0;
  o.batch_size = 16;
  o.prefetch_next_epoch = prefetch_next_epoch;
  BatchLoader loader(dataset(), order(), o);
  std::vector<Epoch> out(2);
  for (std::uint64_t e = 0; e < 2; ++e) {
    if (e > 0) loader.begin_epoch(e);
    while (auto b = loader.next()) take(*b, out[e]);
  }
  return out;
}

class SetSettingMidEpoch : public ::testing::TestWithParam<bool> {};

TEST_P(SetSettingMidEpoch, KeepsEverySampleWhereItWas) {
  LoaderOptions o;
  o.num_workers = 1;
  o.batch_size = 16;
  o.prefetch = 2;
  o.prefetch_next_epoch = GetParam();
  o.autotune.max_workers = 4;  // room to move: 4 workers x prefetch 2
  BatchLoader loader(dataset(), order(), o);
  EXPECT_EQ(loader.capacity().most, (LoaderSetting{4, 2}));
  // Moves at batches of either epoch, up and down, prefetch too.
  const std::map<int, LoaderSetting> moves = {{3, {3, 2}},  {9, {1, 1}},  {17, {4, 2}},
                                              {30, {2, 4}}, {50, {1, 8}}, {70, {4, 1}},
                                              {90, {2, 2}}, {101, {3, 2}}};
  std::vector<Epoch> got(2);
  int delivered = 0;
  for (std::uint64_t e = 0; e < 2; ++e) {
    if (e > 0) loader.begin_epoch(e);
    while (auto b = loader.next()) {
      take(*b, got[e]);
      if (auto it = moves.find(++delivered); it != moves.end()) {
        loader.set_setting(it->second);
        EXPECT_EQ(loader.setting(), it->second);
      }
    }
  }
  ASSERT_GT(delivered, 101);
  EXPECT_EQ(got, reference(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(PrefetchNextEpoch, SetSettingMidEpoch, ::testing::Bool());

// Counts the loads running at once; with a goal, each load waits (bounded) until that many run.
class ConcurrencyDataset final : public Dataset {
 public:
  ConcurrencyDataset() { spec_ = SampleSpec{{1}, DType::float32}; }
  std::size_t size() const override { return 512; }
  const SampleSpec& spec() const override { return spec_; }
  std::int64_t num_classes() const override { return 2; }
  std::int64_t load(std::size_t index, std::span<std::byte>, LoadContext&) const override {
    std::unique_lock lock(mutex_);
    const int now = ++running_;
    peak = std::max(peak.load(), now);
    cv_.notify_all();
    if (goal > 0)
      cv_.wait_for(lock, std::chrono::seconds(5), [&] { return peak >= goal; });
    --running_;
    return static_cast<std::int64_t>(index % 2);
  }
  std::string describe(std::size_t) const override { return "concurrency"; }
  std::string name() const override { return "concurrency"; }

  std::atomic<int> goal{0};
  mutable std::atomic<int> peak{0};

 private:
  SampleSpec spec_;
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  mutable int running_ = 0;
};

TEST(SetSetting, MoreWorkersLoadAtOnceAndFewerDoNot) {
  auto d = std::make_shared<ConcurrencyDataset>();
  LoaderOptions o;
  o.num_workers = 1;
  o.batch_size = 4;
  o.autotune.max_workers = 3;
  BatchLoader loader(d, std::make_shared<SequentialSampler>(d->size()), o);
  while (loader.next()) {
  }
  EXPECT_EQ(d->peak, 1);

  loader.set_setting({3, 2});
  d->goal = 3;  // each load waits for three at once: only three workers get there
  loader.begin_epoch(1);
  while (loader.next()) {
  }
  EXPECT_EQ(d->peak, 3);

  loader.set_setting({1, 2});
  d->goal = 0;
  loader.begin_epoch(2);  // drains the jobs the three workers started
  d->peak = 0;
  while (loader.next()) {
  }
  EXPECT_EQ(d->peak, 1);
}

TEST(SetSetting, OutOfBoundsThrowsAndAutoOwnsItsSetting) {
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 8;
  BatchLoader fixed(dataset(), order(), o);
  EXPECT_EQ(fixed.capacity().most, (LoaderSetting{2, 2}));
  EXPECT_THROW(fixed.set_setting({3, 2}), std::invalid_argument);
  EXPECT_THROW(fixed.set_setting({0, 2}), std::invalid_argument);
  EXPECT_THROW(fixed.set_setting({2, 3}), std::invalid_argument);
  fixed.set_setting({1, 4});  // the same slabs, spread otherwise
  EXPECT_EQ(fixed.setting(), (LoaderSetting{1, 4}));
  EXPECT_FALSE(fixed.autotuned());
  EXPECT_TRUE(fixed.autotune_moves().empty());

  o.num_workers = kAuto;
  BatchLoader tuned(dataset(), order(), o);
  EXPECT_TRUE(tuned.autotuned());
  EXPECT_EQ(tuned.setting().num_workers, 1);
  EXPECT_THROW(tuned.set_setting({1, 2}), LoaderError);
}

// The loader's window clock: every reading 1 ms after the last, so each next() waits 1 ms of the
// 2 ms a batch takes; the loop is 50 % stalled at any setting.
std::atomic<std::int64_t> fake_ns{0};
std::int64_t fake_clock() noexcept { return fake_ns += 1'000'000; }

TEST(AutoLoader, TriesAWorkerForAStalledLoopAndGoesBackWithoutAGain) {
  LoaderOptions o;
  o.num_workers = kAuto;
  o.batch_size = 4;
  o.autotune.max_workers = 2;
  o.autotune.window_s = 0.02;  // 10 batches
  o.autotune.clock = &fake_clock;
  o.autotune.idle_cores = [] { return std::optional<double>(2.0); };
  BatchLoader loader(dataset(), order(), o);
  EXPECT_EQ(loader.setting(), (LoaderSetting{1, 2}));
  Epoch got;
  while (auto b = loader.next()) take(*b, got);
  EXPECT_EQ(got, reference(false)[0]);

  const std::vector<TunerMove>& moves = loader.autotune_moves();
  ASSERT_GE(moves.size(), 2u);
  EXPECT_EQ(moves[0].from, (LoaderSetting{1, 2}));
  EXPECT_EQ(moves[0].to, (LoaderSetting{2, 2}));
  EXPECT_NEAR(moves[0].before.stall, 0.5, 0.01);
  EXPECT_NEAR(moves[0].before.batches_per_s, 500, 5);
  EXPECT_FALSE(moves[0].kept);
  EXPECT_EQ(moves[1].to, (LoaderSetting{1, 2}));
  EXPECT_EQ(moves[1].why.rfind("back:", 0), 0u) << moves[1].why;
  EXPECT_EQ(moves.size(), 2u) << "the refused move was tried again";
  EXPECT_EQ(loader.setting(), (LoaderSetting{1, 2}));
}

}  // namespace loader_autotune_test
}  // namespace feedscope
