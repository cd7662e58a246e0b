#include "profiler/slow_samples.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace feedscope {

SampleCosts sample_costs_of(const SampleCostSnapshot& s, std::string measured_by, int image_size) {
  SampleCosts c;
  c.measured_by = std::move(measured_by);
  c.image_size = image_size;
  c.count = s.count;
  c.total_s = static_cast<double>(s.total_ns) / 1e9;
  c.mean_ms = s.count ? static_cast<double>(s.total_ns) / static_cast<double>(s.count) / 1e6 : 0.0;
  c.p50_ms = s.quantile_ms(0.5);
  c.p90_ms = s.quantile_ms(0.9);
  c.p99_ms = s.quantile_ms(0.99);
  c.max_ms = static_cast<double>(s.max_ns) / 1e6;
  c.slowest_1pct_share = s.slowest_share(0.01);
  c.slowest_5pct_share = s.slowest_share(0.05);
  if (s.count > 0) {
    const auto threshold = static_cast<std::int64_t>(std::llround(kSlowSampleFactor * c.p90_ms * 1e6));
    // Whole buckets from the one holding the threshold: the count is exact to a bucket's width.
    c.slow_threshold_ms = static_cast<double>(threshold) / 1e6;
    c.slow_count = s.count_at_least(threshold);
    const double slow_s = static_cast<double>(s.sum_at_least(threshold)) / 1e9;
    c.slow_excess_s = std::max(0.0, slow_s - static_cast<double>(c.slow_count) * c.p50_ms / 1e3);
  }
  for (const SlowSampleCost& slow : s.slowest)
    c.slowest.push_back({slow.file.file, static_cast<double>(slow.ns) / 1e6, slow.file.bytes,
                         slow.file.width, slow.file.height, slow.file.format});
  if (s.wait_ns > 0) {
    c.wait_s = static_cast<double>(s.wait_ns) / 1e9;
    c.wait_on_slowest_s = static_cast<double>(s.wait_on_slowest_ns) / 1e9;
  }
  return c;
}

}  // namespace feedscope
