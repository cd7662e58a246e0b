#pragma once
// One image file's bytes to one images:DIR sample: what ImageFolderDataset::load does once the file
// is read, apart from the file I/O so that the fuzzer (fuzz/jpeg_fuzz.cc) can feed it any bytes.
#include <cstdint>
#include <span>
#include <vector>

#include "loader/image_decoder.h"
#include "loader/image_folder_dataset.h"
#include "loader/image_transforms.h"
#include "loader/jpeg_decoder.h"
#include "loader/sample_rng.h"

namespace feedscope::detail {

// What one loading thread keeps between images, so steady state allocates nothing. Not
// thread-safe: one per thread.
struct ImageScratch {
  JpegDecoder decoder;
  ImageDecoder other;  // every format but JPEG
  ResizeNormalize resize;
  std::vector<std::uint8_t> pixels;
};

// Decodes `data`, a whole image file of any format sniff_image_format knows (JPEG by region and
// at reduced scale, the others whole through ImageDecoder), and writes the 3 x size x size float sample of `options`
// (train: RandomResizedCrop and flip drawn from `rng`; eval: Resize + CenterCrop) to `out`,
// recording the decode and transform spans. `options` is valid (ImageFolderDataset checked it).
// Throws ImageError (JpegError for JPEG) for a file that is not an image feedscope reads, or is
// corrupt, truncated or too large to decode.
void decode_image_sample(std::span<const std::uint8_t> data, const ImageFolderDataset::Options& options,
                         SampleRng& rng, ImageScratch& scratch, LoadContext& ctx, float* out);

}  // namespace feedscope::detail
