#include "loader/jpeg_encoder.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <jpeglib.h>

#include "loader/detail/jpeg_error.h"

#include "loader/jpeg_decoder.h"

namespace feedscope {

namespace {

using detail::JpegErrorManager;
using detail::jpeg_error_exit;

// Everything libjpeg owns, released on every path; the longjmp target lives in encode() below,
// whose frame holds no object with a destructor between setjmp and the last libjpeg call.
struct Compressor {
  jpeg_compress_struct cinfo{};
  JpegErrorManager err{};
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  bool created = false;
  ~Compressor() {
    if (created) jpeg_destroy_compress(&cinfo);
    std::free(buffer);
  }
};

// Returns false (with the message in c.err) when libjpeg fails.
bool encode(Compressor& c, const std::uint8_t* pixels, int width, int height,
            const JpegEncodeOptions& options) {
  c.cinfo.err = jpeg_std_error(&c.err.pub);
  c.err.pub.error_exit = jpeg_error_exit;
  if (setjmp(c.err.jump)) return false;
  jpeg_create_compress(&c.cinfo);
  c.created = true;
  jpeg_mem_dest(&c.cinfo, &c.buffer, &c.size);
  c.cinfo.image_width = static_cast<JDIMENSION>(width);
  c.cinfo.image_height = static_cast<JDIMENSION>(height);
  c.cinfo.input_components = options.components;
  c.cinfo.in_color_space = options.components == 1 ? JCS_GRAYSCALE
                           : options.components == 4 ? JCS_CMYK
                                                     : JCS_RGB;
  jpeg_set_defaults(&c.cinfo);
  jpeg_set_quality(&c.cinfo, options.quality, TRUE);
  if (options.components == 3 && !options.subsample) {
    for (int i = 0; i < 3; ++i) {
      c.cinfo.comp_info[i].h_samp_factor = 1;
      c.cinfo.comp_info[i].v_samp_factor = 1;
    }
  }
  if (options.progressive) jpeg_simple_progression(&c.cinfo);
  c.cinfo.arith_code = options.arithmetic ? TRUE : FALSE;
  if (options.components == 4) c.cinfo.write_Adobe_marker = TRUE;
  jpeg_start_compress(&c.cinfo, TRUE);
  const std::size_t stride = static_cast<std::size_t>(width) * static_cast<std::size_t>(options.components);
  while (c.cinfo.next_scanline < c.cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels + c.cinfo.next_scanline * stride);
    jpeg_write_scanlines(&c.cinfo, &row, 1);
  }
  jpeg_finish_compress(&c.cinfo);
  return true;
}

}  // namespace

std::vector<std::uint8_t> encode_jpeg(std::span<const std::uint8_t> pixels, int width, int height,
                                      const JpegEncodeOptions& options) {
  if (width <= 0 || height <= 0 || width > 65500 || height > 65500)
    throw std::invalid_argument("JPEG size " + std::to_string(width) + "x" + std::to_string(height) +
                                ": allowed 1 to 65500 on each side");
  if (options.components != 1 && options.components != 3 && options.components != 4)
    throw std::invalid_argument("JPEG components " + std::to_string(options.components) +
                                ": allowed 1, 3 or 4");
  if (options.quality < 1 || options.quality > 100)
    throw std::invalid_argument("quality: " + std::to_string(options.quality) + ": allowed 1 to 100");
  const std::size_t expected = static_cast<std::size_t>(width) * static_cast<std::size_t>(height) *
                               static_cast<std::size_t>(options.components);
  if (pixels.size() < expected)
    throw std::invalid_argument("JPEG encode: " + std::to_string(pixels.size()) + " bytes given, " +
                                std::to_string(expected) + " needed");
  Compressor c;
  if (!encode(c, pixels.data(), width, height, options)) throw JpegError(c.err.message);
  return std::vector<std::uint8_t>(c.buffer, c.buffer + c.size);
}

}  // namespace feedscope
