#include "loader/index_sampler.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

namespace feedscope {

std::vector<std::size_t> seeded_permutation(std::size_t size, std::uint64_t key) {
  std::vector<std::size_t> indices(size);
  std::iota(indices.begin(), indices.end(), std::size_t{0});
  // Our own draw rather than std::shuffle, whose algorithm the standard leaves open.
  std::mt19937_64 rng(key);
  for (std::size_t i = size; i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng() % i);
    std::swap(indices[i - 1], indices[j]);
  }
  return indices;
}

std::vector<std::size_t> torch_randperm(std::size_t size, std::uint64_t seed) {
  std::vector<std::size_t> indices(size);
  std::iota(indices.begin(), indices.end(), std::size_t{0});
  // torch.Generator().manual_seed(seed) keeps the seed's low 32 bits for its mt19937, which is the
  // standard one; randperm_cpu swaps position i with i + random() % (n - i), front to back.
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  for (std::size_t i = 0; i + 1 < size; ++i) {
    const std::size_t z = static_cast<std::size_t>(rng()) % (size - i);
    std::swap(indices[i], indices[i + z]);
  }
  return indices;
}

std::vector<std::size_t> SequentialSampler::epoch_indices(std::uint64_t) const {
  std::vector<std::size_t> indices(size_);
  std::iota(indices.begin(), indices.end(), std::size_t{0});
  return indices;
}

std::vector<std::size_t> RandomSampler::epoch_indices(std::uint64_t epoch) const {
  return seeded_permutation(size_, seed_ * 0x9E3779B97F4A7C15ull + epoch);
}

DistributedSampler::DistributedSampler(std::size_t size, std::size_t rank, std::size_t world_size,
                                       bool shuffle, std::uint64_t seed, bool drop_last)
    : size_(size), rank_(rank), world_size_(world_size), shuffle_(shuffle), seed_(seed),
      drop_last_(drop_last) {
  if (world_size == 0)
    throw std::invalid_argument("world_size: 0 is not allowed; allowed: 1 or more");
  if (rank >= world_size)
    throw std::invalid_argument("rank: " + std::to_string(rank) + " is not below world_size " +
                                std::to_string(world_size) + "; allowed: 0 to " +
                                std::to_string(world_size - 1));
  // PyTorch: with drop_last and an uneven split, ceil((n - world) / world), i.e. floor(n / world);
  // otherwise ceil(n / world).
  num_samples_ = drop_last && size % world_size != 0 ? size / world_size
                                                     : (size + world_size - 1) / world_size;
}

std::vector<std::size_t> DistributedSampler::epoch_indices(std::uint64_t epoch) const {
  std::vector<std::size_t> all = shuffle_ ? torch_randperm(size_, seed_ + epoch)
                                          : SequentialSampler(size_).epoch_indices(epoch);
  const std::size_t total = total_size();
  if (all.empty()) return {};
  // Pad by cycling from the start (PyTorch repeats the whole list as often as needed), or cut.
  const std::size_t n = all.size();
  all.reserve(std::max(total, n));
  for (std::size_t i = n; i < total; ++i) all.push_back(all[(i - n) % n]);
  all.resize(total);
  std::vector<std::size_t> mine;
  mine.reserve(num_samples_);
  for (std::size_t i = rank_; i < total; i += world_size_) mine.push_back(all[i]);
  return mine;
}

}  // namespace feedscope
