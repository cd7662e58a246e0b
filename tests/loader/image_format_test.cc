#include "loader/image_format.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loader/image_decoder.h"

namespace feedscope {
namespace {

std::vector<std::uint8_t> bytes(const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); }

TEST(ImageFormatTest, SniffsTheSignatureNotTheName) {
  EXPECT_EQ(sniff_image_format(bytes("\xFF\xD8\xFF\xE0")), ImageFormat::jpeg);
  EXPECT_EQ(sniff_image_format(bytes(std::string("\x89PNG\r\n\x1A\n", 8) + "IHDR")), ImageFormat::png);
  EXPECT_EQ(sniff_image_format(bytes("RIFF\x10\x20\x30\x40WEBPVP8 ")), ImageFormat::webp);
  EXPECT_EQ(sniff_image_format(bytes("RIFF\x10\x20\x30\x40WAVEfmt ")), ImageFormat::unknown);
  EXPECT_EQ(sniff_image_format(bytes("BM\x36\x00")), ImageFormat::bmp);
  EXPECT_EQ(sniff_image_format(bytes("P6\n3 2\n255\n")), ImageFormat::pnm);
  EXPECT_EQ(sniff_image_format(bytes("P5 1 1 255 ")), ImageFormat::pnm);
  EXPECT_EQ(sniff_image_format(bytes("P7\n")), ImageFormat::unknown);
  EXPECT_EQ(sniff_image_format(bytes(std::string("II*\0", 4))), ImageFormat::tiff);
  EXPECT_EQ(sniff_image_format(bytes(std::string("MM\0*", 4))), ImageFormat::tiff);
  EXPECT_EQ(sniff_image_format(bytes("\xFF\xD8")), ImageFormat::unknown);  // cut inside the signature
  EXPECT_EQ(sniff_image_format({}), ImageFormat::unknown);
  EXPECT_EQ(sniff_image_format(bytes("GIF89a")), ImageFormat::unknown);
  EXPECT_EQ(describe_signature({}), "an empty file");
  EXPECT_EQ(describe_signature(bytes("GIF89a")), "a file starting 47 49 46 38 39 61");
}

TEST(ImageFormatTest, ExtensionsAreTorchvisionsInAnyCase) {
  for (const char* name : {"a.jpg", "a.JPEG", "b.Png", "c.ppm", "d.BMP", "e.pgm", "f.tif", "g.TiFf", "h.webp",
                           ".jpg", "x.tar.png"})
    EXPECT_TRUE(has_image_extension(name)) << name;
  for (const char* name : {"a.gif", "jpg", "a.jpg.txt", "a.jpe", "a.tga", "", "a.pnm"})
    EXPECT_FALSE(has_image_extension(name)) << name;
}

TEST(ImageFormatTest, DecodersRefuseGarbageWithTheFormatInTheMessage) {
  ImageDecoder decoder;
  std::vector<std::uint8_t> rgb;
  const std::vector<std::pair<ImageFormat, std::string>> cases = {
      {ImageFormat::png, std::string("\x89PNG\r\n\x1A\n", 8) + "garbage"},
      {ImageFormat::webp, "RIFF\x04\x00\x00\x00WEBPVP8 xx"},
      {ImageFormat::bmp, "BMgarbage"},
      {ImageFormat::pnm, "P6\n9999999 9999999\n255\n"},
      {ImageFormat::pnm, "P3\n1 1\n255\n1 2 3\n"},
      {ImageFormat::tiff, std::string("II*\0\xff\xff\xff\x7f", 8)},
  };
  for (const auto& [format, data] : cases) {
    try {
      decoder.decode(bytes(data), format, rgb);
      ADD_FAILURE() << image_format_name(format) << " garbage decoded";
    } catch (const ImageError& e) {
      EXPECT_NE(std::string(e.what()).find(image_format_name(format)), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(decoder.decode(bytes("\xFF\xD8\xFF"), ImageFormat::jpeg, rgb), std::invalid_argument);
}

}  // namespace
}  // namespace feedscope
