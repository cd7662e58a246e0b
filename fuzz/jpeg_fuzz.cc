// libFuzzer target: JPEG files as images:DIR loads them (loader/jpeg_decoder.h): the header, the
// end-of-image check, a region decode at a scale and rectangle derived from the header, a full
// decode of small images, and the whole decode + train/eval transform of ImageFolderDataset
// (loader/detail/image_sample.h). Bad data must be a JpegError, which the loader turns into a
// SampleError for its bad-sample policy; anything else escaping is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "loader/detail/image_sample.h"
#include "loader/jpeg_decoder.h"
#include "loader/sample_rng.h"

namespace {

using namespace feedscope;

// Everything a worker keeps between images lives on between inputs too, as it does in a run: a
// decoder left in a bad state by one file would show on the next.
struct State {
  JpegDecoder decoder;
  std::vector<std::uint8_t> pixels;
  detail::ImageScratch scratch;
  std::vector<float> sample;
};

// The scale, rectangle and pipeline choices come from a hash of the input: deterministic for
// replay, and different for every mutation.
std::uint64_t hash(std::span<const std::uint8_t> bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (const std::uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

// At most this many pixels a side per region, so one input stays fast under the sanitizers.
constexpr int kMaxRegionSide = 256;
// Larger images only get a region in their first rows: decoding time grows with the pixels, not
// the file (an arithmetic-coded scan that meets a marker decodes the rest from zeros), and such
// inputs took the fuzzer from thousands of runs a second to a hundred.
constexpr std::int64_t kMaxDecodedPixels = std::int64_t{1} << 22;

void decode_region(State& s, std::span<const std::uint8_t> data, const JpegHeader& header, SampleRng& rng) {
  const int scale = static_cast<int>(rng.randint(1, 8));
  const int width = JpegDecoder::scaled_size(header.width, scale);
  const int height = JpegDecoder::scaled_size(header.height, scale);
  PixelRect rect;
  rect.x = static_cast<int>(rng.randint(0, width - 1));
  rect.y = static_cast<int>(rng.randint(0, height - 1));
  rect.width = static_cast<int>(rng.randint(1, std::min(kMaxRegionSide, width - rect.x)));
  rect.height = static_cast<int>(rng.randint(1, std::min(kMaxRegionSide, height - rect.y)));
  try {
    s.decoder.decode_region(data, scale, rect, s.pixels);
  } catch (const JpegError&) {
  }
  if (static_cast<std::int64_t>(header.width) * header.height <= kMaxRegionSide * kMaxRegionSide) {
    try {
      s.decoder.decode(data, s.pixels);
    } catch (const JpegError&) {
    }
  }
}

void decode_sample(State& s, std::span<const std::uint8_t> data, SampleRng& rng) {
  ImageFolderDataset::Options options;
  options.train = rng.bernoulli(0.5);
  options.size = static_cast<int>(rng.randint(8, 64));
  const auto side = static_cast<std::size_t>(options.size);
  s.sample.resize(3 * side * side);
  LoadContext ctx;
  try {
    detail::decode_image_sample(data, options, rng, s.scratch, ctx, s.sample.data());
  } catch (const ImageError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static State state;
  const std::span<const std::uint8_t> bytes(data, size);
  has_end_of_image(bytes);
  JpegHeader header;
  try {
    header = state.decoder.read_header(bytes);
  } catch (const JpegError&) {
    return 0;
  }
  if (static_cast<std::int64_t>(header.width) * header.height > kMaxDecodedPixels) {
    try {  // past the decoder's pixel limit this is its refusal
      state.decoder.decode_region(bytes, 8, PixelRect{0, 0, 1, 1}, state.pixels);
    } catch (const JpegError&) {
    }
    return 0;
  }
  SampleRng rng(hash(bytes));
  decode_region(state, bytes, header, rng);
  decode_sample(state, bytes, rng);
  return 0;
}
