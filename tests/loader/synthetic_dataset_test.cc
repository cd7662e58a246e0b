#include "loader/synthetic_dataset.h"

#include <gtest/gtest.h>

#include <cmath>

namespace feedscope {
namespace {

TEST(SyntheticDatasetTest, ParsesShapesAndRejectsBadOnes) {
  EXPECT_EQ(parse_shape("3x32x32"), (std::vector<std::int64_t>{3, 32, 32}));
  EXPECT_EQ(parse_shape("784"), (std::vector<std::int64_t>{784}));
  for (const char* bad : {"", "x", "3x", "3xx4", "0x4", "-3", "3x4x5x6x7", "abc", "3.5"})
    EXPECT_THROW(parse_shape(bad), DatasetError) << "'" << bad << "'";
}

TEST(SyntheticDatasetTest, SameSeedSameSamplesAndLabelsCycleClasses) {
  SyntheticDataset::Options o;
  o.shape = {4, 4};
  o.count = 50;
  o.classes = 5;
  o.seed = 3;
  SyntheticDataset a(o), b(o);
  std::vector<float> x(16), y(16);
  LoadContext ctx;
  for (std::size_t i = 0; i < 50; ++i) {
    const auto la = a.load(i, std::as_writable_bytes(std::span(x)), ctx);
    const auto lb = b.load(i, std::as_writable_bytes(std::span(y)), ctx);
    EXPECT_EQ(la, lb);
    EXPECT_EQ(la, static_cast<std::int64_t>(i % 5));
    EXPECT_EQ(x, y);
  }
}

TEST(SyntheticDatasetTest, WrapsStorageBeyondTheByteCap) {
  SyntheticDataset::Options o;
  o.shape = {256};
  o.count = 1000;
  o.max_stored_bytes = 256 * 4 * 10;  // 10 distinct samples
  SyntheticDataset d(o);
  std::vector<float> first(256), wrapped(256);
  LoadContext ctx;
  d.load(3, std::as_writable_bytes(std::span(first)), ctx);
  d.load(13, std::as_writable_bytes(std::span(wrapped)), ctx);
  EXPECT_EQ(first, wrapped);
  EXPECT_THROW(d.load(1000, std::as_writable_bytes(std::span(first)), ctx), SampleError);
}

TEST(SyntheticDatasetTest, ValuesAreFiniteWithUnitScaleNoise) {
  SyntheticDataset::Options o;
  o.shape = {3, 8, 8};
  o.count = 64;
  SyntheticDataset d(o);
  std::vector<float> x(192);
  LoadContext ctx;
  double sum = 0, sq = 0;
  for (std::size_t i = 0; i < 64; ++i) {
    d.load(i, std::as_writable_bytes(std::span(x)), ctx);
    for (float v : x) {
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      sq += v * v;
    }
  }
  const double n = 64.0 * 192, mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(var, 1.0, 0.15);
}

}  // namespace
}  // namespace feedscope
