#include "loader/index_sampler.h"

#include <numeric>
#include <random>

namespace feedscope {

std::vector<std::size_t> SequentialSampler::epoch_indices(std::uint64_t) const {
  std::vector<std::size_t> indices(size_);
  std::iota(indices.begin(), indices.end(), std::size_t{0});
  return indices;
}

std::vector<std::size_t> RandomSampler::epoch_indices(std::uint64_t epoch) const {
  std::vector<std::size_t> indices(size_);
  std::iota(indices.begin(), indices.end(), std::size_t{0});
  // Fisher-Yates with our own draw, so the order is the same under every standard library.
  std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + epoch);
  for (std::size_t i = size_; i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng() % i);
    std::swap(indices[i - 1], indices[j]);
  }
  return indices;
}

}  // namespace feedscope
