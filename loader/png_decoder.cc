// PNG through libpng's sequential read API, with the transforms that give PIL's pixels.
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <string>

#include "loader/detail/image_codecs.h"

namespace feedscope::detail {

namespace {

struct PngSource {
  std::span<const std::uint8_t> data;
  std::size_t offset = 0;
  char message[256] = {};
};

void png_read(png_structp png, png_bytep out, png_size_t length) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (src->data.size() - src->offset < length) png_error(png, "the file is truncated");
  std::memcpy(out, src->data.data() + src->offset, length);
  src->offset += length;
}

[[noreturn]] void png_fail(png_structp png, png_const_charp message) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof src->message, "%s", message);
  png_longjmp(png, 1);
}

// PIL reads on past ancillary-chunk complaints (a bad sRGB or iCCP, a late tIME) too.
void png_warn(png_structp, png_const_charp) {}

// Destroys the read structs on every way out, the longjmp included (it returns to the frame that
// owns this).
struct PngRead {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngRead() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

}  // namespace

DecodedImage decode_png(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& scratch,
                        std::vector<std::uint8_t>& rgb) {
  PngSource src{data};
  PngRead read;
  read.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_fail, png_warn);
  if (!read.png) throw ImageError("cannot create a PNG decoder");
  read.info = png_create_info_struct(read.png);
  if (!read.info) throw ImageError("cannot create a PNG decoder");
  png_set_read_fn(read.png, &src, png_read);
  // PIL checks no CRC of ancillary chunks and neither do we; critical chunks' CRCs are checked.
  png_set_crc_action(read.png, PNG_CRC_DEFAULT, PNG_CRC_QUIET_USE);
  // libpng's own 1,000,000-pixel row limit is for untrusted web images; the size check below is PIL's.
  png_set_user_limits(read.png, 0x7fffffff, 0x7fffffff);

  // Only libpng and plain memory between here and the end of the guarded part: a longjmp skips
  // the frames in between without running destructors.
  png_uint_32 width = 0, height = 0;
  int depth = 0, color = 0, interlace = 0;
  if (setjmp(png_jmpbuf(read.png))) throw ImageError(std::string("PNG: ") + src.message);
  png_read_info(read.png, read.info);
  png_get_IHDR(read.png, read.info, &width, &height, &depth, &color, &interlace, nullptr, nullptr);
  check_image_size(width, height, "PNG");

  // 16-bit grey opens in PIL as mode I, whose conversion to RGB clips at 255 rather than scaling.
  const bool grey16 = color == PNG_COLOR_TYPE_GRAY && depth == 16;
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(read.png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(read.png);
  if (depth == 16 && !grey16) png_set_strip_16(read.png);  // the high byte, as PIL's ;16B modes
  png_set_interlace_handling(read.png);
  png_read_update_info(read.png, read.info);
  const int channels = png_get_channels(read.png, read.info);
  const std::size_t row_bytes = png_get_rowbytes(read.png, read.info);
  const std::size_t pixels = std::size_t{width} * height;

  // A bad_alloc here is an ordinary exception: the buffers are ours, and `read` cleans up.
  // The row pointers follow the pixels, at an offset aligned for a pointer.
  const std::size_t rows_at = (row_bytes * height + alignof(png_bytep) - 1) / alignof(png_bytep) * alignof(png_bytep);
  if (scratch.size() < rows_at + height * sizeof(png_bytep)) scratch.resize(rows_at + height * sizeof(png_bytep));
  if (rgb.size() < pixels * 3) rgb.resize(pixels * 3);
  auto* rows = reinterpret_cast<png_bytep*>(scratch.data() + rows_at);
  for (png_uint_32 y = 0; y < height; ++y) rows[y] = scratch.data() + row_bytes * y;
  png_read_image(read.png, rows);
  // Nothing after the image data is read (PIL stops there too): a file cut after its last IDAT
  // chunk loads in both.

  if (grey16) {
    for (std::size_t i = 0; i < pixels; ++i) {
      const int v = (scratch[2 * i] << 8) | scratch[2 * i + 1];
      rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = static_cast<std::uint8_t>(std::min(v, 255));
    }
  } else {
    // Rows are packed back to back (row_bytes = width * channels at 8 bits).
    to_rgb(scratch.data(), channels, pixels, rgb.data());
  }
  return DecodedImage{static_cast<int>(width), static_cast<int>(height)};
}

}  // namespace feedscope::detail
