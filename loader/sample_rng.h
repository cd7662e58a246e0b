#pragma once
// Per-sample randomness that depends on (seed, epoch, sample index) alone, never on which worker
// or thread loads the sample or in what order: a run is reproducible at any num_workers.
#include <cstdint>

namespace feedscope {

// splitmix64 (Steele, Lea, Flood 2014): a one-word state, full period, and good enough output
// that independent streams can be started from hashed keys. Not thread-safe; cheap to copy.
class SampleRng {
 public:
  static constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  explicit SampleRng(std::uint64_t seed) noexcept : state_(mix(seed)) {}
  // Each key is mixed in turn, so (1, 2, 3) and (2, 1, 3) give unrelated streams.
  SampleRng(std::uint64_t seed, std::uint64_t epoch, std::uint64_t index) noexcept
      : state_(mix(mix(mix(seed) ^ epoch) ^ index)) {}

  std::uint64_t next() noexcept {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix(state_);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) noexcept { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [lo, hi], both included; unbiased (Lemire's multiply-and-reject).
  std::int64_t randint(std::int64_t lo, std::int64_t hi) noexcept {
    const std::uint64_t range = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo) + 1;
    if (range == 0) return static_cast<std::int64_t>(next());  // the whole 64-bit range
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * range;
    auto low = static_cast<std::uint64_t>(m);
    if (low < range) {
      const std::uint64_t threshold = -range % range;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * range;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + static_cast<std::uint64_t>(m >> 64));
  }
  bool bernoulli(double p) noexcept { return uniform() < p; }

 private:
  std::uint64_t state_;
};

}  // namespace feedscope
