#include "profiler/growth_shape.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace feedscope {

namespace {

struct LineFit {
  double intercept = 0, slope = 0, residuals = 0;
};

// Least squares of values over x; a flat line where x does not vary.
LineFit fit_line(std::span<const double> x, std::span<const double> v) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sv = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sv += v[i];
  }
  const double mx = sx / n, mv = sv / n;
  double sxx = 0, sxv = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxv += (x[i] - mx) * (v[i] - mv);
  }
  LineFit f;
  f.slope = sxx > 0 ? sxv / sxx : 0;
  f.intercept = mv - f.slope * mx;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double r = v[i] - (f.intercept + f.slope * x[i]);
    f.residuals += r * r;
  }
  return f;
}

constexpr std::size_t kMinReadings = 8;
constexpr std::size_t kMinPart = 4;  // readings on each side of the knee
constexpr double kFlatFitsBetter = 0.5;
constexpr double kSlowerAfter = 1.0 / 3;

}  // namespace

GrowthShape growth_shape(std::span<const double> t_s, std::span<const double> values) {
  GrowthShape g;
  const std::size_t n = std::min(t_s.size(), values.size());
  if (n < kMinReadings) return g;
  const LineFit line = fit_line(t_s.first(n), values.first(n));
  g.line_residuals = line.residuals;
  std::vector<double> clipped(n);
  bool found = false;
  LineFit best;
  std::size_t knee = 0;
  for (std::size_t k = kMinPart - 1; k + kMinPart <= n; ++k) {
    for (std::size_t i = 0; i < n; ++i) clipped[i] = std::min(t_s[i], t_s[k]);
    const LineFit f = fit_line(clipped, values.first(n));
    if (f.slope <= 0) continue;
    if (!found || f.residuals < best.residuals) {
      best = f;
      knee = k;
      found = true;
    }
  }
  if (!found) return g;
  g.knee_s = t_s[knee];
  g.rise_per_s = best.slope;
  g.flat_residuals = best.residuals;
  g.after_per_s = fit_line(t_s.subspan(knee, n - knee), values.subspan(knee, n - knee)).slope;
  g.levels_off =
      best.residuals < kFlatFitsBetter * line.residuals && g.after_per_s < kSlowerAfter * g.rise_per_s;
  return g;
}

}  // namespace feedscope
