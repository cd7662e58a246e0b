// BMP and binary PPM/PGM through stb_image (Debian's libstb), which reads both; libnetpbm calls
// exit() on bad input and Debian has no BMP-only library.
#include <stb_image.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "loader/detail/image_codecs.h"

namespace feedscope::detail {

namespace {

std::uint32_t le32(std::span<const std::uint8_t> d, std::size_t at) {
  return std::uint32_t{d[at]} | std::uint32_t{d[at + 1]} << 8 | std::uint32_t{d[at + 2]} << 16 |
         std::uint32_t{d[at + 3]} << 24;
}

// stb_image reads past the end of a BMP as zeros; PIL says "image file is truncated". An
// uncompressed BMP's size follows from its header, so a short one is refused here.
void check_bmp_length(std::span<const std::uint8_t> data, int width, int height) {
  if (data.size() < 32 || le32(data, 14) < 40) return;  // the OS/2 core header: left to stb
  const std::uint32_t offset = le32(data, 10);
  const int bits = data[28] | data[29] << 8;
  const std::uint32_t compression = le32(data, 30);
  if (compression != 0 && compression != 3) return;  // RLE: its length is not in the header
  const std::uint64_t row = (std::uint64_t{static_cast<std::uint32_t>(width)} * static_cast<std::uint32_t>(bits) + 31) / 32 * 4;
  const std::uint64_t needed = offset + row * static_cast<std::uint64_t>(height);
  if (data.size() < needed)
    throw ImageError("BMP: the file is truncated (" + std::to_string(data.size()) + " bytes of " +
                     std::to_string(needed) + ")");
}

// The same for binary PGM/PPM: the raster follows the header's last number and one whitespace.
void check_pnm_length(std::span<const std::uint8_t> data) {
  std::size_t at = 2;
  std::uint64_t numbers[3] = {};
  for (std::uint64_t& n : numbers) {
    while (at < data.size() && (std::isspace(data[at]) || data[at] == '#')) {
      if (data[at] == '#')
        while (at < data.size() && data[at] != '\n') ++at;
      else
        ++at;
    }
    while (at < data.size() && std::isdigit(data[at]) && n < (std::uint64_t{1} << 32)) n = n * 10 + (data[at++] - '0');
  }
  ++at;  // the single whitespace before the raster
  const std::uint64_t samples = numbers[0] * numbers[1] * (data[1] == '6' ? 3 : 1) * (numbers[2] > 255 ? 2 : 1);
  if (data.size() < at || data.size() - at < samples)
    throw ImageError("PNM: the file is truncated (" + std::to_string(data.size()) + " bytes of " +
                     std::to_string(at + samples) + ")");
}

}  // namespace

DecodedImage decode_stb(std::span<const std::uint8_t> data, ImageFormat format, std::vector<std::uint8_t>& rgb) {
  const char* name = image_format_name(format);
  if (format == ImageFormat::pnm && data.size() >= 2 && data[1] != '5' && data[1] != '6')
    throw ImageError(std::string("PNM: P") + static_cast<char>(data[1]) +
                     " (plain-text or 1-bit netpbm) is not supported; binary PGM (P5) and PPM (P6) are");
  const int length = static_cast<int>(std::min<std::size_t>(data.size(), 0x7fffffff));
  int width = 0, height = 0, components = 0;
  if (!stbi_info_from_memory(data.data(), length, &width, &height, &components))
    throw ImageError(std::string(name) + ": " + stbi_failure_reason());
  check_image_size(width, height, name);
  if (format == ImageFormat::bmp) check_bmp_length(data, width, height);
  if (format == ImageFormat::pnm) check_pnm_length(data);
  // stb converts to 3 channels as PIL does: grey replicated, alpha dropped; 16-bit PGM/PPM keep
  // their high byte.
  std::unique_ptr<stbi_uc, decltype(&stbi_image_free)> pixels(
      stbi_load_from_memory(data.data(), length, &width, &height, &components, 3), &stbi_image_free);
  if (!pixels) throw ImageError(std::string(name) + ": " + stbi_failure_reason());
  const std::size_t bytes = std::size_t{3} * static_cast<std::size_t>(width) * static_cast<std::size_t>(height);
  if (rgb.size() < bytes) rgb.resize(bytes);
  std::memcpy(rgb.data(), pixels.get(), bytes);
  return DecodedImage{width, height};
}

}  // namespace feedscope::detail
