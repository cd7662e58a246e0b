#include "loader/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

int choose_jpeg_scale(const ResizeGeometry& geometry, double oversample) noexcept {
  const auto needed = [&](int out) { return static_cast<int>(std::ceil(out * std::max(oversample, 1.0))); };
  return JpegDecoder::choose_scale(static_cast<int>(geometry.box_x1 - geometry.box_x0),
                                   static_cast<int>(geometry.box_y1 - geometry.box_y0),
                                   needed(geometry.out_width), needed(geometry.out_height));
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
  widen_weights();
  return PixelRect{x_.min, y_.min, x_.max - x_.min, y_.max - y_.min};
}

namespace {

// GCC/Clang vector extension: one pixel's R, G, B and a lane of the next pixel (ignored), so the
// horizontal taps are one multiply-add each.
using Pixel4 = float __attribute__((vector_size(16)));
#define FEEDSCOPE_INLINE inline __attribute__((always_inline))

// One output row of the vertical pass: row[i] = sum over taps of weight * source row (plus row[i]
// itself when `accumulate`), for the `n` interleaved values the horizontal taps read. Each value
// is written once, after all its taps.
using VerticalFn = void (*)(const std::uint8_t* const* sources, const float* weights, int taps,
                            std::size_t n, bool accumulate, float* row);

// Values [i, n): the tail of the SIMD versions, and the whole row elsewhere.
void vertical_scalar_from(std::size_t i, const std::uint8_t* const* sources, const float* weights,
                          int taps, std::size_t n, bool accumulate, float* row) {
  for (; i < n; ++i) {
    float acc = accumulate ? row[i] : 0.0f;
    for (int k = 0; k < taps; ++k) acc += weights[k] * static_cast<float>(sources[k][i]);
    row[i] = acc;
  }
}

#if defined(__x86_64__)
// Eight values at a time with SSE2, which every x86-64 has.
void vertical_sse2(const std::uint8_t* const* sources, const float* weights, int taps, std::size_t n,
                   bool accumulate, float* row) {
  const __m128i zero = _mm_setzero_si128();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128 lo = accumulate ? _mm_loadu_ps(row + i) : _mm_setzero_ps();
    __m128 hi = accumulate ? _mm_loadu_ps(row + i + 4) : _mm_setzero_ps();
    for (int k = 0; k < taps; ++k) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sources[k] + i));
      const __m128i words = _mm_unpacklo_epi8(bytes, zero);
      const __m128 w = _mm_set1_ps(weights[k]);
      lo = _mm_add_ps(lo, _mm_mul_ps(w, _mm_cvtepi32_ps(_mm_unpacklo_epi16(words, zero))));
      hi = _mm_add_ps(hi, _mm_mul_ps(w, _mm_cvtepi32_ps(_mm_unpackhi_epi16(words, zero))));
    }
    _mm_storeu_ps(row + i, lo);
    _mm_storeu_ps(row + i + 4, hi);
  }
  vertical_scalar_from(i, sources, weights, taps, n, accumulate, row);
}

// Sixteen at a time with AVX2 and FMA (Haswell, 2013, and later), chosen at run time.
__attribute__((target("avx2,fma"))) void vertical_avx2(const std::uint8_t* const* sources,
                                                       const float* weights, int taps, std::size_t n,
                                                       bool accumulate, float* row) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 lo = accumulate ? _mm256_loadu_ps(row + i) : _mm256_setzero_ps();
    __m256 hi = accumulate ? _mm256_loadu_ps(row + i + 8) : _mm256_setzero_ps();
    for (int k = 0; k < taps; ++k) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sources[k] + i));
      const __m256 w = _mm256_set1_ps(weights[k]);
      lo = _mm256_fmadd_ps(w, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)), lo);
      hi = _mm256_fmadd_ps(w, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(bytes, bytes))), hi);
    }
    _mm256_storeu_ps(row + i, lo);
    _mm256_storeu_ps(row + i + 8, hi);
  }
  vertical_scalar_from(i, sources, weights, taps, n, accumulate, row);
}

bool cpu_has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
VerticalFn pick_vertical(bool avx2) { return avx2 ? vertical_avx2 : vertical_sse2; }
#else
bool cpu_has_avx2_fma() { return false; }
void vertical_scalar(const std::uint8_t* const* sources, const float* weights, int taps, std::size_t n,
                     bool accumulate, float* row) {
  vertical_scalar_from(0, sources, weights, taps, n, accumulate, row);
}
VerticalFn pick_vertical(bool) { return vertical_scalar; }
#endif

struct HorizontalPlan;

// Output pixel x of the horizontal pass, `K` taps wide when K > 0 (unrolled), else its count.
// Reads one float past the last tap, so the row needs one float of padding.
template <int K>
FEEDSCOPE_INLINE Pixel4 pixel(const float* row, const HorizontalPlan& h, int x);

template <int K>
FEEDSCOPE_INLINE Pixel4 taps(const float* p, const float* w, int count) {
  Pixel4 acc = {0, 0, 0, 0};
  const int n = K > 0 ? K : count;
  for (int k = 0; k < n; ++k) {
    Pixel4 v;
    std::memcpy(&v, p + 3 * k, sizeof v);
    acc += w[k] * v;
  }
  return acc;
}

struct HorizontalPlan {
  const int* first;
  const int* count;
  const float* weights;
  int ksize;
  int origin;  // source x of row[0]
  int out_w;
  bool flip;
  Pixel4 mul, add;  // ToTensor's /255 and Normalize as one multiply-add per channel
  const float* wide;  // the AVX2 pass's weights (ResizeNormalize::wide_weights_), or null
};

template <int K>
FEEDSCOPE_INLINE Pixel4 pixel(const float* row, const HorizontalPlan& h, int x) {
  return taps<K>(row + static_cast<std::size_t>(h.first[x] - h.origin) * 3,
                 h.weights + static_cast<std::size_t>(x) * static_cast<std::size_t>(h.ksize), h.count[x]);
}

// Output pixels [x, out_w) one at a time: the tail after the SIMD groups.
template <int K>
FEEDSCOPE_INLINE void horizontal_tail(int x, const float* row, const HorizontalPlan& h, float* o,
                                      std::size_t plane) {
  for (; x < h.out_w; ++x) {
    const Pixel4 acc = pixel<K>(row, h, x);
    const auto xo = static_cast<std::size_t>(h.flip ? h.out_w - 1 - x : x);
    for (std::size_t c = 0; c < 3; ++c) o[c * plane + xo] = acc[c] * h.mul[c] + h.add[c];
  }
}

// One output row of the horizontal pass, written planar (CHW) and mirrored when flipping. Four
// pixels at a time: their RGB_ vectors are transposed into R, G and B vectors, normalized and
// stored whole, where a pixel at a time took three scalar multiply-adds and stores.
template <int K>
FEEDSCOPE_INLINE void horizontal(const float* row, const HorizontalPlan& h, float* o, std::size_t plane) {
  int x = 0;
  for (; x + 4 <= h.out_w; x += 4) {
    const Pixel4 p0 = pixel<K>(row, h, x), p1 = pixel<K>(row, h, x + 1), p2 = pixel<K>(row, h, x + 2),
                 p3 = pixel<K>(row, h, x + 3);
    // The 4x4 transpose, less the unused fourth row.
    const Pixel4 r = {p0[0], p1[0], p2[0], p3[0]};
    const Pixel4 g = {p0[1], p1[1], p2[1], p3[1]};
    const Pixel4 b = {p0[2], p1[2], p2[2], p3[2]};
    const Pixel4 planes[3] = {r * h.mul[0] + h.add[0], g * h.mul[1] + h.add[1], b * h.mul[2] + h.add[2]};
    for (std::size_t c = 0; c < 3; ++c) {
      Pixel4 v = planes[c];
      std::size_t at = static_cast<std::size_t>(x);
      if (h.flip) {
        v = Pixel4{v[3], v[2], v[1], v[0]};
        at = static_cast<std::size_t>(h.out_w - 4 - x);
      }
      std::memcpy(o + c * plane + at, &v, sizeof v);
    }
  }
  horizontal_tail<K>(x, row, h, o, plane);
}

#if defined(__x86_64__)
// The horizontal pass with AVX2 and FMA, eight output pixels at a time: pixels x+j and x+j+4 share
// a register (one per 128-bit half), so the 4x4 transpose of each half leaves R, G and B of all
// eight in order, ready to normalize and store whole. `h.wide` holds each tap's weight for the two
// pixels of a register, broadcast: ResizeNormalize::widen_weights.
template <int K>
__attribute__((target("avx2,fma"))) void horizontal_avx2(const float* row, const HorizontalPlan& h,
                                                         float* o, std::size_t plane) {
  const __m256 mul[3] = {_mm256_set1_ps(h.mul[0]), _mm256_set1_ps(h.mul[1]), _mm256_set1_ps(h.mul[2])};
  const __m256 add[3] = {_mm256_set1_ps(h.add[0]), _mm256_set1_ps(h.add[1]), _mm256_set1_ps(h.add[2])};
  const __m256i reverse = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  int x = 0;
  for (; x + 8 <= h.out_w; x += 8) {
    const float* w = h.wide + static_cast<std::size_t>(x) * K * 4;
    __m256 acc[4];
    for (int j = 0; j < 4; ++j) {
      const float* lo = row + static_cast<std::size_t>(h.first[x + j] - h.origin) * 3;
      const float* hi = row + static_cast<std::size_t>(h.first[x + j + 4] - h.origin) * 3;
      __m256 a = _mm256_setzero_ps();
      for (int k = 0; k < K; ++k) {
        const __m256 v = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo + 3 * k)),
                                              _mm_loadu_ps(hi + 3 * k), 1);
        a = _mm256_fmadd_ps(_mm256_loadu_ps(w + static_cast<std::size_t>(j * K + k) * 8), v, a);
      }
      acc[j] = a;
    }
    const __m256 rg01 = _mm256_unpacklo_ps(acc[0], acc[1]);  // R0 R1 G0 G1 | R4 R5 G4 G5
    const __m256 rg23 = _mm256_unpacklo_ps(acc[2], acc[3]);
    const __m256 b01 = _mm256_unpackhi_ps(acc[0], acc[1]);   // B0 B1 _ _ | B4 B5 _ _
    const __m256 b23 = _mm256_unpackhi_ps(acc[2], acc[3]);
    const __m256 planes[3] = {_mm256_shuffle_ps(rg01, rg23, _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm256_shuffle_ps(rg01, rg23, _MM_SHUFFLE(3, 2, 3, 2)),
                              _mm256_shuffle_ps(b01, b23, _MM_SHUFFLE(1, 0, 1, 0))};
    const auto at = static_cast<std::size_t>(h.flip ? h.out_w - 8 - x : x);
    for (std::size_t c = 0; c < 3; ++c) {
      __m256 v = _mm256_fmadd_ps(planes[c], mul[c], add[c]);
      if (h.flip) v = _mm256_permutevar8x32_ps(v, reverse);
      _mm256_storeu_ps(o + c * plane + at, v);
    }
  }
  horizontal_tail<K>(x, row, h, o, plane);
}
#endif

struct VerticalPlan {
  const int* first;
  const int* count;
  const float* weights;
  int ksize;
  int origin;  // source y of the first row of `columns`
  int out_h;
};

using HorizontalFn = void (*)(const float* row, const HorizontalPlan& h, float* o, std::size_t plane);

// Whether taps `ksize` wide (0: a count per pixel) have an AVX2 horizontal pass.
bool has_avx2_horizontal(int ksize) {
#if defined(__x86_64__)
  return ksize == 3 || ksize == 5 || ksize == 7;
#else
  (void)ksize;
  return false;
#endif
}

// The horizontal pass for taps `ksize` wide (0: a count per pixel), in the widest SIMD allowed.
HorizontalFn pick_horizontal(int ksize, bool avx2) {
#if defined(__x86_64__)
  if (avx2 && has_avx2_horizontal(ksize)) {
    switch (ksize) {
      case 3: return horizontal_avx2<3>;
      case 5: return horizontal_avx2<5>;
      default: return horizontal_avx2<7>;
    }
  }
#else
  (void)avx2;
#endif
  switch (ksize) {
    case 3: return horizontal<3>;
    case 5: return horizontal<5>;
    case 7: return horizontal<7>;
    default: return horizontal<0>;
  }
}

void resample(const std::uint8_t* columns, std::size_t stride, std::size_t row_floats,
              const VerticalPlan& v, const HorizontalPlan& h, VerticalFn vertical,
              HorizontalFn horizontal, float* row, float* out) {
  const std::size_t plane = static_cast<std::size_t>(h.out_w) * static_cast<std::size_t>(v.out_h);
  constexpr int kMaxTaps = 64;
  const std::uint8_t* sources[kMaxTaps];
  float weights[kMaxTaps];
  for (int y = 0; y < v.out_h; ++y) {
    // Vertical pass over the columns the horizontal taps read: contiguous, so it vectorizes.
    // Zero-weight taps (the padding of short ones) are left out.
    const float* w = v.weights + static_cast<std::size_t>(y) * static_cast<std::size_t>(v.ksize);
    const int top = v.first[y] - v.origin;
    int n = 0;
    bool accumulate = false;
    for (int k = 0, count = v.count[y]; k < count; ++k) {
      if (w[k] == 0.0f) continue;
      if (n == kMaxTaps) {  // a shrink over 31x: sum these taps and go on with the rest
        vertical(sources, weights, n, row_floats, accumulate, row);
        accumulate = true;
        n = 0;
      }
      sources[n] = columns + static_cast<std::size_t>(top + k) * stride;
      weights[n++] = w[k];
    }
    vertical(sources, weights, n, row_floats, accumulate, row);
    horizontal(row, h, out + static_cast<std::size_t>(y) * static_cast<std::size_t>(h.out_w), plane);
  }
}

}  // namespace

ResizeNormalize::ResizeNormalize(Simd simd) : avx2_(simd == Simd::best && cpu_has_avx2_fma()) {}

void ResizeNormalize::widen_weights() {
  // For the AVX2 pass, when run() will take it: per group of eight output pixels, per register j
  // (pixels j and j+4), per tap, the two pixels' weights each broadcast to four lanes.
  if (!avx2_ || !has_avx2_horizontal(x_.fixed ? x_.ksize : 0)) return;
  const auto ksize = static_cast<std::size_t>(x_.ksize);
  const std::size_t groups = x_.first.size() / 8;
  wide_weights_.resize(groups * 8 * ksize * 4);
  float* w = wide_weights_.data();
  for (std::size_t g = 0; g < groups; ++g)
    for (std::size_t j = 0; j < 4; ++j)
      for (std::size_t k = 0; k < ksize; ++k)
        for (std::size_t lane = 0; lane < 8; ++lane)
          *w++ = x_.weights[(g * 8 + j + (lane < 4 ? 0 : 4)) * ksize + k];
}

void ResizeNormalize::run(const std::uint8_t* rgb, std::size_t stride, int origin_x, int origin_y,
                          bool flip, const Normalization& normalization, float* out) {
  const std::size_t row_floats = static_cast<std::size_t>(x_.max - x_.min) * 3;
  if (row_.size() < row_floats + 1) row_.resize(row_floats + 1);  // + the padding taps() reads
  const int ksize = x_.fixed ? x_.ksize : 0;
  const HorizontalFn horizontal = pick_horizontal(ksize, avx2_);
  HorizontalPlan h{x_.first.data(), x_.count.data(), x_.weights.data(), x_.ksize, x_.min,
                   static_cast<int>(x_.first.size()), flip, {}, {}, wide_weights_.data()};
  for (std::size_t c = 0; c < 3; ++c) {
    h.mul[c] = 1.0f / (255.0f * normalization.std[c]);
    h.add[c] = -normalization.mean[c] / normalization.std[c];
  }
  const VerticalPlan v{y_.first.data(), y_.count.data(), y_.weights.data(), y_.ksize, origin_y,
                       static_cast<int>(y_.first.size())};
  resample(rgb + static_cast<std::size_t>(x_.min - origin_x) * 3, stride, row_floats, v, h,
           pick_vertical(avx2_), horizontal, row_.data(), out);
}

}  // namespace feedscope
