#pragma once
// Quantiles of a stream of non-negative values in fixed memory, HdrHistogram-style: each power
// of two is split into 64 equal buckets, so a bucket is at most 1/64 of its lower bound wide and
// its midpoint is within 1/128 (0.79 %) of every value in it. A quantile is interpolated between
// closest ranks as percentile() in statistics.h does, over those midpoints, so it is within
// 0.79 % of the exact one. Count, sum, min and max (quantiles 0 and 1) are exact.
#include <array>
#include <cstdint>
#include <memory>

namespace feedscope {

// Not thread-safe: one writer, or a lock around it.
class LogHistogram {
 public:
  // Values below 2^-40 (about 9e-13) count as 0; values from 2^64 on fall in the top bucket.
  static constexpr int kMinExponent = -40;
  static constexpr int kMaxExponent = 63;
  static constexpr int kSubBuckets = 64;
  // The bound on a quantile's relative error (values between 2^-40 and 2^64).
  static constexpr double kRelativeError = 1.0 / 128;

  LogHistogram() = default;
  LogHistogram(const LogHistogram& other);
  LogHistogram& operator=(const LogHistogram& other);
  LogHistogram(LogHistogram&&) noexcept = default;
  LogHistogram& operator=(LogHistogram&&) noexcept = default;

  // Negative values and NaN count as 0. Allocates 512 bytes the first time a power of two is
  // seen (at most 104 times), never otherwise.
  void add(double value);
  // Adds every value of `other`.
  void merge(const LogHistogram& other);

  std::uint64_t count() const noexcept { return count_; }
  double sum() const noexcept { return sum_; }
  double min() const noexcept { return count_ ? min_ : 0; }
  double max() const noexcept { return count_ ? max_ : 0; }
  double mean() const noexcept { return count_ ? sum_ / static_cast<double>(count_) : 0; }
  // q in 0..1, linear interpolation between closest ranks; 0 when empty.
  double quantile(double q) const;

 private:
  static constexpr int kExponents = kMaxExponent - kMinExponent + 1;
  using Block = std::array<std::uint64_t, kSubBuckets>;

  // The value of the rank-th smallest (0-based) value's bucket, clamped to [min, max].
  double value_at_rank(std::uint64_t rank) const;

  std::array<std::unique_ptr<Block>, kExponents> blocks_{};
  std::uint64_t zeros_ = 0;
  std::uint64_t count_ = 0;
  double sum_ = 0;
  double min_ = 0;
  double max_ = 0;
};

}  // namespace feedscope
