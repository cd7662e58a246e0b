#include "loader/detail/image_sample.h"

#include <string>

#include "loader/image_format.h"

namespace feedscope::detail {

namespace {

// The geometry of the sample for an image of width x height, drawing the crop and flip.
ResizeGeometry sample_geometry(int width, int height, const ImageFolderDataset::Options& options, SampleRng& rng,
                               bool& flip) {
  if (options.train) {
    const ResizeGeometry g =
        resized_crop_geometry(random_resized_crop_box(width, height, rng, options.crop), options.size);
    flip = rng.bernoulli(options.flip_probability);
    return g;
  }
  const int resize = (options.size * 256 + 112) / 224;  // 224 -> 256, as torchvision's ImageNet reference
  return resize_center_crop_geometry(width, height, resize, options.size);
}

}  // namespace

void decode_image_sample(std::span<const std::uint8_t> data, const ImageFolderDataset::Options& options,
                         SampleRng& rng, ImageScratch& scratch, LoadContext& ctx, float* out) {
  bool flip = false;
  PixelRect decoded;  // the pixels in scratch.pixels, in the coordinates the geometry uses
  {
    ScopedSpan span(ctx.spans, ctx.role, Stage::decode, ctx.batch);
    if (data.empty()) throw ImageError("empty file (0 bytes)");
    const ImageFormat format = sniff_image_format(data);
    if (format == ImageFormat::jpeg) {
      const JpegHeader header = scratch.decoder.read_header(data);
      if (!has_end_of_image(data))
        throw JpegError("no end-of-image marker: the file is truncated (" + std::to_string(data.size()) +
                        " bytes)");
      ResizeGeometry geometry = sample_geometry(header.width, header.height, options, rng, flip);
      const int scale = options.reduced_decode ? choose_jpeg_scale(geometry) : 8;
      geometry = scale_geometry(geometry, scale, JpegDecoder::scaled_size(header.width, scale),
                                JpegDecoder::scaled_size(header.height, scale));
      const PixelRect needed = scratch.resize.prepare(geometry);
      decoded = scratch.decoder.decode_region(data, scale, needed, scratch.pixels).rect;
    } else if (format == ImageFormat::unknown) {
      throw ImageError("not an image format torchvision's ImageFolder reads (JPEG, PNG, WebP, BMP, PPM/PGM, "
                       "TIFF): " + describe_signature(data));
    } else {
      const DecodedImage image = scratch.other.decode(data, format, scratch.pixels);
      scratch.resize.prepare(sample_geometry(image.width, image.height, options, rng, flip));
      decoded = PixelRect{0, 0, image.width, image.height};
    }
  }
  {
    // Crop, resize, flip and normalize write the slab directly: this is the collate as well.
    ScopedSpan span(ctx.spans, ctx.role, Stage::transform, ctx.batch);
    scratch.resize.run(scratch.pixels.data(), static_cast<std::size_t>(decoded.width) * 3, decoded.x, decoded.y,
                       flip, options.normalization, out);
  }
}

}  // namespace feedscope::detail
