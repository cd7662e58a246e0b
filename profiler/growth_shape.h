#pragma once
// Whether a series that grows keeps growing or levels off. A leak is a trend that does not bend;
// warm-up (the allocator caching its first blocks, a framework loading its kernels, a DataLoader's
// first batches) grows fast and stops. Two fits of the readings are set against each other: a
// straight line, and a rise that flattens (v = a + b * min(t, knee), the knee chosen to fit best).
// The growth levels off where the flattening fit's squared residuals are under half the line's and,
// past its knee, the readings grow at under a third of the rate before it.
#include <span>

namespace feedscope {

struct GrowthShape {
  bool levels_off = false;
  double knee_s = 0;      // where it flattens, on the readings' clock
  double rise_per_s = 0;  // the rise's rate before the knee
  double after_per_s = 0; // the readings' own slope past the knee
  double line_residuals = 0, flat_residuals = 0;  // the two fits' sums of squares
};

// `t_s` ascending, as many as `values`; fewer than 8 readings never level off (too few to tell).
GrowthShape growth_shape(std::span<const double> t_s, std::span<const double> values);

}  // namespace feedscope
