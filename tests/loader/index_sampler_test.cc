#include "loader/index_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <numeric>
#include <sstream>

#include "tests/support/process.h"
#include "tests/support/reference_python.h"

namespace feedscope {
namespace {

TEST(IndexSamplerTest, SequentialIsTheIdentity) {
  const auto indices = SequentialSampler(5).epoch_indices(3);
  EXPECT_EQ(indices, (std::vector<std::size_t>{0, 1, 2, 3, 4}));
}

TEST(IndexSamplerTest, RandomIsAPermutationReproducibleFromSeedAndEpoch) {
  const RandomSampler a(1000, 11), b(1000, 11), c(1000, 12);
  const auto e0 = a.epoch_indices(0);
  EXPECT_EQ(e0, b.epoch_indices(0)) << "same seed, same epoch, same order";
  EXPECT_NE(e0, a.epoch_indices(1)) << "a new epoch reshuffles";
  EXPECT_NE(e0, c.epoch_indices(0)) << "another seed, another order";
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::size_t> expected(1000);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(sorted, expected);
}

TEST(IndexSamplerTest, RandomOrderIsPinnedAcrossPlatforms) {
  // Our own Fisher-Yates over mt19937_64 (fully specified by the standard): this exact order must
  // never change silently, or runs stop being reproducible across releases.
  EXPECT_EQ(RandomSampler(6, 1).epoch_indices(0), (std::vector<std::size_t>{2, 3, 0, 4, 5, 1}));
}

using Indices = std::vector<std::size_t>;

TEST(DistributedSamplerTest, MatchesPyTorchWithoutShuffle) {
  // torch.utils.data.DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False):
  // pads with 0, 1 to 12 indices, then strides by 3.
  EXPECT_EQ(DistributedSampler(10, 0, 3, false, 0, false).epoch_indices(0), (Indices{0, 3, 6, 9}));
  EXPECT_EQ(DistributedSampler(10, 1, 3, false, 0, false).epoch_indices(0), (Indices{1, 4, 7, 0}));
  EXPECT_EQ(DistributedSampler(10, 2, 3, false, 0, false).epoch_indices(0), (Indices{2, 5, 8, 1}));
  // drop_last cuts to 9: index 9 is nobody's this epoch.
  EXPECT_EQ(DistributedSampler(10, 0, 3, false, 0, true).epoch_indices(0), (Indices{0, 3, 6}));
  EXPECT_EQ(DistributedSampler(10, 2, 3, false, 0, true).epoch_indices(0), (Indices{2, 5, 8}));
}

TEST(DistributedSamplerTest, PadsByRepeatingWhenRanksOutnumberSamples) {
  // PyTorch repeats the whole list as often as needed: 0 1 0 1 0 over 5 ranks.
  for (std::size_t r = 0; r < 5; ++r) {
    const DistributedSampler s(2, r, 5, false, 0, false);
    EXPECT_EQ(s.num_samples(), 1u);
    EXPECT_EQ(s.epoch_indices(0), (Indices{r % 2}));
    EXPECT_TRUE(DistributedSampler(2, r, 5, false, 0, true).epoch_indices(0).empty());
  }
}

TEST(DistributedSamplerTest, RanksCoverThePermutationWithPyTorchCounts) {
  for (std::size_t n : {0u, 1u, 7u, 100u, 101u}) {
    for (std::size_t world : {1u, 2u, 3u, 8u}) {
      for (bool drop_last : {false, true}) {
        std::map<std::size_t, int> seen;
        std::size_t total = 0;
        for (std::size_t r = 0; r < world; ++r) {
          const DistributedSampler s(n, r, world, true, 9, drop_last);
          const Indices mine = s.epoch_indices(4);
          ASSERT_EQ(mine.size(), s.num_samples()) << "every rank the same count";
          for (std::size_t i : mine) ++seen[i];
          total += mine.size();
        }
        const std::size_t expect_total =
            drop_last ? n / world * world : (n + world - 1) / world * world;
        EXPECT_EQ(total, expect_total) << n << " samples, world " << world;
        if (drop_last) {
          for (const auto& [i, c] : seen) EXPECT_EQ(c, 1) << "no repeats with drop_last";
        } else {
          EXPECT_EQ(seen.size(), n) << "the union is the dataset";
          std::size_t repeats = 0;
          for (const auto& [i, c] : seen) repeats += static_cast<std::size_t>(c - 1);
          EXPECT_EQ(repeats, expect_total - n) << "padding is exactly what evens the split";
        }
        for (const auto& [i, c] : seen) EXPECT_LT(i, n);
      }
    }
  }
}

TEST(DistributedSamplerTest, ShuffleIsSharedAcrossRanksAndSeededWithSeedPlusEpoch) {
  const DistributedSampler r0(50, 0, 2, true, 3, false), r1(50, 1, 2, true, 3, false);
  EXPECT_EQ(r0.epoch_indices(1), DistributedSampler(50, 0, 2, true, 3, false).epoch_indices(1));
  EXPECT_NE(r0.epoch_indices(1), r0.epoch_indices(2)) << "a new epoch reshuffles";
  // PyTorch seeds its generator with seed + epoch, so (seed 4, epoch 0) is (seed 3, epoch 1).
  EXPECT_EQ(DistributedSampler(50, 0, 2, true, 4, false).epoch_indices(0), r0.epoch_indices(1));
  // Interleaving the ranks rebuilds one permutation shared by both.
  Indices merged;
  const Indices a = r0.epoch_indices(7), b = r1.epoch_indices(7);
  for (std::size_t i = 0; i < a.size(); ++i) merged.insert(merged.end(), {a[i], b[i]});
  EXPECT_EQ(merged, torch_randperm(50, 3 + 7));
  EXPECT_NE(merged, SequentialSampler(50).epoch_indices(0));
}

TEST(DistributedSamplerTest, EveryRankGetsTheSamplesPyTorchsSamplerGivesIt) {
  // Fixed values from torch 1.13: torch.randperm(10, generator=torch.Generator().manual_seed(0)).
  EXPECT_EQ(torch_randperm(10, 0), (Indices{4, 1, 7, 5, 3, 9, 0, 8, 6, 2}));
  const std::string python = testing::reference_python();
  if (!std::filesystem::exists(python)) GTEST_SKIP() << "no " << python;
  // Every rank of DistributedSampler over a few sizes, seeds, epochs and drop_last settings.
  const auto r = testing::run_process({python, "-c", R"(
import sys
try:
    from torch.utils.data import DistributedSampler
except ImportError:
    sys.exit(77)
for n, world, seed, epoch, drop in [(10, 3, 0, 0, False), (50, 4, 7, 3, False), (1000, 8, 123456789012, 5, True),
                                     (7, 2, 42, 1, True), (3, 5, 1, 0, False)]:
    for rank in range(world):
        s = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=seed, drop_last=drop)
        s.set_epoch(epoch)
        print(n, world, seed, epoch, int(drop), rank, *list(s))
)"});
  if (r.exit_code == 77) GTEST_SKIP() << "torch is not installed for " << python;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int checked = 0;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::size_t n = 0, world = 0, rank = 0, v = 0;
    std::uint64_t seed = 0, epoch = 0;
    int drop = 0;
    f >> n >> world >> seed >> epoch >> drop >> rank;
    Indices theirs;
    while (f >> v) theirs.push_back(v);
    EXPECT_EQ(DistributedSampler(n, rank, world, true, seed, drop != 0).epoch_indices(epoch), theirs) << line;
    ++checked;
  }
  EXPECT_EQ(checked, 3 + 4 + 8 + 2 + 5);
}

TEST(DistributedSamplerTest, RejectsBadRankAndWorldSizeNamingTheValue) {
  try {
    DistributedSampler(10, 2, 2, false, 0, false);
    FAIL() << "rank 2 of 2 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rank: 2"), std::string::npos) << e.what();
  }
  try {
    DistributedSampler(10, 0, 0, false, 0, false);
    FAIL() << "world_size 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("world_size: 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace feedscope
