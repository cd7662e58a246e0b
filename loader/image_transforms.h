#pragma once
// torchvision's ImageNet transforms, computed the way PIL computes them: RandomResizedCrop's
// get_params, RandomHorizontalFlip, Resize + CenterCrop, PIL's antialiased bilinear resampling,
// ToTensor and Normalize. Resizing is planned before decoding, so the decoder is asked for only
// the pixels the filter reads (and at the DCT scale that keeps the resize a shrink).
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "loader/jpeg_decoder.h"
#include "loader/sample_rng.h"

namespace feedscope {

// torchvision's (i, j, h, w): top, left, height, width, in source pixels.
struct CropBox {
  int top = 0;
  int left = 0;
  int height = 0;
  int width = 0;
};

struct RandomResizedCropOptions {
  double scale_min = 0.08;
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;
  double ratio_max = 4.0 / 3.0;
};

// torchvision.transforms.RandomResizedCrop.get_params: ten tries at a random area fraction and
// log-uniform aspect ratio, then the central crop clamped to the ratio range.
CropBox random_resized_crop_box(int width, int height, SampleRng& rng,
                                const RandomResizedCropOptions& options = {});

// Where an output grid samples its source, as PIL's Image.resize(size, box=...) does, with only a
// window of the output computed. Coordinates are source pixels.
struct ResizeGeometry {
  PixelRect domain;  // pixels the filter may read: the image PIL resizes (taps clamp to it)
  double box_x0 = 0, box_y0 = 0, box_x1 = 0, box_y1 = 0;  // mapped onto the full output
  int out_width = 0, out_height = 0;                      // the full output
  PixelRect window;                                       // the part of the output produced
};

// F.resized_crop(img, top, left, height, width, [size, size]): crop, then resize the crop.
ResizeGeometry resized_crop_geometry(const CropBox& crop, int size);
// Resize(resize) of the shorter side, then CenterCrop(crop), as torchvision sizes and rounds them.
ResizeGeometry resize_center_crop_geometry(int width, int height, int resize, int crop);
// The same geometry on the image decoded at scale_num/8, whose size is scaled_width x scaled_height.
ResizeGeometry scale_geometry(const ResizeGeometry& geometry, int scale_num, int scaled_width,
                              int scaled_height);
// How much larger than the output the crop must stay after a reduced-scale JPEG decode. At 1 (the
// resize only ever shrinks) libjpeg's scaled IDCT, a box filter of sorts, did most of the
// shrinking instead of PIL's triangle filter: on real photographs a sample's mean difference from
// torchvision reached 2.8 grey levels, its 99th percentile 20.8 and single pixels 56. Measured by
// tests/integration/photo_parity_test.cc (worst sample's mean / p99 / max): 2 gave 1.09 / 5.6 /
// 16.5, 3 gives 0.61 / 2.4 / 11.1, 4 gave 0.35 / 1.2 / 3.8; docs/datasets.md's bound is 1 / 4.
inline constexpr double kReducedDecodeOversample = 3.0;
// The JPEG DCT scale (M of M/8) for a geometry: the smallest that keeps the scaled crop at least
// `oversample` times the output on both sides; 8 (full size) where none does.
int choose_jpeg_scale(const ResizeGeometry& geometry, double oversample = kReducedDecodeOversample) noexcept;

struct Normalization {
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};  // ImageNet's, as torchvision's references
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
};

// Resamples RGB uint8 pixels with PIL's antialiased bilinear (triangle) filter, separably and in
// float (vertical pass first, one row at a time, so it vectorizes and stays in L1), then mirrors, scales to [0, 1], normalizes and writes planar float (CHW).
// Not thread-safe: one per worker; keeps its tap tables and row buffer between images, so steady
// state allocates nothing.
class ResizeNormalize {
 public:
  // The SIMD the loops use: the best this CPU has (AVX2 and FMA where present), or the baseline
  // every CPU of the architecture has, for tests that hold one against the other.
  enum class Simd { best, baseline };
  explicit ResizeNormalize(Simd simd = Simd::best);

  // Computes the filter taps of `geometry`; returns the source pixels they read.
  PixelRect prepare(const ResizeGeometry& geometry);
  // `rgb` holds rows `stride` bytes apart covering at least the prepared rect; its first pixel is
  // source pixel (origin_x, origin_y). Writes 3 x window.height x window.width floats to `out`.
  void run(const std::uint8_t* rgb, std::size_t stride, int origin_x, int origin_y, bool flip,
           const Normalization& normalization, float* out);

 private:
  struct Axis {
    int ksize = 0;
    // Every output pixel reads exactly ksize source pixels (zero weights pad the short ones), so
    // the inner loop has a constant trip count the compiler unrolls; false only when the domain
    // is narrower than ksize.
    bool fixed = false;
    std::vector<int> first;  // first source pixel of each output pixel's taps
    std::vector<int> count;
    std::vector<float> weights;  // ksize per output pixel
    int min = 0, max = 0;        // source pixels read: [min, max)
  };
  static void plan_axis(Axis& axis, int domain_begin, int domain_size, double box0, double box1,
                        int out_size, int window_begin, int window_size);
  void widen_weights();  // part of prepare(): x_'s weights for the AVX2 horizontal pass
  bool avx2_ = false;
  Axis x_, y_;
  std::vector<float> row_;           // one vertically resampled row, interleaved RGB
  std::vector<float> wide_weights_;  // x_'s weights laid out for the AVX2 horizontal pass
};

}  // namespace feedscope
