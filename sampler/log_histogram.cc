#include "sampler/log_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace feedscope {

namespace {

constexpr int kMantissaBits = 52;
constexpr int kSubBits = 6;  // log2(kSubBuckets)
constexpr int kExponentBias = 1023;

}  // namespace

LogHistogram::LogHistogram(const LogHistogram& other)
    : zeros_(other.zeros_), count_(other.count_), sum_(other.sum_), min_(other.min_),
      max_(other.max_) {
  for (int e = 0; e < kExponents; ++e)
    if (other.blocks_[e]) blocks_[e] = std::make_unique<Block>(*other.blocks_[e]);
}

LogHistogram& LogHistogram::operator=(const LogHistogram& other) {
  if (this != &other) *this = LogHistogram(other);
  return *this;
}

void LogHistogram::add(double value) {
  if (!(value > 0)) value = 0;  // NaN too
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  ++count_;
  sum_ += value;
  // The bucket comes straight from the double's bits: the exponent picks the power of two, the
  // top six mantissa bits the sixty-fourth within it.
  const auto bits = std::bit_cast<std::uint64_t>(value);
  const int exponent = static_cast<int>(bits >> kMantissaBits) - kExponentBias;
  if (value == 0 || exponent < kMinExponent) {
    ++zeros_;
    return;
  }
  int block = exponent - kMinExponent;
  int sub = static_cast<int>((bits >> (kMantissaBits - kSubBits)) & (kSubBuckets - 1));
  if (block >= kExponents) block = kExponents - 1, sub = kSubBuckets - 1;
  if (!blocks_[block]) blocks_[block] = std::make_unique<Block>();
  ++(*blocks_[block])[sub];
}

void LogHistogram::merge(const LogHistogram& other) {
  if (other.count_ == 0) return;
  if (count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  count_ += other.count_;
  sum_ += other.sum_;
  zeros_ += other.zeros_;
  for (int e = 0; e < kExponents; ++e) {
    if (!other.blocks_[e]) continue;
    if (!blocks_[e]) blocks_[e] = std::make_unique<Block>();
    for (int s = 0; s < kSubBuckets; ++s) (*blocks_[e])[s] += (*other.blocks_[e])[s];
  }
}

double LogHistogram::value_at_rank(std::uint64_t rank) const {
  // The smallest and the largest are known exactly, whatever their buckets.
  if (rank == 0) return min_;
  if (rank + 1 >= count_) return max_;
  if (rank < zeros_) return std::clamp(0.0, min_, max_);
  std::uint64_t seen = zeros_;
  for (int e = 0; e < kExponents; ++e) {
    if (!blocks_[e]) continue;
    for (int s = 0; s < kSubBuckets; ++s) {
      seen += (*blocks_[e])[s];
      if (rank < seen) {
        const double mid = std::ldexp(1.0 + (s + 0.5) / kSubBuckets, e + kMinExponent);
        return std::clamp(mid, min_, max_);
      }
    }
  }
  return max_;
}

double LogHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(count_ - 1);
  const auto lo = static_cast<std::uint64_t>(std::floor(rank));
  const auto hi = static_cast<std::uint64_t>(std::ceil(rank));
  const double a = value_at_rank(lo);
  const double b = hi == lo ? a : value_at_rank(hi);
  return a + (b - a) * (rank - static_cast<double>(lo));
}

}  // namespace feedscope
