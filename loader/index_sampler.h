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

}  // namespace feedscope
