#pragma once
// JPEG decoding through libjpeg-turbo's libjpeg API, which (unlike TurboJPEG 2.1) can scale in
// the DCT domain and decode only a crop's rows and columns. jpeglib.h stays out of this header.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loader/image_error.h"

namespace feedscope {

// A file libjpeg rejects, or one it would only half-decode (truncated, corrupt entropy data).
// what() is libjpeg's own message.
class JpegError : public ImageError {
 public:
  using ImageError::ImageError;
};

struct JpegHeader {
  int width = 0;
  int height = 0;
  int components = 0;       // in the file: 1 grayscale, 3 YCbCr/RGB, 4 CMYK/YCCK
  std::string color_space;  // "grayscale", "YCbCr", "RGB", "CMYK", "YCCK"
};

// A rectangle of pixels: [x, x + width) x [y, y + height).
struct PixelRect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// Decoded RGB pixels (3 bytes per pixel, rows `width * 3` apart) covering `rect` of the image
// scaled by scale_num/8, whose full size is scaled_width x scaled_height.
struct DecodedRegion {
  PixelRect rect;
  int scaled_width = 0;
  int scaled_height = 0;
  int scale_num = 8;
};

// Not thread-safe: one decoder per worker thread. Reuses one libjpeg decompressor across images,
// so steady-state decoding allocates only inside libjpeg's per-image pool.
class JpegDecoder {
 public:
  // Larger images are refused (JpegError) before anything is allocated for them: one flipped bit
  // in a frame header can claim 65000x65000 pixels. PIL's limit (Image.MAX_IMAGE_PIXELS x 2), so
  // torchvision refuses the same files.
  static constexpr std::int64_t kMaxPixels = 2 * std::int64_t{89478485};

  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  JpegHeader read_header(std::span<const std::uint8_t> data);

  // The whole image at full size. `rgb` grows as needed and is never shrunk.
  DecodedRegion decode(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& rgb);

  // Only the pixels of `rect`, given in the coordinates of the image scaled by scale_num/8
  // (1..8). The result may be wider than asked: libjpeg crops at iMCU column boundaries. Rows
  // below the rect are never decoded, so a file damaged there is caught only by the end-of-image
  // marker check. Throws JpegError for bad data or an image over kMaxPixels, and
  // std::invalid_argument for a scale or rect outside the image.
  DecodedRegion decode_region(std::span<const std::uint8_t> data, int scale_num, PixelRect rect,
                              std::vector<std::uint8_t>& rgb);

  // The smallest M of 1, 2, 4, 8 such that a crop_width x crop_height crop scaled by M/8 still
  // covers out_width x out_height, so the resize that follows only ever shrinks. Only those four
  // scales have SIMD inverse DCTs in libjpeg-turbo; 3/8, 5/8, 6/8 and 7/8 run plain C and decode
  // slower than the full size does (bench/image_bench.cc, BM_DecodeScaled).
  static int choose_scale(int crop_width, int crop_height, int out_width, int out_height) noexcept;
  // libjpeg's size of a `size`-pixel dimension scaled by scale_num/8 (rounded up).
  static int scaled_size(int size, int scale_num) noexcept { return (size * scale_num + 7) / 8; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether the data ends with an end-of-image marker (allowing a little trailing padding). A
// region decode stops early, so this is what tells it a file was cut short.
bool has_end_of_image(std::span<const std::uint8_t> data) noexcept;

}  // namespace feedscope
