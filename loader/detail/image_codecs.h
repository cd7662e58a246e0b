#pragma once
// The per-format halves of ImageDecoder (loader/image_decoder.h), one source file per library.
#include <cstdint>
#include <span>
#include <vector>

#include "loader/image_decoder.h"

namespace feedscope::detail {

// Throws ImageError when width x height is not a size any decoder should allocate for: zero, or
// over PIL's decompression-bomb limit (JpegDecoder::kMaxPixels), which torchvision refuses too.
void check_image_size(std::int64_t width, std::int64_t height, const char* format);

// Writes `channels` interleaved 8-bit samples (1 grey, 2 grey + alpha, 3 RGB, 4 RGBA) as RGB the
// way PIL's convert('RGB') does: grey replicated, alpha dropped. `in` and `rgb` may not overlap.
void to_rgb(const std::uint8_t* in, int channels, std::size_t pixels, std::uint8_t* rgb) noexcept;

DecodedImage decode_png(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& scratch,
                        std::vector<std::uint8_t>& rgb);
DecodedImage decode_webp(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& rgb);
DecodedImage decode_tiff(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& scratch,
                         std::vector<std::uint8_t>& rgb);
// BMP and binary PPM/PGM (P5, P6).
DecodedImage decode_stb(std::span<const std::uint8_t> data, ImageFormat format, std::vector<std::uint8_t>& rgb);

}  // namespace feedscope::detail
