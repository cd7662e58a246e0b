#include "loader/jpeg_decoder.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>

// jpeglib.h needs size_t and FILE declared before it.
#include <jerror.h>
#include <jpeglib.h>

#include "loader/detail/jpeg_error.h"

namespace feedscope {

namespace {

using detail::JpegErrorManager;
using detail::jpeg_error_exit;

// libjpeg reports damaged data as warnings and carries on: a truncated file is padded with grey
// and a bad Huffman code leaves a smear. A loader must not train on that, so those warnings are
// errors here. Only warnings about metadata the pixels do not depend on stay warnings.
void emit_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level != -1) return;  // trace messages
  switch (cinfo->err->msg_code) {
    case JWRN_ADOBE_XFORM:  // unknown transform code: libjpeg falls back to the usual one
    case JWRN_JFIF_MAJOR:   // newer JFIF revision number
    case JWRN_BOGUS_ICC:    // a broken ICC profile, not broken pixels
      ++cinfo->err->num_warnings;
      return;
    case JWRN_EXTRANEOUS_DATA:
      // Junk between the last scan and the end-of-image marker (some writers pad there) follows
      // complete pixels. Treating it as an error would also make a file fail only for the crops
      // that reach its bottom rows, as only those read on to the marker.
      if (cinfo->err->msg_parm.i[1] == 0xD9) {
        ++cinfo->err->num_warnings;
        return;
      }
      jpeg_error_exit(cinfo);
    default:
      jpeg_error_exit(cinfo);
  }
}

const char* color_space_name(J_COLOR_SPACE space) {
  switch (space) {
    case JCS_GRAYSCALE: return "grayscale";
    case JCS_RGB: return "RGB";
    case JCS_YCbCr: return "YCbCr";
    case JCS_CMYK: return "CMYK";
    case JCS_YCCK: return "YCCK";
    default: return "unknown";
  }
}

}  // namespace

struct JpegDecoder::Impl {
  jpeg_decompress_struct cinfo{};
  JpegErrorManager err{};
  std::vector<std::uint8_t> cmyk_row;

  Impl() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = jpeg_error_exit;
    err.pub.emit_message = emit_message;
    if (setjmp(err.jump)) throw JpegError(std::string("cannot create a JPEG decoder: ") + err.message);
    jpeg_create_decompress(&cinfo);
  }
  ~Impl() { jpeg_destroy_decompress(&cinfo); }

  // Runs `body` with every libjpeg error turned into a longjmp back to this frame and then a
  // JpegError. The longjmp skips the frames in between without unwinding them, so `body` must
  // only call libjpeg and touch memory that is already allocated: no object with a destructor.
  template <class Body>
  void guarded(const Body& body) {
    if (setjmp(err.jump)) {
      jpeg_abort_decompress(&cinfo);
      throw JpegError(err.message);
    }
    body();
  }

  void begin(std::span<const std::uint8_t> data) {
    if (data.empty()) throw JpegError("empty file: no JPEG data");
    guarded([&] {
      jpeg_mem_src(&cinfo, data.data(), static_cast<unsigned long>(data.size()));
      jpeg_read_header(&cinfo, TRUE);
    });
  }

  bool cmyk() const { return cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK; }

  // Reads rows [first, last) of the started, cropped output into rows `stride` bytes apart.
  void read_rows(int first, int last, std::uint8_t* out, std::size_t stride) {
    const bool convert = cmyk();
    const bool inverted = cinfo.saw_Adobe_marker;  // Adobe writes CMYK inverted
    const int width = static_cast<int>(cinfo.output_width);
    guarded([&] {
      if (first > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(first));
      while (static_cast<int>(cinfo.output_scanline) < last) {
        std::uint8_t* dest = out + static_cast<std::size_t>(static_cast<int>(cinfo.output_scanline) - first) * stride;
        JSAMPROW row = convert ? cmyk_row.data() : dest;
        jpeg_read_scanlines(&cinfo, &row, 1);
        if (!convert) continue;
        for (int x = 0; x < width; ++x) {
          const std::uint8_t* p = cmyk_row.data() + 4 * x;
          const int k = inverted ? p[3] : 255 - p[3];
          for (int c = 0; c < 3; ++c) {
            const int v = inverted ? p[c] : 255 - p[c];
            dest[3 * x + c] = static_cast<std::uint8_t>((v * k + 127) / 255);
          }
        }
      }
    });
  }
};

JpegDecoder::JpegDecoder() : impl_(std::make_unique<Impl>()) {}
JpegDecoder::~JpegDecoder() = default;

JpegHeader JpegDecoder::read_header(std::span<const std::uint8_t> data) {
  impl_->begin(data);
  const jpeg_decompress_struct& c = impl_->cinfo;
  JpegHeader header{static_cast<int>(c.image_width), static_cast<int>(c.image_height),
                    c.num_components, color_space_name(c.jpeg_color_space)};
  jpeg_abort_decompress(&impl_->cinfo);
  return header;
}

DecodedRegion JpegDecoder::decode(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& rgb) {
  impl_->begin(data);
  const int width = static_cast<int>(impl_->cinfo.image_width);
  const int height = static_cast<int>(impl_->cinfo.image_height);
  jpeg_abort_decompress(&impl_->cinfo);
  return decode_region(data, 8, PixelRect{0, 0, width, height}, rgb);
}

DecodedRegion JpegDecoder::decode_region(std::span<const std::uint8_t> data, int scale_num,
                                         PixelRect rect, std::vector<std::uint8_t>& rgb) {
  if (scale_num < 1 || scale_num > 8)
    throw std::invalid_argument("JPEG scale " + std::to_string(scale_num) + "/8: allowed 1/8 to 8/8");
  Impl& s = *impl_;
  s.begin(data);
  // Whatever happens from here on (an exception, a bad_alloc), the decompressor goes back idle.
  struct Abort {
    jpeg_decompress_struct* cinfo;
    ~Abort() { jpeg_abort_decompress(cinfo); }
  } abort_on_exit{&s.cinfo};

  jpeg_decompress_struct& c = s.cinfo;
  if (s.cmyk()) {
    c.out_color_space = JCS_CMYK;
  } else if (c.jpeg_color_space == JCS_GRAYSCALE || c.jpeg_color_space == JCS_YCbCr ||
             c.jpeg_color_space == JCS_RGB) {
    c.out_color_space = JCS_RGB;
  } else {
    throw JpegError(std::string("unsupported JPEG colour space ") + color_space_name(c.jpeg_color_space) +
                    " (" + std::to_string(c.num_components) + " components)");
  }
  if (std::int64_t{c.image_width} * c.image_height > kMaxPixels)
    throw JpegError("image is " + std::to_string(c.image_width) + "x" + std::to_string(c.image_height) +
                    ", over the " + std::to_string(kMaxPixels) +
                    "-pixel limit (a corrupt header, or a decompression bomb)");
  c.scale_num = static_cast<unsigned>(scale_num);
  c.scale_denom = 8;
  c.dct_method = JDCT_ISLOW;  // PIL's default, so pixels match torchvision's decoder
  c.do_fancy_upsampling = TRUE;
  s.guarded([&] { jpeg_start_decompress(&c); });

  const int scaled_width = static_cast<int>(c.output_width);
  const int scaled_height = static_cast<int>(c.output_height);
  if (rect.x < 0 || rect.y < 0 || rect.width <= 0 || rect.height <= 0 ||
      rect.x + rect.width > scaled_width || rect.y + rect.height > scaled_height)
    throw std::invalid_argument("JPEG region " + std::to_string(rect.width) + "x" +
                                std::to_string(rect.height) + "+" + std::to_string(rect.x) + "+" +
                                std::to_string(rect.y) + " is outside the " +
                                std::to_string(scaled_width) + "x" + std::to_string(scaled_height) +
                                " image at scale " + std::to_string(scale_num) + "/8");

  // Fancy (smooth) chroma upsampling of the crop's last column needs the chroma sample to its
  // right, which a crop ending there does not decode: the edge would be replicated and differ
  // from a full decode. A few extra columns keep the asked-for ones exact.
  const int right_pad = std::min(4, scaled_width - (rect.x + rect.width));
  JDIMENSION xoffset = static_cast<JDIMENSION>(rect.x);
  JDIMENSION width = static_cast<JDIMENSION>(rect.width + right_pad);
  if (static_cast<int>(width) < scaled_width) s.guarded([&] { jpeg_crop_scanline(&c, &xoffset, &width); });
  // jpeg_crop_scanline widens the range to iMCU column boundaries; report what was decoded.
  rect.x = static_cast<int>(xoffset);
  rect.width = static_cast<int>(width);

  const std::size_t stride = static_cast<std::size_t>(rect.width) * 3;
  const std::size_t needed = stride * static_cast<std::size_t>(rect.height);
  if (rgb.size() < needed) rgb.resize(needed);
  if (s.cmyk() && s.cmyk_row.size() < static_cast<std::size_t>(rect.width) * 4)
    s.cmyk_row.resize(static_cast<std::size_t>(rect.width) * 4);
  s.read_rows(rect.y, rect.y + rect.height, rgb.data(), stride);
  // With the last row read, reading on to the end-of-image marker costs little and catches damage
  // after it; otherwise the rest of the file is not touched at all.
  if (rect.y + rect.height == scaled_height) s.guarded([&] { jpeg_finish_decompress(&c); });
  return DecodedRegion{rect, scaled_width, scaled_height, scale_num};
}

int JpegDecoder::choose_scale(int crop_width, int crop_height, int out_width, int out_height) noexcept {
  if (crop_width <= 0 || crop_height <= 0) return 8;
  // ceil(8 * out / crop) in integers: the smallest M with crop * M / 8 >= out; then up to a
  // power of two.
  const long mx = (8L * out_width + crop_width - 1) / crop_width;
  const long my = (8L * out_height + crop_height - 1) / crop_height;
  const long m = std::max(mx, my);
  return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8;
}

bool has_end_of_image(std::span<const std::uint8_t> data) noexcept {
  // 0xFF 0xD9 cannot occur inside entropy-coded data (a data 0xFF is always followed by 0x00), so
  // finding it in the tail means the scan ended; some writers pad a few bytes after it.
  constexpr std::size_t kTail = 1024;
  const std::size_t begin = data.size() > kTail ? data.size() - kTail : 0;
  for (std::size_t i = data.size(); i >= begin + 2; --i)
    if (data[i - 2] == 0xFF && data[i - 1] == 0xD9) return true;
  return false;
}

}  // namespace feedscope
