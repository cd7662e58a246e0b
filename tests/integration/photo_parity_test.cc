// images:DIR against torchvision on real photographs (scripts/fetch_photos.sh: a Debian package's
// JPEG photographs, 1280x1024 to 5640x3172, where most crops are decoded at reduced DCT scale):
// every photograph through the eval pipeline and through several epochs of train crops, with
// reduced-scale decode on and off. Each sample must stay within docs/datasets.md's bound:
// mean difference <= 1 grey level, 99th percentile <= 4. Prints the figures docs/benchmarks.md
// quotes.
// Needs the photographs ($FEEDSCOPE_PHOTOS, default ${TMPDIR:-/tmp}/feedscope-photos) and
// python3 with torchvision; skipped, saying which is missing, without.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "loader/image_folder_dataset.h"
#include "loader/image_transforms.h"
#include "loader/jpeg_decoder.h"
#include "tests/support/process.h"
#include "tests/support/reference_python.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;

constexpr int kEpochs = 6;

std::string photos_dir() {
  if (const char* chosen = std::getenv("FEEDSCOPE_PHOTOS"); chosen && *chosen) return chosen;
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/feedscope-photos";
}

struct Figures {
  double mean_sum = 0, worst_mean = 0, worst_p99 = 0, worst_max = 0;
  int samples = 0, reduced = 0;
};

TEST(PhotoParityTest, RealPhotographsStayWithinTheDocumentedBoundOfTorchvision) {
  const std::string python = testing::reference_python();
  const std::string photos = photos_dir();
  if (!fs::is_directory(photos)) GTEST_SKIP() << "no photographs at " << photos << ": run scripts/fetch_photos.sh";
  if (!fs::exists(python)) GTEST_SKIP() << "no " << python;
  testing::TempDir dir;
  std::ofstream bin(dir / "samples.bin", std::ios::binary), crops(dir / "crops.txt");
  std::vector<std::string> lines;
  std::vector<int> scales;
  std::vector<bool> reduced_on;
  std::vector<float> out(3 * 224 * 224);
  for (const bool reduced : {true, false}) {
    for (const bool train : {true, false}) {
      ImageFolderDataset::Options o;
      o.root = photos;
      o.train = train;
      o.seed = 9;
      o.reduced_decode = reduced;
      const ImageFolderDataset d(o);
      JpegDecoder decoder;
      for (std::size_t i = 0; i < d.size(); ++i) {
        std::ifstream in(d.path(i), std::ios::binary);
        const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const JpegHeader h = decoder.read_header(bytes);
        for (std::uint64_t epoch = 0; epoch < (train ? kEpochs : 1u); ++epoch) {
          LoadContext ctx;
          ctx.epoch = epoch;
          d.load(i, std::as_writable_bytes(std::span(out)), ctx);
          bin.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() * 4));
          std::ostringstream line;
          int scale = 8;
          if (train) {
            SampleRng rng(9, epoch, i);  // the dataset's own draw, repeated
            const CropBox c = random_resized_crop_box(h.width, h.height, rng);
            line << d.path(i) << " " << c.top << " " << c.left << " " << c.height << " " << c.width << " "
                 << rng.bernoulli(0.5);
            scale = choose_jpeg_scale(resized_crop_geometry(c, 224));
          } else {
            line << d.path(i) << " 0 0 0 0 -1";
            scale = choose_jpeg_scale(resize_center_crop_geometry(h.width, h.height, 256, 224));
          }
          crops << line.str() << "\n";
          lines.push_back(line.str());
          scales.push_back(reduced ? scale : 8);
          reduced_on.push_back(reduced);
        }
      }
    }
  }
  bin.close();
  crops.close();
  const auto r = testing::run_process({python, "-c", testing::kTorchvisionReference, dir / "samples.bin", dir / "crops.txt"});
  if (r.exit_code == 77) GTEST_SKIP() << "torchvision is not installed for " << python;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream diffs(r.out);
  std::map<bool, Figures> figures;
  for (std::size_t k = 0; k < lines.size(); ++k) {
    double mean = -1, p99 = -1, max = -1;
    ASSERT_TRUE(diffs >> mean >> p99 >> max) << r.out;
    EXPECT_LE(mean, 1.0) << lines[k] << " at scale " << scales[k] << "/8";
    EXPECT_LE(p99, 4.0) << lines[k] << " at scale " << scales[k] << "/8";
    Figures& f = figures[reduced_on[k]];
    f.mean_sum += mean;
    f.worst_mean = std::max(f.worst_mean, mean);
    f.worst_p99 = std::max(f.worst_p99, p99);
    f.worst_max = std::max(f.worst_max, max);
    ++f.samples;
    f.reduced += scales[k] < 8;
  }
  for (const auto& [reduced, f] : figures)
    std::printf("reduced-scale decode %s: %d samples (%d at reduced scale), mean %.3f, worst mean %.3f, "
                "worst p99 %.2f, worst max %.1f grey levels\n",
                reduced ? "on " : "off", f.samples, f.reduced, f.mean_sum / f.samples, f.worst_mean, f.worst_p99,
                f.worst_max);
  EXPECT_GT(figures[true].reduced, 0) << "the photographs should exercise the reduced-scale decode";
}

}  // namespace
}  // namespace feedscope
