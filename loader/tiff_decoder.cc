// TIFF through libtiff, read from memory, errors per file (TIFFOpenOptions' handler, libtiff 4.5)
// instead of libtiff's process-wide handler. The layouts where libtiff's RGBA interface would
// give other pixels than PIL (it premultiplies unassociated alpha and scales 16-bit grey, where
// PIL drops the alpha and clips at 255) are read sample by sample; the rest (palette, CMYK,
// YCbCr, tiled, bilevel, min-is-white, ...) go through the RGBA interface, which converts as PIL.
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "loader/detail/image_codecs.h"

namespace feedscope::detail {

namespace {

struct TiffSource {
  std::span<const std::uint8_t> data;
  toff_t offset = 0;
  char message[256] = {};
};

tmsize_t tiff_read(thandle_t h, void* out, tmsize_t size) {
  auto* s = static_cast<TiffSource*>(h);
  if (size < 0 || s->offset >= s->data.size()) return 0;
  const auto n = static_cast<tmsize_t>(std::min<toff_t>(static_cast<toff_t>(size), s->data.size() - s->offset));
  std::memcpy(out, s->data.data() + s->offset, static_cast<std::size_t>(n));
  s->offset += static_cast<toff_t>(n);
  return n;
}
tmsize_t tiff_write(thandle_t, void*, tmsize_t) { return 0; }
toff_t tiff_seek(thandle_t h, toff_t off, int whence) {
  auto* s = static_cast<TiffSource*>(h);
  const toff_t base = whence == SEEK_CUR ? s->offset : whence == SEEK_END ? s->data.size() : 0;
  s->offset = base + off;
  return s->offset;
}
int tiff_close(thandle_t) { return 0; }
toff_t tiff_size(thandle_t h) { return static_cast<TiffSource*>(h)->data.size(); }
int tiff_map(thandle_t, void**, toff_t*) { return 0; }
void tiff_unmap(thandle_t, void*, toff_t) {}

int tiff_error(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* s = static_cast<TiffSource*>(user);
  if (s->message[0] == '\0') {  // the first error is the cause; later ones are its echoes
    const int n = std::snprintf(s->message, sizeof s->message, "%s: ", module ? module : "libtiff");
    if (n > 0 && static_cast<std::size_t>(n) < sizeof s->message)
      std::vsnprintf(s->message + n, sizeof s->message - static_cast<std::size_t>(n), fmt, ap);
  }
  return 1;  // handled: libtiff's process-wide handler does not print it
}
int tiff_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

struct TiffHandles {
  TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
  TIFF* tif = nullptr;
  ~TiffHandles() {
    if (tif) TIFFClose(tif);
    TIFFOpenOptionsFree(options);
  }
};

struct RgbaImage {
  TIFFRGBAImage img{};
  bool begun = false;
  ~RgbaImage() {
    if (begun) TIFFRGBAImageEnd(&img);
  }
};

// Strips of 8-bit grey (+ alpha) or RGB (+ unassociated alpha), or 16-bit grey: returns false
// for any other layout.
bool decode_samples(TIFF* tif, std::vector<std::uint8_t>& scratch, std::vector<std::uint8_t>& rgb,
                    DecodedImage& image) {
  std::uint16_t photometric = 0, bits = 0, spp = 0, planar = 0, extra_count = 0;
  std::uint16_t* extra = nullptr;
  std::uint32_t width = 0, height = 0;
  if (TIFFIsTiled(tif) || !TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric)) return false;
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  TIFFGetFieldDefaulted(tif, TIFFTAG_EXTRASAMPLES, &extra_count, &extra);
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height);
  const bool associated = extra_count > 0 && extra && extra[0] == EXTRASAMPLE_ASSOCALPHA;
  const bool grey = photometric == PHOTOMETRIC_MINISBLACK && (spp == 1 || (spp == 2 && bits == 8));
  const bool colour = photometric == PHOTOMETRIC_RGB && (spp == 3 || spp == 4) && bits == 8;
  if (planar != PLANARCONFIG_CONTIG || associated || !(grey || colour) || (bits != 8 && bits != 16)) return false;
  check_image_size(width, height, "TIFF");
  const auto line = static_cast<std::size_t>(TIFFScanlineSize64(tif));
  const std::size_t pixels = std::size_t{width} * height;
  if (line < std::size_t{width} * spp * (bits / 8)) return false;
  if (scratch.size() < line) scratch.resize(line);
  if (rgb.size() < pixels * 3) rgb.resize(pixels * 3);
  for (std::uint32_t y = 0; y < height; ++y) {
    if (TIFFReadScanline(tif, scratch.data(), y, 0) < 0) throw ImageError("TIFF: cannot read row " + std::to_string(y));
    std::uint8_t* out = rgb.data() + std::size_t{y} * width * 3;
    if (bits == 8) {
      to_rgb(scratch.data(), spp, width, out);
    } else {
      // 16-bit grey is PIL's mode I;16, whose conversion to RGB clips at 255.
      const auto* in = reinterpret_cast<const std::uint16_t*>(scratch.data());  // native order
      for (std::uint32_t x = 0; x < width; ++x)
        out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = static_cast<std::uint8_t>(std::min<int>(in[x], 255));
    }
  }
  image = DecodedImage{static_cast<int>(width), static_cast<int>(height)};
  return true;
}

}  // namespace

DecodedImage decode_tiff(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& scratch,
                         std::vector<std::uint8_t>& rgb) {
  TiffSource src{data};
  TiffHandles h;
  TIFFOpenOptionsSetErrorHandlerExtR(h.options, tiff_error, &src);
  TIFFOpenOptionsSetWarningHandlerExtR(h.options, tiff_warning, &src);
  const auto fail = [&](const char* what) {
    return ImageError(std::string("TIFF: ") + (src.message[0] ? src.message : what));
  };
  // "m": no memory mapping (there is no file), reading only.
  h.tif = TIFFClientOpenExt("image", "rm", &src, tiff_read, tiff_write, tiff_seek, tiff_close, tiff_size,
                            tiff_map, tiff_unmap, h.options);
  if (!h.tif) throw fail("cannot read the header");
  DecodedImage direct;
  if (decode_samples(h.tif, scratch, rgb, direct)) return direct;

  char emsg[1024] = {};
  if (!TIFFRGBAImageOK(h.tif, emsg)) throw ImageError(std::string("TIFF: ") + emsg);
  RgbaImage rgba;
  if (!TIFFRGBAImageBegin(&rgba.img, h.tif, 1, emsg)) throw ImageError(std::string("TIFF: ") + emsg);
  rgba.begun = true;
  const std::uint32_t width = rgba.img.width, height = rgba.img.height;
  check_image_size(width, height, "TIFF");
  // Rows as stored: PIL applies no Orientation tag, so neither does this.
  rgba.img.req_orientation = rgba.img.orientation;
  const std::size_t pixels = std::size_t{width} * height;
  if (scratch.size() < pixels * 4) scratch.resize(pixels * 4);
  if (rgb.size() < pixels * 3) rgb.resize(pixels * 3);
  auto* raster = reinterpret_cast<std::uint32_t*>(scratch.data());
  if (!TIFFRGBAImageGet(&rgba.img, raster, width, height)) throw fail("the image data is corrupt or truncated");
  for (std::size_t i = 0; i < pixels; ++i) {
    rgb[3 * i] = static_cast<std::uint8_t>(TIFFGetR(raster[i]));
    rgb[3 * i + 1] = static_cast<std::uint8_t>(TIFFGetG(raster[i]));
    rgb[3 * i + 2] = static_cast<std::uint8_t>(TIFFGetB(raster[i]));
  }
  return DecodedImage{static_cast<int>(width), static_cast<int>(height)};
}

}  // namespace feedscope::detail
