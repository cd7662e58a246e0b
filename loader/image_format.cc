#include "loader/image_format.h"

#include <cstring>

namespace feedscope {

ImageFormat sniff_image_format(std::span<const std::uint8_t> data) noexcept {
  const auto starts = [&](const char* magic, std::size_t n, std::size_t at = 0) {
    return data.size() >= at + n && std::memcmp(data.data() + at, magic, n) == 0;
  };
  if (starts("\xFF\xD8\xFF", 3)) return ImageFormat::jpeg;
  if (starts("\x89PNG\r\n\x1A\n", 8)) return ImageFormat::png;
  if (starts("RIFF", 4) && starts("WEBP", 4, 8)) return ImageFormat::webp;
  if (starts("BM", 2)) return ImageFormat::bmp;
  if (starts("II*\0", 4) || starts("MM\0*", 4)) return ImageFormat::tiff;
  if (data.size() >= 2 && data[0] == 'P' && data[1] >= '1' && data[1] <= '6') return ImageFormat::pnm;
  return ImageFormat::unknown;
}

const char* image_format_name(ImageFormat format) noexcept {
  switch (format) {
    case ImageFormat::jpeg: return "JPEG";
    case ImageFormat::png: return "PNG";
    case ImageFormat::webp: return "WebP";
    case ImageFormat::bmp: return "BMP";
    case ImageFormat::pnm: return "PNM";
    case ImageFormat::tiff: return "TIFF";
    case ImageFormat::unknown: break;
  }
  return "unknown";
}

std::string describe_signature(std::span<const std::uint8_t> data) {
  if (data.empty()) return "an empty file";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "a file starting";
  for (std::size_t i = 0; i < data.size() && i < 8; ++i) {
    out += ' ';
    out += kHex[data[i] >> 4];
    out += kHex[data[i] & 15];
  }
  return out;
}

bool has_image_extension(std::string_view name) noexcept {
  static constexpr const char* kExtensions[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp",
                                                ".pgm", ".tif",  ".tiff", ".webp"};
  for (const char* ext : kExtensions) {
    const std::size_t n = std::strlen(ext);
    if (name.size() < n) continue;
    bool same = true;
    for (std::size_t i = 0; i < n && same; ++i) {
      const char c = name[name.size() - n + i];
      same = (c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) == ext[i];
    }
    if (same) return true;
  }
  return false;
}

}  // namespace feedscope
