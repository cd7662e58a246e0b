// WebP through libwebp, the library PIL's WebP plugin wraps.
#include <webp/decode.h>

#include <string>

#include "loader/detail/image_codecs.h"

namespace feedscope::detail {

DecodedImage decode_webp(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& rgb) {
  WebPBitstreamFeatures features;
  const VP8StatusCode status = WebPGetFeatures(data.data(), data.size(), &features);
  if (status != VP8_STATUS_OK)
    throw ImageError("WebP: cannot read the header (libwebp status " + std::to_string(static_cast<int>(status)) +
                     (status == VP8_STATUS_NOT_ENOUGH_DATA ? ": the file is truncated)" : ")"));
  if (features.has_animation)
    throw ImageError("WebP: an animated WebP; feedscope reads still images only (PIL would take the first frame)");
  check_image_size(features.width, features.height, "WebP");
  const std::size_t stride = static_cast<std::size_t>(features.width) * 3;
  const std::size_t bytes = stride * static_cast<std::size_t>(features.height);
  if (rgb.size() < bytes) rgb.resize(bytes);
  // MODE_RGB drops alpha without compositing, as convert('RGB') does on PIL's RGBA.
  if (!WebPDecodeRGBInto(data.data(), data.size(), rgb.data(), bytes, static_cast<int>(stride)))
    throw ImageError("WebP: the image data is corrupt or truncated");
  return DecodedImage{features.width, features.height};
}

}  // namespace feedscope::detail
