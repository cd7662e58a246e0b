// feedscope's images:DIR samples against torchvision's own transforms on the same files: the eval
// pipeline as is, the train pipeline with feedscope's crop and flip handed to torchvision's
// F.resized_crop / F.hflip. Needs a python3 with torchvision: $FEEDSCOPE_PYTHON, or Debian's
// /usr/bin/python3 (python3-torchvision); skipped without.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "loader/image_dataset_maker.h"
#include "loader/image_folder_dataset.h"
#include "loader/jpeg_decoder.h"
#include "tests/support/process.h"
#include "tests/support/reference_python.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

struct Sample {
  std::string line;
  int scale = 8;
};


TEST(TorchvisionParityTest, SamplesMatchTorchvisionsTransforms) {
  const std::string python = testing::reference_python();
  if (!std::filesystem::exists(python)) GTEST_SKIP() << "no " << python;
  testing::TempDir dir;
  ImageDatasetOptions make;
  make.out = dir / "small";
  make.count = 6;
  make.classes = 2;
  make_image_dataset(make);  // 500x375: ImageNet's usual size, decoded at full scale
  make.out = dir / "large";
  make.count = 2;
  make.width = 2400;
  make.height = 1800;
  make_image_dataset(make);  // large enough for the DCT-domain downscale, which keeps 3x the output

  std::ofstream bin(dir / "samples.bin", std::ios::binary), crops(dir / "crops.txt");
  std::vector<Sample> samples;
  JpegDecoder decoder;
  std::vector<float> out(3 * 224 * 224);
  for (const char* sub : {"small", "large"}) {
    for (const bool train : {true, false}) {
      ImageFolderDataset::Options o;
      o.root = dir / sub;
      o.train = train;
      o.seed = 5;
      const ImageFolderDataset d(o);
      for (std::size_t i = 0; i < d.size(); ++i) {
        LoadContext ctx;
        ctx.epoch = 2;
        d.load(i, std::as_writable_bytes(std::span(out)), ctx);
        bin.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() * 4));
        std::ifstream in(d.path(i), std::ios::binary);
        const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const JpegHeader h = decoder.read_header(bytes);
        std::ostringstream line;
        Sample s;
        if (train) {
          SampleRng rng(5, 2, i);  // the dataset's own draw, repeated
          const CropBox c = random_resized_crop_box(h.width, h.height, rng);
          const bool flip = rng.bernoulli(0.5);
          line << d.path(i) << " " << c.top << " " << c.left << " " << c.height << " " << c.width << " " << flip;
          s.scale = choose_jpeg_scale(resized_crop_geometry(c, 224));
        } else {
          line << d.path(i) << " 0 0 0 0 -1";
          s.scale = choose_jpeg_scale(resize_center_crop_geometry(h.width, h.height, 256, 224));
        }
        crops << line.str() << "\n";
        s.line = line.str();
        samples.push_back(s);
      }
    }
  }
  bin.close();
  crops.close();

  const auto r = testing::run_process(
      {python, "-c", testing::kTorchvisionReference, dir / "samples.bin", dir / "crops.txt"});
  if (r.exit_code == 77) GTEST_SKIP() << "torchvision is not installed for " << python;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream diffs(r.out);
  int scaled = 0;
  for (const Sample& s : samples) {
    double mean = -1, p99 = -1, max = -1;
    ASSERT_TRUE(diffs >> mean >> p99 >> max) << r.out;
    if (s.scale == 8) {
      // The same pixels and filter: only PIL's rounding to 8 bits after each of its two passes.
      EXPECT_LT(mean, 0.4) << s.line;
      EXPECT_LE(max, 1.01) << s.line;
    } else {
      ++scaled;
      // Downscaled in the DCT domain first, only where the crop stays 3x the output: close on
      // average, not pixel-exact.
      EXPECT_LE(mean, 1.0) << s.line << " at scale " << s.scale << "/8";
    }
  }
  EXPECT_GT(scaled, 0) << "the 2400x1800 images should exercise the DCT-domain downscale";
}

}  // namespace
}  // namespace feedscope
