#include "loader/image_dataset_maker.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <numbers>
#include <stdexcept>
#include <thread>
#include <vector>

#include "loader/dataset.h"
#include "loader/jpeg_encoder.h"
#include "loader/sample_rng.h"

namespace feedscope {

namespace {

namespace fs = std::filesystem;

// Keeps the generator's random streams apart from the loader's (seed, epoch, index) streams.
constexpr std::uint64_t kImageStream = 0x1ca9e5f0d7a3b2c1ULL;

std::array<float, 3> hsv_to_rgb(double h, double s, double v) {
  h = (h - std::floor(h)) * 6.0;
  const int sector = static_cast<int>(h) % 6;
  const double f = h - std::floor(h);
  const double p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  double r = v, g = t, b = p;
  switch (sector) {
    case 1: r = q, g = v, b = p; break;
    case 2: r = p, g = v, b = t; break;
    case 3: r = p, g = q, b = v; break;
    case 4: r = t, g = p, b = v; break;
    case 5: r = v, g = p, b = q; break;
    default: break;
  }
  return {static_cast<float>(r * 255), static_cast<float>(g * 255), static_cast<float>(b * 255)};
}

std::string class_name(int label) {
  char name[32];
  std::snprintf(name, sizeof name, "class_%04d", label);
  return name;
}

std::string file_name(std::int64_t index) {
  char name[40];
  std::snprintf(name, sizeof name, "img_%08lld.jpg", static_cast<long long>(index));
  return name;
}

void write_file(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  // Written under a temporary name and renamed, so an interrupted run leaves no half file that
  // a loader would later report as corrupt.
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create '" + tmp.string() + "': " + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      throw std::runtime_error("cannot write '" + tmp.string() + "': " + std::strerror(e));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) throw std::runtime_error("cannot write '" + tmp.string() + "': " + std::strerror(errno));
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("cannot rename '" + tmp.string() + "' to '" + path.string() + "': " + ec.message());
}

// Background: the class colour shaded by a few low-frequency waves, like light falling across a
// scene. sin(a + b) = sin a cos b + cos a sin b keeps it to row and column tables.
void paint_background(std::vector<float>& img, std::size_t w, std::size_t h, double hue,
                      SampleRng& rng) {
  const std::array<float, 3> base = hsv_to_rgb(hue + rng.uniform(-0.04, 0.04), rng.uniform(0.3, 0.7),
                                               rng.uniform(0.35, 0.75));
  for (std::size_t i = 0; i < w * h; ++i)
    for (int c = 0; c < 3; ++c) img[3 * i + static_cast<std::size_t>(c)] = base[static_cast<std::size_t>(c)];
  std::vector<float> sx(w), cx(w), sy(h), cy(h);
  // The first few waves shade; the rest are fine texture (grass, fabric, bark) that costs JPEG
  // bits the way real detail does.
  const int waves = 3 + static_cast<int>(rng.randint(0, 2));
  const int textures = 6;
  for (int k = 0; k < waves + textures; ++k) {
    const bool texture = k >= waves;
    const double period = texture ? rng.uniform(2.5, 12.0) : rng.uniform(30.0, 400.0);
    const double angle = rng.uniform(0.0, std::numbers::pi);
    const double fx = 2 * std::numbers::pi / period * std::cos(angle);
    const double fy = 2 * std::numbers::pi / period * std::sin(angle);
    const double phase = rng.uniform(0.0, 2 * std::numbers::pi);
    std::array<float, 3> amp;
    for (float& a : amp) a = static_cast<float>(texture ? rng.uniform(-9.0, 9.0) : rng.uniform(-35.0, 35.0));
    for (std::size_t x = 0; x < w; ++x) sx[x] = static_cast<float>(std::sin(fx * static_cast<double>(x))), cx[x] = static_cast<float>(std::cos(fx * static_cast<double>(x)));
    for (std::size_t y = 0; y < h; ++y) sy[y] = static_cast<float>(std::sin(fy * static_cast<double>(y) + phase)), cy[y] = static_cast<float>(std::cos(fy * static_cast<double>(y) + phase));
    for (std::size_t y = 0; y < h; ++y) {
      float* row = img.data() + y * w * 3;
      for (std::size_t x = 0; x < w; ++x) {
        const float s = sx[x] * cy[y] + cx[x] * sy[y];
        row[3 * x] += amp[0] * s;
        row[3 * x + 1] += amp[1] * s;
        row[3 * x + 2] += amp[2] * s;
      }
    }
  }
}

// Objects: ellipses and rectangles, mostly in the class's palette, shaded and some striped, so
// there are edges and texture for the DCT to spend bits on.
void paint_shapes(std::vector<float>& img, int width, int height, double hue, SampleRng& rng) {
  const auto w = static_cast<std::size_t>(width);
  const int shapes = 6 + static_cast<int>(rng.randint(0, 10));
  for (int k = 0; k < shapes; ++k) {
    const bool ellipse = rng.bernoulli(0.6);
    const double shape_hue = rng.bernoulli(0.75) ? hue + rng.uniform(-0.06, 0.06) : rng.uniform();
    const std::array<float, 3> color = hsv_to_rgb(shape_hue, rng.uniform(0.35, 0.95), rng.uniform(0.25, 0.95));
    const double cxp = rng.uniform(0.0, width), cyp = rng.uniform(0.0, height);
    const double rx = rng.uniform(0.04, 0.3) * width, ry = rng.uniform(0.04, 0.3) * height;
    const double alpha = rng.uniform(0.6, 1.0);
    const double shade_x = rng.uniform(-0.4, 0.4) / rx, shade_y = rng.uniform(-0.4, 0.4) / ry;
    const bool striped = rng.bernoulli(0.35);
    const double stripe_f = 2 * std::numbers::pi / rng.uniform(4.0, 24.0);
    const double stripe_a = rng.uniform(0.0, std::numbers::pi);
    const double stripe_amp = rng.uniform(10.0, 40.0);
    const int x0 = std::max(0, static_cast<int>(cxp - rx)), x1 = std::min(width, static_cast<int>(cxp + rx) + 1);
    const int y0 = std::max(0, static_cast<int>(cyp - ry)), y1 = std::min(height, static_cast<int>(cyp + ry) + 1);
    for (int y = y0; y < y1; ++y) {
      const double dy = (y - cyp);
      for (int x = x0; x < x1; ++x) {
        const double dx = (x - cxp);
        if (ellipse && (dx * dx) / (rx * rx) + (dy * dy) / (ry * ry) > 1.0) continue;
        double shade = 1.0 + shade_x * dx + shade_y * dy;
        float* p = img.data() + (static_cast<std::size_t>(y) * w + static_cast<std::size_t>(x)) * 3;
        const double stripe =
            striped ? stripe_amp * std::sin(stripe_f * (dx * std::cos(stripe_a) + dy * std::sin(stripe_a))) : 0.0;
        for (int c = 0; c < 3; ++c) {
          const double v = color[static_cast<std::size_t>(c)] * shade + stripe;
          p[c] = static_cast<float>((1 - alpha) * p[c] + alpha * v);
        }
      }
    }
  }
}

// Grain: per-pixel noise (colour too), 2x2 mottling and 4x4 blotches. Their energy at low and
// mid DCT frequencies, where quality 90 quantises finely, is what brings a 500x375 file to
// ~100 KB, as photos of that size are; flat colours would be ~10 KB and decode far faster.
std::vector<std::uint8_t> grained(const std::vector<float>& img, std::size_t w, std::size_t h,
                                  SampleRng& rng) {
  const std::size_t gw = w / 2 + 1, gw4 = w / 4 + 1;
  std::vector<float> mottle(gw * (h / 2 + 1)), blotch(gw4 * (h / 4 + 1));
  for (float& m : mottle) m = static_cast<float>(rng.uniform(-1.0, 1.0));
  for (float& m : blotch) m = static_cast<float>(rng.uniform(-1.0, 1.0));
  std::vector<std::uint8_t> out(w * h * 3);
  const float fine = static_cast<float>(rng.uniform(16.0, 20.0));
  const float coarse = static_cast<float>(rng.uniform(16.0, 22.0));
  const float blotchy = static_cast<float>(rng.uniform(12.0, 18.0));
  for (std::size_t y = 0; y < h; ++y) {
    for (std::size_t x = 0; x < w; ++x) {
      const std::size_t i = y * w + x;
      const std::uint64_t bits = rng.next();
      const float luma = (static_cast<float>(bits & 0xFF) + static_cast<float>((bits >> 8) & 0xFF) - 255.0f) / 255.0f;
      const float grain = fine * luma + coarse * mottle[(y / 2) * gw + x / 2] + blotchy * blotch[(y / 4) * gw4 + x / 4];
      for (int c = 0; c < 3; ++c) {
        const float chroma = (static_cast<float>((bits >> (16 + 8 * c)) & 0xFF) - 127.5f) / 127.5f;
        const float v = img[3 * i + static_cast<std::size_t>(c)] + grain + 1.2f * fine * chroma;
        out[3 * i + static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
  return out;
}

}  // namespace

std::vector<std::uint8_t> synthetic_photo(int width, int height, int label, int classes,
                                          std::uint64_t seed, std::uint64_t index) {
  SampleRng rng(seed ^ kImageStream, static_cast<std::uint64_t>(label), index);
  const auto w = static_cast<std::size_t>(width);
  const auto h = static_cast<std::size_t>(height);
  std::vector<float> img(w * h * 3);
  const double hue = (label + 0.5) / std::max(classes, 1);
  paint_background(img, w, h, hue, rng);
  paint_shapes(img, width, height, hue, rng);
  return grained(img, w, h, rng);
}

void validate(const ImageDatasetOptions& o) {
  if (o.out.empty()) throw DatasetError("out: empty; allowed: a directory path");
  if (o.count < 1 || o.count > 100'000'000)
    throw DatasetError("count: " + std::to_string(o.count) + " is not allowed; allowed: 1 to 100000000");
  if (o.width < 16 || o.height < 16 || o.width > 16384 || o.height > 16384)
    throw DatasetError("size: " + std::to_string(o.width) + "x" + std::to_string(o.height) +
                       " is not allowed; allowed: WxH with each side 16 to 16384");
  if (o.classes < 1 || o.classes > 100000)
    throw DatasetError("classes: " + std::to_string(o.classes) + " is not allowed; allowed: 1 to 100000");
  if (o.quality < 1 || o.quality > 100)
    throw DatasetError("quality: " + std::to_string(o.quality) + " is not allowed; allowed: 1 to 100");
  if (!(o.skew_share >= 0 && o.skew_share <= 1))
    throw DatasetError("skew: share " + std::to_string(o.skew_share) + " is not allowed; allowed: 0 to 1");
  if (o.skew_share > 0 && (o.skew_width < 16 || o.skew_height < 16 || o.skew_width > 16384 || o.skew_height > 16384))
    throw DatasetError("skew: " + std::to_string(o.skew_width) + "x" + std::to_string(o.skew_height) +
                       " is not allowed; allowed: WxH with each side 16 to 16384");
}

std::pair<int, int> image_size_of(const ImageDatasetOptions& o, std::int64_t index) {
  if (o.skew_share <= 0) return {o.width, o.height};
  const auto at = [&](std::int64_t i) { return static_cast<std::int64_t>(std::floor(static_cast<double>(i) * o.skew_share)); };
  return at(index + 1) > at(index) ? std::pair{o.skew_width, o.skew_height} : std::pair{o.width, o.height};
}

void prepare_dataset_dir(const ImageDatasetOptions& o) {
  validate(o);
  const fs::path out(o.out);
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    throw DatasetError("out: '" + o.out + "' exists and is not an empty directory; allowed: a new or empty directory");
  fs::create_directories(out, ec);
  if (ec) throw std::runtime_error("cannot create '" + o.out + "': " + ec.message());
}

ShardDatasetSummary write_shards(const ShardDatasetOptions& options, const ShardWriter& write_shard) {
  if (options.shard_samples < 1)
    throw DatasetError("shard_samples: " + std::to_string(options.shard_samples) +
                       " is not allowed; allowed: 1 or more");
  prepare_dataset_dir(options.images);
  const std::int64_t count = options.images.count;
  const std::int64_t shards = (count + options.shard_samples - 1) / options.shard_samples;
  std::atomic<std::uint64_t> bytes{0};
  for_each_in_parallel(shards, [&](std::int64_t s) {
    const std::int64_t first = s * options.shard_samples;
    bytes.fetch_add(write_shard(s, shards, first, std::min(count, first + options.shard_samples)),
                    std::memory_order_relaxed);
  });
  return {count, shards, bytes.load()};
}

std::vector<std::uint8_t> synthetic_jpeg(const ImageDatasetOptions& o, std::int64_t index) {
  const int label = static_cast<int>(index % o.classes);
  JpegEncodeOptions jpeg;
  jpeg.quality = o.quality;
  const auto [width, height] = image_size_of(o, index);
  return encode_jpeg(
      synthetic_photo(width, height, label, o.classes, o.seed, static_cast<std::uint64_t>(index)),
      width, height, jpeg);
}

void for_each_in_parallel(std::int64_t n, const std::function<void(std::int64_t)>& work) {
  // Plain threads rather than TBB's parallel_for: their start and join order the writes for
  // ThreadSanitizer too, where TBB hands tasks over inside libtbb.so, which TSan cannot see.
  std::atomic<std::int64_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  const auto run = [&] {
    try {
      for (std::int64_t i = next++; i < n; i = next++) work(i);
    } catch (...) {
      next = n;  // the others stop after their current item
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  const std::int64_t helpers =
      std::min<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()), n) - 1;
  {
    std::vector<std::jthread> threads;
    for (std::int64_t k = 0; k < helpers; ++k) threads.emplace_back(run);
    run();
  }  // joined
  if (failure) std::rethrow_exception(failure);
}

ImageDatasetSummary make_image_dataset(const ImageDatasetOptions& o) {
  prepare_dataset_dir(o);
  const fs::path out(o.out);
  ImageDatasetSummary summary;
  std::error_code ec;
  for (int k = 0; k < o.classes; ++k) {
    summary.classes.push_back(class_name(k));
    fs::create_directories(out / summary.classes.back(), ec);
    if (ec) throw std::runtime_error("cannot create '" + (out / summary.classes.back()).string() + "': " + ec.message());
  }
  std::atomic<std::uint64_t> bytes{0};
  for_each_in_parallel(o.count, [&](std::int64_t i) {
    const std::vector<std::uint8_t> file = synthetic_jpeg(o, i);
    write_file(out / summary.classes[static_cast<std::size_t>(i % o.classes)] / file_name(i), file);
    bytes.fetch_add(file.size(), std::memory_order_relaxed);
  });
  summary.files = o.count;
  summary.bytes = bytes.load();
  return summary;
}

}  // namespace feedscope
