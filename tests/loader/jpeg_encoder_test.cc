#include "loader/jpeg_encoder.h"

#include <gtest/gtest.h>

#include "loader/jpeg_decoder.h"

namespace feedscope {
namespace {

std::vector<std::uint8_t> gradient(int width, int height, int components) {
  std::vector<std::uint8_t> p(static_cast<std::size_t>(width * height * components));
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < components; ++c)
        p[static_cast<std::size_t>((y * width + x) * components + c)] = static_cast<std::uint8_t>(x * 3 + y * 2 + c * 40);
  return p;
}

TEST(JpegEncoderTest, SamePixelsSameBytesAndQualityTradesSize) {
  const auto pixels = gradient(80, 60, 3);
  JpegEncodeOptions o;
  const auto a = encode_jpeg(pixels, 80, 60, o);
  EXPECT_EQ(a, encode_jpeg(pixels, 80, 60, o));
  ASSERT_GE(a.size(), 4u);
  EXPECT_EQ(a[0], 0xFF);
  EXPECT_EQ(a[1], 0xD8);  // start of image
  EXPECT_EQ(a[a.size() - 2], 0xFF);
  EXPECT_EQ(a[a.size() - 1], 0xD9);  // end of image
  o.quality = 30;
  EXPECT_LT(encode_jpeg(pixels, 80, 60, o).size(), a.size());
}

TEST(JpegEncoderTest, RoundTripsThroughTheDecoder) {
  for (const bool progressive : {false, true}) {
    const auto pixels = gradient(48, 40, 3);
    JpegEncodeOptions o;
    o.quality = 100;
    o.subsample = false;
    o.progressive = progressive;
    JpegDecoder decoder;
    std::vector<std::uint8_t> rgb;
    const DecodedRegion r = decoder.decode(encode_jpeg(pixels, 48, 40, o), rgb);
    ASSERT_EQ(r.rect.width, 48);
    ASSERT_EQ(r.rect.height, 40);
    for (std::size_t i = 0; i < pixels.size(); ++i) ASSERT_NEAR(rgb[i], pixels[i], 3) << i;
  }
}

TEST(JpegEncoderTest, RejectsBadArguments) {
  const auto pixels = gradient(8, 8, 3);
  EXPECT_THROW(encode_jpeg(pixels, 0, 8), std::invalid_argument);
  EXPECT_THROW(encode_jpeg(pixels, 9, 8), std::invalid_argument) << "too few bytes";
  JpegEncodeOptions o;
  o.quality = 0;
  EXPECT_THROW(encode_jpeg(pixels, 8, 8, o), std::invalid_argument);
  o.quality = 90;
  o.components = 2;
  EXPECT_THROW(encode_jpeg(pixels, 8, 8, o), std::invalid_argument);
}

}  // namespace
}  // namespace feedscope
