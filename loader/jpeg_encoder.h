#pragma once
// JPEG encoding through libjpeg's compress API, for generated datasets and tests.
#include <cstdint>
#include <span>
#include <vector>

namespace feedscope {

struct JpegEncodeOptions {
  int quality = 90;          // 1..100, libjpeg's scale
  int components = 3;        // 1 grayscale, 3 RGB (stored as YCbCr), 4 CMYK (stored Adobe-inverted)
  bool progressive = false;
  bool subsample = true;     // 4:2:0 chroma, as cameras and most ImageNet files; false: 4:4:4
  bool arithmetic = false;   // arithmetic entropy coding instead of Huffman (rare; PIL cannot write it)
};

// Encodes `width` x `height` pixels of `components` interleaved bytes each. Deterministic: the same
// pixels and options give the same bytes. Throws JpegError (jpeg_decoder.h) or
// std::invalid_argument for bad sizes or options.
std::vector<std::uint8_t> encode_jpeg(std::span<const std::uint8_t> pixels, int width, int height,
                                      const JpegEncodeOptions& options = {});

}  // namespace feedscope
