#pragma once
// Which decoder a file needs, told from its first bytes as PIL's Image.open tells it, never from
// its name: ImageNet's train set holds a PNG named .JPEG, and torchvision loads it.
#include <cstdint>
#include <span>
#include <string>

namespace feedscope {

enum class ImageFormat { unknown, jpeg, png, webp, bmp, pnm, tiff };

// The format whose signature `data` starts with (PIL's own _accept tests): JPEG FF D8 FF, PNG's
// 8-byte signature, RIFF....WEBP, BM, P1-P6, TIFF II*\0 / MM\0*.
ImageFormat sniff_image_format(std::span<const std::uint8_t> data) noexcept;
const char* image_format_name(ImageFormat format) noexcept;
// For an error message: the first bytes in hex, so a user sees what the file holds instead.
std::string describe_signature(std::span<const std::uint8_t> data);

// The file names torchvision's ImageFolder lists (IMG_EXTENSIONS: .jpg .jpeg .png .ppm .bmp
// .pgm .tif .tiff .webp, any case). The name only decides what is listed; the bytes decide how
// it is decoded.
bool has_image_extension(std::string_view name) noexcept;
inline constexpr const char* kImageExtensions = ".jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp";

}  // namespace feedscope
