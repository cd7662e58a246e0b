#include "loader/detail/image_sample.h"

#include <string>

namespace feedscope::detail {

void decode_image_sample(std::span<const std::uint8_t> data, const ImageFolderDataset::Options& options,
                         SampleRng& rng, ImageScratch& scratch, LoadContext& ctx, float* out) {
  bool flip = false;
  DecodedRegion region;
  {
    ScopedSpan span(ctx.spans, ctx.role, Stage::decode, ctx.batch);
    const JpegHeader header = scratch.decoder.read_header(data);
    if (!has_end_of_image(data))
      throw JpegError("no end-of-image marker: the file is truncated (" + std::to_string(data.size()) +
                      " bytes)");
    ResizeGeometry geometry;
    if (options.train) {
      geometry = resized_crop_geometry(random_resized_crop_box(header.width, header.height, rng, options.crop),
                                       options.size);
      flip = rng.bernoulli(options.flip_probability);
    } else {
      const int resize = (options.size * 256 + 112) / 224;  // 224 -> 256, as torchvision's ImageNet reference
      geometry = resize_center_crop_geometry(header.width, header.height, resize, options.size);
    }
    const int scale = choose_jpeg_scale(geometry);
    geometry = scale_geometry(geometry, scale, JpegDecoder::scaled_size(header.width, scale),
                              JpegDecoder::scaled_size(header.height, scale));
    const PixelRect needed = scratch.resize.prepare(geometry);
    region = scratch.decoder.decode_region(data, scale, needed, scratch.pixels);
  }
  {
    // Crop, resize, flip and normalize write the slab directly: this is the collate as well.
    ScopedSpan span(ctx.spans, ctx.role, Stage::transform, ctx.batch);
    scratch.resize.run(scratch.pixels.data(), static_cast<std::size_t>(region.rect.width) * 3, region.rect.x,
                       region.rect.y, flip, options.normalization, out);
  }
}

}  // namespace feedscope::detail
