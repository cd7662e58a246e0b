#include "loader/image_decoder.h"

#include <stdexcept>
#include <string>

#include "loader/detail/image_codecs.h"
#include "loader/jpeg_decoder.h"

namespace feedscope {

namespace detail {

void check_image_size(std::int64_t width, std::int64_t height, const char* format) {
  if (width <= 0 || height <= 0)
    throw ImageError(std::string(format) + " image has no pixels (" + std::to_string(width) + "x" +
                     std::to_string(height) + ")");
  if (width * height > JpegDecoder::kMaxPixels)
    throw ImageError(std::string(format) + " image is " + std::to_string(width) + "x" + std::to_string(height) +
                     ", over the " + std::to_string(JpegDecoder::kMaxPixels) +
                     "-pixel limit (a corrupt header, or a decompression bomb)");
}

void to_rgb(const std::uint8_t* in, int channels, std::size_t pixels, std::uint8_t* rgb) noexcept {
  for (std::size_t i = 0; i < pixels; ++i, in += channels, rgb += 3) {
    if (channels <= 2) {
      rgb[0] = rgb[1] = rgb[2] = in[0];
    } else {
      rgb[0] = in[0];
      rgb[1] = in[1];
      rgb[2] = in[2];
    }
  }
}

}  // namespace detail

DecodedImage ImageDecoder::decode(std::span<const std::uint8_t> data, ImageFormat format,
                                  std::vector<std::uint8_t>& rgb) {
  switch (format) {
    case ImageFormat::png: return detail::decode_png(data, scratch_, rgb);
    case ImageFormat::webp: return detail::decode_webp(data, rgb);
    case ImageFormat::tiff: return detail::decode_tiff(data, scratch_, rgb);
    case ImageFormat::bmp:
    case ImageFormat::pnm: return detail::decode_stb(data, format, rgb);
    case ImageFormat::jpeg:
    case ImageFormat::unknown: break;
  }
  throw std::invalid_argument(std::string("ImageDecoder: no whole-image decoder for ") + image_format_name(format));
}

}  // namespace feedscope
