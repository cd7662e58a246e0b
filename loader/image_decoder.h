#pragma once
// Whole-image decoding for every format torchvision's ImageFolder reads except JPEG (which
// JpegDecoder decodes by region and at reduced scale), each through the Debian library made for
// it: libpng, libwebp, libtiff, and stb_image for BMP and PPM/PGM. The result is RGB as PIL's
// Image.convert('RGB') makes it. No codec header leaks from here.
#include <cstdint>
#include <span>
#include <vector>

#include "loader/image_error.h"
#include "loader/image_format.h"

namespace feedscope {

struct DecodedImage {
  int width = 0;
  int height = 0;
};

// Not thread-safe: one per worker thread. Keeps a scratch buffer between images.
class ImageDecoder {
 public:
  // Interleaved 8-bit RGB, rows width * 3 bytes apart, into `rgb` (grown, never shrunk). As PIL:
  // grey is replicated, alpha dropped (not composited), a palette expanded, 16-bit samples cut
  // to their high byte except 16-bit grey PNG, which PIL reads as mode I and clips to 255. The
  // stored row order is kept: like PIL, no EXIF or TIFF orientation is applied. Throws
  // ImageError for a corrupt, truncated or unsupported file, or one over JpegDecoder::kMaxPixels
  // (checked before any pixel buffer is allocated); std::invalid_argument for format jpeg or
  // unknown.
  DecodedImage decode(std::span<const std::uint8_t> data, ImageFormat format, std::vector<std::uint8_t>& rgb);

 private:
  std::vector<std::uint8_t> scratch_;
};

}  // namespace feedscope
