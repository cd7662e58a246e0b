#include "loader/jpeg_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "loader/image_dataset_maker.h"
#include "loader/image_transforms.h"
#include "loader/jpeg_encoder.h"
#include "loader/sample_rng.h"

namespace feedscope {
namespace {

std::vector<std::uint8_t> photo_jpeg(int width, int height, JpegEncodeOptions options = {},
                                     std::uint64_t index = 0) {
  return encode_jpeg(synthetic_photo(width, height, 1, 4, 7, index), width, height, options);
}

std::string decode_error(std::span<const std::uint8_t> data) {
  JpegDecoder decoder;
  std::vector<std::uint8_t> rgb;
  try {
    decoder.decode(data, rgb);
  } catch (const JpegError& e) {
    return e.what();
  }
  return "";
}

// The region's pixels resized to out x out with the project's resampler, in grey levels.
std::vector<float> resized(const std::vector<std::uint8_t>& rgb, const DecodedRegion& region,
                           const ResizeGeometry& geometry) {
  ResizeNormalize resize;
  resize.prepare(geometry);
  std::vector<float> out(static_cast<std::size_t>(3 * geometry.window.width * geometry.window.height));
  Normalization identity;
  identity.mean = {0, 0, 0};
  identity.std = {1.0f / 255, 1.0f / 255, 1.0f / 255};
  resize.run(rgb.data(), static_cast<std::size_t>(region.rect.width) * 3, region.rect.x, region.rect.y,
             false, identity, out.data());
  return out;
}

double mean_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += std::fabs(a[i] - b[i]);
  return sum / static_cast<double>(a.size());
}

TEST(JpegDecoderTest, ReadsTheHeader) {
  JpegDecoder decoder;
  const JpegHeader rgb = decoder.read_header(photo_jpeg(120, 80));
  EXPECT_EQ(rgb.width, 120);
  EXPECT_EQ(rgb.height, 80);
  EXPECT_EQ(rgb.components, 3);
  EXPECT_EQ(rgb.color_space, "YCbCr");
  std::vector<std::uint8_t> grey(50 * 30, 77);
  JpegEncodeOptions g;
  g.components = 1;
  const JpegHeader gray = decoder.read_header(encode_jpeg(grey, 50, 30, g));
  EXPECT_EQ(gray.components, 1);
  EXPECT_EQ(gray.color_space, "grayscale");
}

TEST(JpegDecoderTest, FullDecodeIsCloseToTheEncodedPixels) {
  const auto pixels = synthetic_photo(160, 120, 2, 4, 3, 0);
  JpegEncodeOptions o;
  o.quality = 98;
  o.subsample = false;
  JpegDecoder decoder;
  std::vector<std::uint8_t> rgb;
  const DecodedRegion r = decoder.decode(encode_jpeg(pixels, 160, 120, o), rgb);
  ASSERT_EQ(r.rect.width, 160);
  ASSERT_EQ(r.rect.height, 120);
  double sum = 0;
  for (std::size_t i = 0; i < pixels.size(); ++i) sum += std::abs(int(pixels[i]) - int(rgb[i]));
  EXPECT_LT(sum / static_cast<double>(pixels.size()), 3.0);
}

TEST(JpegDecoderTest, RegionEqualsTheSameCropOfAFullDecodeAtTheSameScale) {
  for (const bool progressive : {false, true}) {
    for (const bool subsample : {true, false}) {
      JpegEncodeOptions o;
      o.progressive = progressive;
      o.subsample = subsample;
      const auto file = photo_jpeg(203, 157, o);
      for (const int scale : {8, 6, 4, 3, 1}) {
        JpegDecoder decoder;
        std::vector<std::uint8_t> full, part;
        const int sw = JpegDecoder::scaled_size(203, scale), sh = JpegDecoder::scaled_size(157, scale);
        decoder.decode_region(file, scale, PixelRect{0, 0, sw, sh}, full);
        for (const PixelRect want : {PixelRect{37 * scale / 8, 45 * scale / 8, 101 * scale / 8, 60 * scale / 8},
                                     PixelRect{sw / 2, sh / 3, sw - sw / 2, 1}, PixelRect{1, sh - 3, 3, 3}}) {
          const DecodedRegion r = decoder.decode_region(file, scale, want, part);
          const std::string where = "progressive " + std::to_string(progressive) + " subsample " +
                                    std::to_string(subsample) + " scale " + std::to_string(scale) + "/8 rect " +
                                    std::to_string(want.x) + "," + std::to_string(want.y);
          // libjpeg crops at iMCU columns: wider on the left, never narrower.
          EXPECT_LE(r.rect.x, want.x) << where;
          EXPECT_GE(r.rect.x + r.rect.width, want.x + want.width) << where;
          EXPECT_EQ(r.rect.y, want.y) << where;
          EXPECT_EQ(r.rect.height, want.height) << where;
          EXPECT_EQ(r.scaled_width, sw);
          int worst = 0;
          for (int y = 0; y < want.height; ++y)
            for (int x = want.x; x < want.x + want.width; ++x)
              for (int c = 0; c < 3; ++c) {
                const int a = full[static_cast<std::size_t>(((want.y + y) * sw + x) * 3 + c)];
                const int b = part[static_cast<std::size_t>((y * r.rect.width + (x - r.rect.x)) * 3 + c)];
                worst = std::max(worst, std::abs(a - b));
              }
          EXPECT_EQ(worst, 0) << where;
        }
      }
    }
  }
}

TEST(JpegDecoderTest, ScaledRegionMatchesTheFullDecodeAfterResizing) {
  const auto file = photo_jpeg(500, 375);
  JpegDecoder decoder;
  std::vector<std::uint8_t> full, part;
  const DecodedRegion whole = decoder.decode(file, full);
  for (const CropBox crop : {CropBox{10, 20, 300, 400}, CropBox{100, 250, 160, 120}, CropBox{0, 0, 375, 500},
                             CropBox{200, 300, 175, 200}}) {
    const ResizeGeometry g = resized_crop_geometry(crop, 20);
    const int scale = choose_jpeg_scale(g);
    EXPECT_LT(scale, 8) << "a 20-pixel output from a crop of " << crop.width << " should scale down";
    EXPECT_GE(std::min(crop.width, crop.height) * scale, 8 * 20 * kReducedDecodeOversample)
        << "and never below the oversampled output";
    const ResizeGeometry gs = scale_geometry(g, scale, JpegDecoder::scaled_size(500, scale),
                                             JpegDecoder::scaled_size(375, scale));
    ResizeNormalize planner;
    const PixelRect needed = planner.prepare(gs);
    const DecodedRegion r = decoder.decode_region(file, scale, needed, part);
    EXPECT_EQ(r.scale_num, scale);
    const double diff = mean_abs_diff(resized(full, whole, g), resized(part, r, gs));
    EXPECT_LT(diff, 2.5) << "crop " << crop.left << "," << crop.top << " " << crop.width << "x"
                         << crop.height << " at scale " << scale << "/8";
  }
}

TEST(JpegDecoderTest, ScaleIsTheSmallestSimdScaleThatNeverUpsamples) {
  for (int crop = 1; crop <= 1200; crop += 7)
    for (const int out : {1, 32, 224, 256, 300}) {
      const int m = JpegDecoder::choose_scale(crop, crop, out, out);
      ASSERT_TRUE(m == 1 || m == 2 || m == 4 || m == 8) << m;
      if (crop >= out) {
        EXPECT_GE(crop * m, 8 * out) << crop << " -> " << out;  // scaled crop still covers out
        if (m > 1) {
          EXPECT_LT(crop * (m / 2), 8 * out) << crop << " -> " << out;  // and is the smallest
        }
      } else {
        EXPECT_EQ(m, 8);  // an upsampling resize gets the full image, never less
      }
    }
  // Each axis on its own: the tighter one decides.
  EXPECT_EQ(JpegDecoder::choose_scale(800, 224, 224, 224), 8);
  EXPECT_EQ(JpegDecoder::choose_scale(448, 448, 224, 224), 4);
  EXPECT_EQ(JpegDecoder::choose_scale(449, 447, 224, 224), 8);
  EXPECT_EQ(JpegDecoder::choose_scale(897, 897, 224, 224), 2);
  EXPECT_EQ(JpegDecoder::choose_scale(1792, 1792, 224, 224), 1);
}

TEST(JpegDecoderTest, TruncatedFileIsAnErrorNotGrey) {
  const auto file = photo_jpeg(200, 150);
  const std::vector<std::uint8_t> cut(file.begin(), file.begin() + static_cast<long>(file.size() * 6 / 10));
  const std::string error = decode_error(cut);
  EXPECT_NE(error.find("Premature end of JPEG file"), std::string::npos) << error;
  EXPECT_TRUE(has_end_of_image(file));
  EXPECT_FALSE(has_end_of_image(cut));
}

TEST(JpegDecoderTest, CorruptEntropyDataIsAnError) {
  const auto file = photo_jpeg(200, 150);
  std::vector<std::uint8_t> original;
  JpegDecoder decoder;
  decoder.decode(file, original);
  for (std::uint64_t seed = 0; seed < 16; ++seed) {
    SampleRng rng(seed);
    const std::size_t at = file.size() / 2 + static_cast<std::size_t>(rng.randint(0, 1000));
    // Random bytes with a stray marker in them (0xFF not followed by a stuffed 0x00): always
    // caught, as the entropy decoder runs into the marker.
    auto marked = file;
    for (std::size_t i = at; i < at + 64; ++i) marked[i] = static_cast<std::uint8_t>(rng.next());
    marked[at + 10] = 0xFF;
    marked[at + 11] = static_cast<std::uint8_t>(rng.randint(0x01, 0xFE));
    EXPECT_NE(decode_error(marked), "") << "seed " << seed;
    // Damage without a marker may go unreported: Huffman codes resynchronise, and libjpeg-turbo's
    // fast Huffman path turns an invalid code into a zero without a warning. Then the pixels
    // must at least show it, never silently equal the original.
    auto ones = file;  // a run of 1 bits, which no Huffman table codes
    for (std::size_t i = at; i < at + 32; i += 2) ones[i] = 0xFF, ones[i + 1] = 0x00;
    auto random = file;
    for (std::size_t i = at; i < at + 64; ++i) random[i] = static_cast<std::uint8_t>(rng.next() % 255);
    for (const auto* damaged : {&ones, &random}) {
      if (!decode_error(*damaged).empty()) continue;
      std::vector<std::uint8_t> pixels;
      decoder.decode(*damaged, pixels);
      EXPECT_FALSE(std::equal(original.begin(), original.begin() + 200 * 150 * 3, pixels.begin())) << seed;
    }
  }
}

TEST(JpegDecoderTest, PaddingBeforeTheEndMarkerIsNotCorruption) {
  const auto file = photo_jpeg(64, 48);
  const std::vector<std::uint8_t> junk(100, 0x5A);  // more than the entropy decoder reads ahead
  auto padded = file;
  padded.insert(padded.end() - 2, junk.begin(), junk.end());  // before FF D9
  EXPECT_EQ(decode_error(padded), "");
  std::vector<std::uint8_t> a, b;
  JpegDecoder decoder;
  decoder.decode(file, a);
  decoder.decode(padded, b);
  EXPECT_EQ(a, b);
  // The same junk in front of any other marker (a comment here) is damage.
  auto before_comment = file;
  std::vector<std::uint8_t> tail = junk;
  tail.insert(tail.end(), {0xFF, 0xFE, 0x00, 0x04, 'h', 'i'});
  before_comment.insert(before_comment.end() - 2, tail.begin(), tail.end());
  EXPECT_NE(decode_error(before_comment).find("extraneous bytes before marker 0xfe"), std::string::npos)
      << decode_error(before_comment);
}

TEST(JpegDecoderTest, BadHeaderIsAnErrorWithLibjpegsMessage) {
  auto file = photo_jpeg(64, 48);
  file[0] = 0x12;
  EXPECT_NE(decode_error(file).find("Not a JPEG file"), std::string::npos) << decode_error(file);
  EXPECT_NE(decode_error({}).find("empty"), std::string::npos);
  const std::vector<std::uint8_t> header_only(file.begin(), file.begin() + 40);
  EXPECT_NE(decode_error(header_only), "");
}

TEST(JpegDecoderTest, HugeClaimedSizeIsRefusedBeforeAllocating) {
  auto file = photo_jpeg(64, 48);
  // Baseline SOF0: FF C0, length (2), precision (1), height (2), width (2).
  std::size_t sof = 0;
  while (!(file[sof] == 0xFF && file[sof + 1] == 0xC0)) ++sof;
  file[sof + 5] = 0xF0, file[sof + 6] = 0x00;  // height 61440
  file[sof + 7] = 0xF0, file[sof + 8] = 0x00;  // width 61440
  JpegDecoder decoder;
  EXPECT_EQ(decoder.read_header(file).width, 0xF000);
  std::vector<std::uint8_t> rgb;
  try {
    decoder.decode(file, rgb);
    ADD_FAILURE() << "decoded";
  } catch (const JpegError& e) {
    EXPECT_NE(std::string(e.what()).find("pixel limit"), std::string::npos) << e.what();
  }
  EXPECT_LT(rgb.capacity(), 1u << 20);
}

TEST(JpegDecoderTest, DecoderIsReusableAfterAnError) {
  const auto good = photo_jpeg(64, 48);
  auto bad = good;
  bad.resize(bad.size() / 2);
  JpegDecoder decoder;
  std::vector<std::uint8_t> rgb, again;
  decoder.decode(good, rgb);
  EXPECT_THROW(decoder.decode(bad, again), JpegError);
  decoder.decode(good, again);
  EXPECT_TRUE(std::equal(rgb.begin(), rgb.begin() + 64 * 48 * 3, again.begin()));
}

TEST(JpegDecoderTest, MangledFilesEitherDecodeOrThrowJpegError) {
  // Whatever the damage (cut anywhere, bytes flipped anywhere, header included), the decoder
  // throws JpegError or returns pixels; it never crashes or throws anything else, and it stays
  // usable. Run under AddressSanitizer this also checks memory safety.
  JpegEncodeOptions progressive;
  progressive.progressive = true;
  const std::vector<std::vector<std::uint8_t>> files = {photo_jpeg(96, 72), photo_jpeg(96, 72, progressive)};
  JpegDecoder decoder;
  std::vector<std::uint8_t> rgb;
  int thrown = 0, decoded = 0;
  for (std::uint64_t n = 0; n < 400; ++n) {
    SampleRng rng(n);
    auto bytes = files[n % 2];
    if (rng.bernoulli(0.3)) bytes.resize(static_cast<std::size_t>(rng.randint(0, static_cast<std::int64_t>(bytes.size()))));
    const int flips = static_cast<int>(rng.randint(0, 6));
    for (int f = 0; f < flips && !bytes.empty(); ++f)
      bytes[static_cast<std::size_t>(rng.randint(0, static_cast<std::int64_t>(bytes.size()) - 1))] =
          static_cast<std::uint8_t>(rng.next());
    try {
      const int scale = n % 3 == 0 ? 4 : 8;
      if (n % 2) {
        decoder.decode(bytes, rgb);
      } else {
        const JpegHeader h = decoder.read_header(bytes);
        const int w = JpegDecoder::scaled_size(h.width, scale), ht = JpegDecoder::scaled_size(h.height, scale);
        decoder.decode_region(bytes, scale, PixelRect{w / 4, ht / 4, std::max(1, w / 2), std::max(1, ht / 2)}, rgb);
      }
      ++decoded;
    } catch (const JpegError&) {
      ++thrown;
    } catch (const std::invalid_argument&) {
      ++thrown;  // a mangled header can shrink the image below the asked-for region
    }
  }
  EXPECT_GT(thrown, 50);
  EXPECT_GT(decoded, 50);
  EXPECT_NO_THROW(decoder.decode(files[0], rgb));
}

TEST(JpegDecoderTest, GrayscaleDecodesToRgb) {
  std::vector<std::uint8_t> grey(40 * 24);
  for (std::size_t i = 0; i < grey.size(); ++i) grey[i] = static_cast<std::uint8_t>(60 + (i % 40) * 3);
  JpegEncodeOptions o;
  o.components = 1;
  o.quality = 100;
  JpegDecoder decoder;
  std::vector<std::uint8_t> rgb;
  decoder.decode(encode_jpeg(grey, 40, 24, o), rgb);
  for (std::size_t i = 0; i < grey.size(); ++i) {
    EXPECT_EQ(rgb[3 * i], rgb[3 * i + 1]);
    EXPECT_EQ(rgb[3 * i], rgb[3 * i + 2]);
    EXPECT_NEAR(rgb[3 * i], grey[i], 2);
  }
}

TEST(JpegDecoderTest, AdobeCmykDecodesToRgb) {
  // Adobe stores CMYK inverted: 255 is no ink, 0 full ink.
  std::vector<std::uint8_t> cmyk(32 * 16 * 4);
  for (std::size_t i = 0; i < 32 * 16; ++i) {
    cmyk[4 * i] = 255;      // no cyan
    cmyk[4 * i + 1] = 0;    // full magenta
    cmyk[4 * i + 2] = 127;  // half yellow
    cmyk[4 * i + 3] = 255;  // no black
  }
  JpegEncodeOptions o;
  o.components = 4;
  o.quality = 100;
  const auto file = encode_jpeg(cmyk, 32, 16, o);
  JpegDecoder decoder;
  EXPECT_EQ(decoder.read_header(file).color_space, "CMYK");
  std::vector<std::uint8_t> rgb;
  decoder.decode(file, rgb);
  for (std::size_t i = 0; i < 32 * 16; ++i) {
    EXPECT_NEAR(rgb[3 * i], 255, 3);
    EXPECT_NEAR(rgb[3 * i + 1], 0, 3);
    EXPECT_NEAR(rgb[3 * i + 2], 127, 3);
  }
}

TEST(JpegDecoderTest, RegionOutsideTheImageIsRejected) {
  const auto file = photo_jpeg(64, 48);
  JpegDecoder decoder;
  std::vector<std::uint8_t> rgb;
  EXPECT_THROW(decoder.decode_region(file, 8, PixelRect{60, 0, 10, 10}, rgb), std::invalid_argument);
  EXPECT_THROW(decoder.decode_region(file, 4, PixelRect{0, 0, 33, 10}, rgb), std::invalid_argument);
  EXPECT_THROW(decoder.decode_region(file, 9, PixelRect{0, 0, 8, 8}, rgb), std::invalid_argument);
  EXPECT_NO_THROW(decoder.decode_region(file, 4, PixelRect{0, 0, 32, 24}, rgb));
}

}  // namespace
}  // namespace feedscope
