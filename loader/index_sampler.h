#pragma once
// Which sample indexes an epoch visits, and in what order.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace feedscope {

// Stateless per epoch: epoch_indices() may be called from any thread.
class IndexSampler {
 public:
  virtual ~IndexSampler() = default;
  virtual std::vector<std::size_t> epoch_indices(std::uint64_t epoch) const = 0;
};

class SequentialSampler final : public IndexSampler {
 public:
  explicit SequentialSampler(std::size_t size) : size_(size) {}
  std::vector<std::size_t> epoch_indices(std::uint64_t epoch) const override;

 private:
  std::size_t size_;
};

// A permutation that depends only on (seed, epoch): the same run gives the same order.
class RandomSampler final : public IndexSampler {
 public:
  RandomSampler(std::size_t size, std::uint64_t seed) : size_(size), seed_(seed) {}
  std::vector<std::size_t> epoch_indices(std::uint64_t epoch) const override;

 private:
  std::size_t size_;
  std::uint64_t seed_;
};

// One rank's share of every epoch, with torch.utils.data.DistributedSampler's semantics: all
// ranks draw the same permutation (seeded with seed + epoch, as PyTorch does), pad it by repeating
// from its start to a multiple of world_size (or, with drop_last, cut the tail to one), and rank r
// takes positions r, r + world_size, ... Every rank gets the same count, so collective steps line
// up. The permutation is torch.randperm's (torch_randperm), so a rank gets the very samples
// PyTorch's sampler gives it for the same seed and epoch. Stateless per epoch.
class DistributedSampler final : public IndexSampler {
 public:
  // Throws std::invalid_argument naming the value for world_size 0 or rank >= world_size.
  DistributedSampler(std::size_t size, std::size_t rank, std::size_t world_size, bool shuffle,
                     std::uint64_t seed, bool drop_last);
  std::vector<std::size_t> epoch_indices(std::uint64_t epoch) const override;
  // Samples per rank per epoch (PyTorch's num_samples); total_size() = that x world_size.
  std::size_t num_samples() const noexcept { return num_samples_; }
  std::size_t total_size() const noexcept { return num_samples_ * world_size_; }

 private:
  std::size_t size_;
  std::size_t rank_;
  std::size_t world_size_;
  bool shuffle_;
  std::uint64_t seed_;
  bool drop_last_;
  std::size_t num_samples_;
};

// 0..size-1 shuffled by Fisher-Yates over mt19937_64(key): the same on every standard library.
std::vector<std::size_t> seeded_permutation(std::size_t size, std::uint64_t key);
// torch.randperm(size, generator=torch.Generator().manual_seed(seed)) on the CPU, as torch 1.13
// computes it (tests/loader/index_sampler_test.cc holds it against python's torch where
// installed). PyTorch's source draws 64-bit numbers instead from 2^32 / 20 (214,748,364) samples
// on; that range is not followed here.
std::vector<std::size_t> torch_randperm(std::size_t size, std::uint64_t seed);

}  // namespace feedscope
