#include "loader/image_transforms.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "loader/sample_rng.h"

namespace feedscope {
namespace {

// torchvision's RandomResizedCrop.get_params written out again, on the standard library's RNG,
// to compare distributions with.
struct ReferenceCrop {
  int i, j, h, w;
};
ReferenceCrop reference_get_params(int width, int height, std::mt19937_64& gen) {
  std::uniform_real_distribution<double> scale(0.08, 1.0);
  std::uniform_real_distribution<double> log_ratio(std::log(3.0 / 4.0), std::log(4.0 / 3.0));
  const double area = double(width) * height;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * scale(gen);
    const double aspect_ratio = std::exp(log_ratio(gen));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target_area * aspect_ratio)));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target_area / aspect_ratio)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int i = std::uniform_int_distribution<int>(0, height - h)(gen);
      const int j = std::uniform_int_distribution<int>(0, width - w)(gen);
      return {i, j, h, w};
    }
  }
  const double in_ratio = double(width) / height;
  int w = width, h = height;
  if (in_ratio < 3.0 / 4.0) h = static_cast<int>(std::nearbyint(w / (3.0 / 4.0)));
  else if (in_ratio > 4.0 / 3.0) w = static_cast<int>(std::nearbyint(h * (4.0 / 3.0)));
  return {(height - h) / 2, (width - w) / 2, h, w};
}

struct CropStats {
  double area = 0, log_ratio = 0, left = 0, fallback = 0;
};

TEST(RandomResizedCropTest, DistributionMatchesTorchvisionsAlgorithm) {
  constexpr int kDraws = 20000;
  for (const auto& [width, height] : {std::pair{500, 375}, std::pair{375, 500}, std::pair{100, 1000}}) {
    // The central crop torchvision falls back to after ten misses.
    const double in_ratio = double(width) / height;
    const int fb_w = in_ratio > 4.0 / 3.0 ? static_cast<int>(std::nearbyint(height * 4.0 / 3.0)) : width;
    const int fb_h = in_ratio < 3.0 / 4.0 ? static_cast<int>(std::nearbyint(width * 4.0 / 3.0)) : height;
    const auto add = [&](CropStats& s, int i, int j, int h, int w) {
      ASSERT_GT(w, 0);
      ASSERT_GT(h, 0);
      ASSERT_GE(i, 0);
      ASSERT_GE(j, 0);
      ASSERT_LE(i + h, height);
      ASSERT_LE(j + w, width);
      s.area += double(w) * h / (double(width) * height) / kDraws;
      s.log_ratio += std::log(double(w) / h) / kDraws;
      if (width > w) s.left += double(j) / (width - w) / kDraws;
      if (w == fb_w && h == fb_h && i == (height - h) / 2 && j == (width - w) / 2) s.fallback += 1.0 / kDraws;
    };
    CropStats ours, ref;
    std::mt19937_64 gen(12345);
    for (int n = 0; n < kDraws; ++n) {
      SampleRng rng(7, 0, static_cast<std::uint64_t>(n));
      const CropBox c = random_resized_crop_box(width, height, rng);
      add(ours, c.top, c.left, c.height, c.width);
      const ReferenceCrop r = reference_get_params(width, height, gen);
      add(ref, r.i, r.j, r.h, r.w);
    }
    const std::string where = std::to_string(width) + "x" + std::to_string(height);
    // Tolerances are about 4.5 standard errors of the difference of two 20000-draw means.
    EXPECT_NEAR(ours.area, ref.area, 0.012) << where;
    EXPECT_NEAR(ours.log_ratio, ref.log_ratio, 0.008) << where;
    EXPECT_NEAR(ours.fallback, ref.fallback, 0.02) << where;
    if (width < 200) {
      EXPECT_GT(ref.fallback, 0.5) << "a 1:10 image should mostly fall back";
    } else {
      EXPECT_LT(ref.fallback, 0.01) << where;
      EXPECT_NEAR(ours.left, 0.5, 0.01) << where;
    }
  }
}

TEST(RandomResizedCropTest, FallsBackToTheClampedCentralCrop) {
  // No attempt can fit a 1:40 strip, so every draw is torchvision's fallback.
  for (std::uint64_t n = 0; n < 50; ++n) {
    SampleRng rng(n);
    const CropBox wide = random_resized_crop_box(4000, 100, rng);
    EXPECT_EQ(wide.width, 133);  // round(100 * 4/3)
    EXPECT_EQ(wide.height, 100);
    EXPECT_EQ(wide.left, (4000 - 133) / 2);
    EXPECT_EQ(wide.top, 0);
  }
}

TEST(ResizeGeometryTest, EvalSizesAndRoundsAsTorchvision) {
  const ResizeGeometry land = resize_center_crop_geometry(500, 375, 256, 224);
  EXPECT_EQ(land.out_width, 341);  // int(256 * 500 / 375)
  EXPECT_EQ(land.out_height, 256);
  EXPECT_EQ(land.window.x, 58);    // round(58.5) is 58: Python rounds half to even
  EXPECT_EQ(land.window.y, 16);
  const ResizeGeometry port = resize_center_crop_geometry(333, 500, 256, 224);
  EXPECT_EQ(port.out_width, 256);
  EXPECT_EQ(port.out_height, 384);  // int(384.38)
  EXPECT_EQ(port.window.x, 16);
  EXPECT_EQ(port.window.y, 80);
  EXPECT_THROW(resize_center_crop_geometry(500, 375, 200, 224), std::invalid_argument);
}

// PIL's bilinear resize of the whole image, in double, straight from the definition: each output
// pixel a triangle-weighted mean over source pixel centres, the triangle widened by the shrink
// factor, clamped at the image border.
std::vector<double> reference_resize(const std::vector<std::uint8_t>& rgb, int width, int height, int ow, int oh) {
  const auto weights = [](int in, int out, int o, int& first) {
    const double scale = double(in) / out, fs = std::max(scale, 1.0), center = (o + 0.5) * scale;
    first = std::max(0, static_cast<int>(center - fs + 0.5));
    const int last = std::min(in, static_cast<int>(center + fs + 0.5));
    std::vector<double> w;
    double total = 0;
    for (int x = first; x < last; ++x) {
      w.push_back(std::max(0.0, 1.0 - std::fabs((x + 0.5 - center) / fs)));
      total += w.back();
    }
    for (double& v : w) v /= total;
    return w;
  };
  std::vector<double> out(static_cast<std::size_t>(ow * oh * 3));
  for (int y = 0; y < oh; ++y) {
    int fy;
    const auto wy = weights(height, oh, y, fy);
    for (int x = 0; x < ow; ++x) {
      int fx;
      const auto wx = weights(width, ow, x, fx);
      for (int c = 0; c < 3; ++c) {
        double v = 0;
        for (std::size_t a = 0; a < wy.size(); ++a)
          for (std::size_t b = 0; b < wx.size(); ++b)
            v += wy[a] * wx[b] * rgb[((fy + a) * width + fx + b) * 3 + c];
        out[(y * ow + x) * 3 + c] = v;
      }
    }
  }
  return out;
}

std::vector<std::uint8_t> test_pattern(int width, int height) {
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(width * height * 3));
  SampleRng rng(5);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c)
        rgb[(y * width + x) * 3 + c] = static_cast<std::uint8_t>(
            std::clamp(128 + 60 * std::sin(x * 0.13 + c) * std::cos(y * 0.07) + rng.randint(-20, 20), 0.0, 255.0));
  return rgb;
}

TEST(ResizeNormalizeTest, EvalPipelineMatchesAReferenceResizeThenCenterCrop) {
  const int width = 150, height = 113;
  const auto rgb = test_pattern(width, height);
  const ResizeGeometry g = resize_center_crop_geometry(width, height, 73, 64);
  ResizeNormalize resize;
  const PixelRect needed = resize.prepare(g);
  EXPECT_GE(needed.x, 0);
  EXPECT_LE(needed.x + needed.width, width);
  std::vector<float> out(3 * 64 * 64);
  const Normalization n;
  resize.run(rgb.data(), width * 3, 0, 0, false, n, out.data());
  const auto ref = reference_resize(rgb, width, height, g.out_width, g.out_height);
  double worst = 0;
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 64; ++y)
      for (int x = 0; x < 64; ++x) {
        const double v = ref[((y + g.window.y) * g.out_width + x + g.window.x) * 3 + c];
        const double expected = (v / 255.0 - n.mean[c]) / n.std[c];
        worst = std::max(worst, std::fabs(expected - out[(c * 64 + y) * 64 + x]));
      }
  EXPECT_LT(worst, 1e-4);
}

TEST(ResizeNormalizeTest, ResizedCropMatchesAReferenceCropThenResize) {
  const int width = 120, height = 90;
  const auto rgb = test_pattern(width, height);
  const CropBox crop{11, 23, 61, 77};
  std::vector<std::uint8_t> cropped(static_cast<std::size_t>(crop.width * crop.height * 3));
  for (int y = 0; y < crop.height; ++y)
    std::copy_n(&rgb[((crop.top + y) * width + crop.left) * 3], crop.width * 3, &cropped[y * crop.width * 3]);
  ResizeNormalize resize;
  const PixelRect needed = resize.prepare(resized_crop_geometry(crop, 32));
  // Taps stay inside the crop, as PIL resizes the cropped image.
  EXPECT_GE(needed.x, crop.left);
  EXPECT_LE(needed.x + needed.width, crop.left + crop.width);
  EXPECT_GE(needed.y, crop.top);
  EXPECT_LE(needed.y + needed.height, crop.top + crop.height);
  std::vector<float> out(3 * 32 * 32);
  Normalization n;
  resize.run(rgb.data(), width * 3, 0, 0, false, n, out.data());
  const auto ref = reference_resize(cropped, crop.width, crop.height, 32, 32);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 32 * 32; ++i)
      ASSERT_NEAR((ref[i * 3 + c] / 255.0 - n.mean[c]) / n.std[c], out[c * 1024 + i], 1e-4);
}

// Every SIMD path (AVX2 where the CPU has it, and the baseline) against the reference, over crops
// whose taps are 3, 5, 7 and 9 wide or vary per pixel (a domain narrower than the taps), output
// widths that leave a tail after the groups of eight, and both flips.
TEST(ResizeNormalizeTest, EverySimdPathMatchesTheReference) {
  const int width = 160, height = 120;
  const auto rgb = test_pattern(width, height);
  struct Case {
    CropBox crop;
    int size;
  };
  const Case cases[] = {
      {{3, 5, 90, 120}, 64},  // shrink 1.4-1.9: 5 taps
      {{0, 0, 120, 160}, 37}, // 3.2-4.3: 9 taps, a tail of 5
      {{10, 20, 60, 70}, 40}, // 1.5-1.75: 5 taps
      {{7, 9, 30, 33}, 29},   // ~1.1: 5 taps, a tail of 5
      {{2, 2, 50, 50}, 50},   // 1: 3 taps
      {{1, 4, 100, 150}, 24}, // 4.2-6.3: 13 taps
      {{0, 0, 4, 6}, 3},      // a domain narrower than the taps: counts per pixel
      {{12, 30, 80, 100}, 33}, // 2.4-3: 7 taps
  };
  const Normalization n;
  for (const ResizeNormalize::Simd simd : {ResizeNormalize::Simd::best, ResizeNormalize::Simd::baseline}) {
    ResizeNormalize resize(simd);
    for (const Case& c : cases) {
      std::vector<std::uint8_t> cropped(static_cast<std::size_t>(c.crop.width * c.crop.height * 3));
      for (int y = 0; y < c.crop.height; ++y)
        std::copy_n(&rgb[static_cast<std::size_t>(((c.crop.top + y) * width + c.crop.left) * 3)],
                    c.crop.width * 3, &cropped[static_cast<std::size_t>(y * c.crop.width * 3)]);
      const auto ref = reference_resize(cropped, c.crop.width, c.crop.height, c.size, c.size);
      resize.prepare(resized_crop_geometry(c.crop, c.size));
      const auto plane = static_cast<std::size_t>(c.size * c.size);
      for (const bool flip : {false, true}) {
        std::vector<float> out(3 * plane);
        resize.run(rgb.data(), width * 3, 0, 0, flip, n, out.data());
        for (int ch = 0; ch < 3; ++ch)
          for (int y = 0; y < c.size; ++y)
            for (int x = 0; x < c.size; ++x) {
              const std::size_t r = static_cast<std::size_t>((y * c.size + (flip ? c.size - 1 - x : x)) * 3 + ch);
              ASSERT_NEAR((ref[r] / 255.0 - n.mean[static_cast<std::size_t>(ch)]) / n.std[static_cast<std::size_t>(ch)],
                          out[static_cast<std::size_t>(ch) * plane + static_cast<std::size_t>(y * c.size + x)], 1e-4)
                  << (simd == ResizeNormalize::Simd::best ? "best" : "baseline") << " crop " << c.crop.width
                  << "x" << c.crop.height << " -> " << c.size << (flip ? " flipped" : "") << " at " << x << ","
                  << y << " channel " << ch;
            }
      }
    }
  }
}

TEST(ResizeNormalizeTest, PreservesALinearRampAtPixelCentres) {
  // A triangle filter reproduces a linear ramp away from the border, up to the sampling of the
  // triangle on the pixel grid (a few hundredths of a level here), which pins the half-pixel
  // convention independently of any reimplementation: an error there shifts by ~1.3 levels.
  const int width = 200, height = 8, out_width = 75;
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(width * height * 3));
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) rgb[(y * width + x) * 3 + c] = static_cast<std::uint8_t>(20 + x);
  ResizeGeometry g;
  g.domain = PixelRect{0, 0, width, height};
  g.box_x1 = width;
  g.box_y1 = height;
  g.out_width = out_width;
  g.out_height = height;
  g.window = PixelRect{0, 0, out_width, height};
  ResizeNormalize resize;
  resize.prepare(g);
  std::vector<float> out(static_cast<std::size_t>(3 * out_width * height));
  Normalization identity;
  identity.mean = {0, 0, 0};
  identity.std = {1.0f / 255, 1.0f / 255, 1.0f / 255};
  resize.run(rgb.data(), width * 3, 0, 0, false, identity, out.data());
  for (int x = 3; x < out_width - 3; ++x) {
    const double center = (x + 0.5) * width / out_width;  // source pixel i spans [i, i + 1)
    EXPECT_NEAR(out[static_cast<std::size_t>(3 * out_width + x)], 20 + center - 0.5, 0.05) << x;
  }
}

TEST(ResizeNormalizeTest, NormalizesKnownPixelsAndFlipMirrors) {
  std::vector<std::uint8_t> flat(80 * 60 * 3, 124);
  ResizeNormalize resize;
  resize.prepare(resized_crop_geometry(CropBox{5, 7, 40, 50}, 16));
  std::vector<float> out(3 * 16 * 16);
  const Normalization n;
  resize.run(flat.data(), 80 * 3, 0, 0, false, n, out.data());
  for (int c = 0; c < 3; ++c) {
    const float expected = (124.0f / 255.0f - n.mean[c]) / n.std[c];
    for (int i = 0; i < 256; ++i) ASSERT_NEAR(out[c * 256 + i], expected, 1e-5) << c;
  }
  EXPECT_NEAR(out[0], (124.0 / 255 - 0.485) / 0.229, 1e-5);

  const auto rgb = test_pattern(80, 60);
  std::vector<float> plain(3 * 16 * 16), mirrored(3 * 16 * 16);
  resize.run(rgb.data(), 80 * 3, 0, 0, false, n, plain.data());
  resize.run(rgb.data(), 80 * 3, 0, 0, true, n, mirrored.data());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 16; ++y)
      for (int x = 0; x < 16; ++x) ASSERT_EQ(plain[(c * 16 + y) * 16 + x], mirrored[(c * 16 + y) * 16 + 15 - x]);
}

TEST(ResizeGeometryTest, ScaledGeometryKeepsTheResizeAShrink) {
  for (std::uint64_t n = 0; n < 2000; ++n) {
    SampleRng rng(3, 1, n);
    const CropBox crop = random_resized_crop_box(500, 375, rng);
    const ResizeGeometry g = resized_crop_geometry(crop, 224);
    const int m = choose_jpeg_scale(g);
    const ResizeGeometry s = scale_geometry(g, m, (500 * m + 7) / 8, (375 * m + 7) / 8);
    if (crop.width >= 224 && crop.height >= 224) {
      // Still at least the output after scaling (never upsampled), and the smallest such scale.
      EXPECT_GE(s.box_x1 - s.box_x0, 224.0) << n;
      EXPECT_GE(s.box_y1 - s.box_y0, 224.0) << n;
      if (m > 1) {
        EXPECT_TRUE(crop.width * (m / 2) < 8 * 224 || crop.height * (m / 2) < 8 * 224) << n;
      }
    } else {
      EXPECT_EQ(m, 8) << n;
    }
    EXPECT_GE(s.domain.x, 0);
    EXPECT_LE(s.domain.x + s.domain.width, (500 * m + 7) / 8);
  }
}

}  // namespace
}  // namespace feedscope
