#include "loader/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace feedscope {

namespace {

// Python's round(): half to even, which std::nearbyint does in the default rounding mode.
int round_half_even(double value) { return static_cast<int>(std::nearbyint(value)); }

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

}  // namespace

CropBox random_resized_crop_box(int width, int height, SampleRng& rng,
                                const RandomResizedCropOptions& options) {
  const double area = static_cast<double>(width) * static_cast<double>(height);
  const double log_ratio_min = std::log(options.ratio_min);
  const double log_ratio_max = std::log(options.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(options.scale_min, options.scale_max);
    const double aspect_ratio = std::exp(rng.uniform(log_ratio_min, log_ratio_max));
    const int w = round_half_even(std::sqrt(target_area * aspect_ratio));
    const int h = round_half_even(std::sqrt(target_area / aspect_ratio));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int top = static_cast<int>(rng.randint(0, height - h));
      const int left = static_cast<int>(rng.randint(0, width - w));
      return CropBox{top, left, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int w = width;
  int h = height;
  if (in_ratio < options.ratio_min) {
    h = round_half_even(w / options.ratio_min);
  } else if (in_ratio > options.ratio_max) {
    w = round_half_even(h * options.ratio_max);
  }
  return CropBox{(height - h) / 2, (width - w) / 2, h, w};
}

ResizeGeometry resized_crop_geometry(const CropBox& crop, int size) {
  ResizeGeometry g;
  g.domain = PixelRect{crop.left, crop.top, crop.width, crop.height};
  g.box_x0 = crop.left;
  g.box_y0 = crop.top;
  g.box_x1 = crop.left + crop.width;
  g.box_y1 = crop.top + crop.height;
  g.out_width = size;
  g.out_height = size;
  g.window = PixelRect{0, 0, size, size};
  return g;
}

ResizeGeometry resize_center_crop_geometry(int width, int height, int resize, int crop) {
  if (crop > resize)
    throw std::invalid_argument("center crop " + std::to_string(crop) + " is larger than the resize " +
                                std::to_string(resize));
  // torchvision's _compute_resized_output_size: the long side is truncated, not rounded.
  const int short_side = std::min(width, height);
  const int long_side = std::max(width, height);
  const int new_long = static_cast<int>(static_cast<double>(resize) * long_side / short_side);
  ResizeGeometry g;
  g.domain = PixelRect{0, 0, width, height};
  g.box_x1 = width;
  g.box_y1 = height;
  g.out_width = width <= height ? resize : new_long;
  g.out_height = width <= height ? new_long : resize;
  // F.center_crop: int(round((size - crop) / 2.0)).
  g.window = PixelRect{round_half_even((g.out_width - crop) / 2.0),
                       round_half_even((g.out_height - crop) / 2.0), crop, crop};
  return g;
}

ResizeGeometry scale_geometry(const ResizeGeometry& geometry, int scale_num, int scaled_width,
                              int scaled_height) {
  if (scale_num == 8) return geometry;
  ResizeGeometry g = geometry;
  const double f = scale_num / 8.0;
  // Libjpeg's pixel i at scale M/8 covers source pixels [8i/M, 8(i+1)/M): coordinates scale by
  // M/8 exactly. The domain grows to whole pixels.
  const int x0 = geometry.domain.x * scale_num / 8;
  const int y0 = geometry.domain.y * scale_num / 8;
  const int x1 = std::min(((geometry.domain.x + geometry.domain.width) * scale_num + 7) / 8, scaled_width);
  const int y1 = std::min(((geometry.domain.y + geometry.domain.height) * scale_num + 7) / 8, scaled_height);
  g.domain = PixelRect{x0, y0, x1 - x0, y1 - y0};
  g.box_x0 = geometry.box_x0 * f;
  g.box_y0 = geometry.box_y0 * f;
  g.box_x1 = std::min(geometry.box_x1 * f, static_cast<double>(x1));
  g.box_y1 = std::min(geometry.box_y1 * f, static_cast<double>(y1));
  return g;
}

int choose_jpeg_scale(const ResizeGeometry& geometry) noexcept {
  return JpegDecoder::choose_scale(static_cast<int>(geometry.box_x1 - geometry.box_x0),
                                   static_cast<int>(geometry.box_y1 - geometry.box_y0),
                                   geometry.out_width, geometry.out_height);
}

// PIL's precompute_coeffs (libImaging/Resample.c) for the bilinear filter, in domain coordinates,
// for the window's output pixels only.
void ResizeNormalize::plan_axis(Axis& axis, int domain_begin, int domain_size, double box0,
                                double box1, int out_size, int window_begin, int window_size) {
  const double in0 = box0 - domain_begin;
  const double scale = (box1 - box0) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = filterscale;  // the triangle's support is 1
  const double ss = 1.0 / filterscale;
  axis.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  axis.fixed = domain_size >= axis.ksize;
  const auto n = static_cast<std::size_t>(window_size);
  const auto ksize = static_cast<std::size_t>(axis.ksize);
  axis.first.resize(n);
  axis.count.resize(n);
  axis.weights.assign(n * ksize, 0.0f);
  axis.min = domain_begin + domain_size;
  axis.max = domain_begin;
  for (int k = 0; k < window_size; ++k) {
    const double center = in0 + (window_begin + k + 0.5) * scale;
    // (int) truncates toward zero, as PIL's C does.
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), domain_size);
    const int taps = std::min(std::max(xmax - xmin, 0), axis.ksize);
    // With fixed taps, start early enough that ksize pixels fit in the domain; the extra ones
    // get zero weight.
    const int start = axis.fixed ? std::min(xmin, domain_size - axis.ksize) : xmin;
    float* w = axis.weights.data() + static_cast<std::size_t>(k) * ksize;
    double total = 0.0;
    for (int x = xmin; x < xmin + taps; ++x) total += triangle((x - center + 0.5) * ss);
    for (int x = xmin; x < xmin + taps; ++x)
      w[x - start] = total != 0.0 ? static_cast<float>(triangle((x - center + 0.5) * ss) / total) : 0.0f;
    const int count = axis.fixed ? axis.ksize : taps;
    axis.first[static_cast<std::size_t>(k)] = domain_begin + start;
    axis.count[static_cast<std::size_t>(k)] = count;
    axis.min = std::min(axis.min, domain_begin + start);
    axis.max = std::max(axis.max, domain_begin + start + count);
  }
}

PixelRect ResizeNormalize::prepare(const ResizeGeometry& g) {
  if (g.domain.width <= 0 || g.domain.height <= 0 || g.out_width <= 0 || g.out_height <= 0 ||
      g.window.width <= 0 || g.window.height <= 0 || g.box_x1 <= g.box_x0 || g.box_y1 <= g.box_y0)
    throw std::invalid_argument("resize: empty source, box or output");
  plan_axis(x_, g.domain.x, g.domain.width, g.box_x0, g.box_x1, g.out_width, g.window.x, g.window.width);
  plan_axis(y_, g.domain.y, g.domain.height, g.box_y0, g.box_y1, g.out_height, g.window.y, g.window.height);
  return PixelRect{x_.min, y_.min, x_.max - x_.min, y_.max - y_.min};
}

namespace {

// Four floats in one SSE register (GCC/Clang vector extension): a pixel's R, G, B and one lane
// of the next pixel, which is ignored. Cuts the horizontal pass to one multiply-add per tap.
using Lanes = float __attribute__((vector_size(16)));

// One output row of the horizontal pass: taps `K` wide when K > 0 (unrolled), else per pixel.
// Reads one float past the last tap, so `row` needs one float of padding.
template <int K>
void horizontal(const float* row, int out_w, const int* first, const int* count, const float* weights,
                int ksize, int origin, bool flip, const float* mul, const float* add, float* o,
                std::size_t plane) {
  for (int x = 0; x < out_w; ++x) {
    const float* p = row + static_cast<std::size_t>(first[x] - origin) * 3;
    const float* w = weights + static_cast<std::size_t>(x) * static_cast<std::size_t>(ksize);
    Lanes acc = {0, 0, 0, 0};
    const int n = K > 0 ? K : count[x];
    for (int k = 0; k < n; ++k) {
      Lanes v;
      std::memcpy(&v, p + 3 * k, sizeof v);
      acc += w[k] * v;
    }
    const auto xo = static_cast<std::size_t>(flip ? out_w - 1 - x : x);
    o[xo] = acc[0] * mul[0] + add[0];
    o[plane + xo] = acc[1] * mul[1] + add[1];
    o[2 * plane + xo] = acc[2] * mul[2] + add[2];
  }
}

}  // namespace

void ResizeNormalize::run(const std::uint8_t* rgb, std::size_t stride, int origin_x, int origin_y,
                          bool flip, const Normalization& normalization, float* out) {
  const int out_w = static_cast<int>(x_.first.size());
  const int out_h = static_cast<int>(y_.first.size());
  const std::size_t row_floats = static_cast<std::size_t>(x_.max - x_.min) * 3;
  if (row_.size() < row_floats + 1) row_.resize(row_floats + 1);  // + the padding horizontal() reads
  // ToTensor's /255 and Normalize folded into one multiply-add per value.
  float mul[3], add[3];
  for (std::size_t c = 0; c < 3; ++c) {
    mul[c] = 1.0f / (255.0f * normalization.std[c]);
    add[c] = -normalization.mean[c] / normalization.std[c];
  }
  const std::size_t plane = static_cast<std::size_t>(out_w) * static_cast<std::size_t>(out_h);
  const std::uint8_t* columns = rgb + static_cast<std::size_t>(x_.min - origin_x) * 3;
  float* row = row_.data();
  for (int y = 0; y < out_h; ++y) {
    // Vertical pass over the columns the horizontal taps read: contiguous, so it vectorizes.
    const float* w = y_.weights.data() + static_cast<std::size_t>(y) * static_cast<std::size_t>(y_.ksize);
    const int top = y_.first[static_cast<std::size_t>(y)] - origin_y;
    std::fill(row, row + row_floats, 0.0f);
    for (int k = 0, n = y_.count[static_cast<std::size_t>(y)]; k < n; ++k) {
      const float wk = w[k];
      if (wk == 0.0f) continue;
      const std::uint8_t* src = columns + static_cast<std::size_t>(top + k) * stride;
      for (std::size_t i = 0; i < row_floats; ++i) row[i] += wk * static_cast<float>(src[i]);
    }
    float* o = out + static_cast<std::size_t>(y) * static_cast<std::size_t>(out_w);
    const int* first = x_.first.data();
    const int* count = x_.count.data();
    const float* weights = x_.weights.data();
    switch (x_.fixed ? x_.ksize : 0) {
      case 3: horizontal<3>(row, out_w, first, count, weights, 3, x_.min, flip, mul, add, o, plane); break;
      case 5: horizontal<5>(row, out_w, first, count, weights, 5, x_.min, flip, mul, add, o, plane); break;
      case 7: horizontal<7>(row, out_w, first, count, weights, 7, x_.min, flip, mul, add, o, plane); break;
      default: horizontal<0>(row, out_w, first, count, weights, x_.ksize, x_.min, flip, mul, add, o, plane);
    }
  }
}

}  // namespace feedscope
