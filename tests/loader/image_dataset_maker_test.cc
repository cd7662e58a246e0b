#include "loader/image_dataset_maker.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "loader/dataset.h"
#include "loader/image_folder_dataset.h"
#include "loader/jpeg_decoder.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::map<std::string, std::string> read_tree(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) {
      std::ifstream in(e.path(), std::ios::binary);
      files[e.path().lexically_relative(root).string()] =
          std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  return files;
}

ImageDatasetOptions small(const fs::path& out) {
  ImageDatasetOptions o;
  o.out = out.string();
  o.count = 7;
  o.width = 96;
  o.height = 64;
  o.classes = 3;
  o.seed = 4;
  return o;
}

TEST(ImageDatasetMakerTest, SameSeedSameBytesInImageFolderLayout) {
  TempDir dir;
  const ImageDatasetSummary s = make_image_dataset(small(dir.path() / "a"));
  make_image_dataset(small(dir.path() / "b"));
  ImageDatasetOptions other = small(dir.path() / "c");
  other.seed = 5;
  make_image_dataset(other);
  const auto a = read_tree(dir.path() / "a"), b = read_tree(dir.path() / "b"), c = read_tree(dir.path() / "c");
  ASSERT_EQ(a.size(), 7u);
  EXPECT_EQ(a, b);
  ASSERT_EQ(c.size(), 7u);
  for (const auto& [name, bytes] : a) EXPECT_NE(bytes, c.at(name)) << name;
  EXPECT_EQ(s.files, 7);
  std::uint64_t total = 0;
  for (const auto& [name, bytes] : a) total += bytes.size();
  EXPECT_EQ(s.bytes, total);
  EXPECT_EQ(s.classes, (std::vector<std::string>{"class_0000", "class_0001", "class_0002"}));

  ImageFolderDataset::Options options;
  options.root = (dir.path() / "a").string();
  ImageFolderDataset d(options);
  ASSERT_EQ(d.size(), 7u);
  EXPECT_EQ(d.num_classes(), 3);
  // Image i is in class i % classes: 0, 3, 6 in class 0.
  EXPECT_EQ(fs::path(d.path(2)).filename(), "img_00000006.jpg");
  EXPECT_EQ(d.label(3), 1);
  JpegDecoder decoder;
  const std::string& first = a.begin()->second;
  const JpegHeader h = decoder.read_header({reinterpret_cast<const std::uint8_t*>(first.data()), first.size()});
  EXPECT_EQ(h.width, 96);
  EXPECT_EQ(h.height, 64);
}

TEST(ImageDatasetMakerTest, PhotoSizedFilesCompressLikePhotos) {
  TempDir dir;
  ImageDatasetOptions o = small(dir.path() / "d");
  o.count = 3;
  o.width = 500;
  o.height = 375;
  const ImageDatasetSummary s = make_image_dataset(o);
  // ImageNet's 500x375 photos at quality ~90 are mostly 100-200 KB; flat colours would be ~10 KB.
  const double mean = static_cast<double>(s.bytes) / 3;
  EXPECT_GT(mean, 80e3);
  EXPECT_LT(mean, 250e3);
}

TEST(ImageDatasetMakerTest, BadOptionsNameTheOption) {
  TempDir dir;
  const auto error = [&](const ImageDatasetOptions& o) {
    try {
      make_image_dataset(o);
    } catch (const DatasetError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ImageDatasetOptions o = small(dir.path() / "x");
  o.count = 0;
  EXPECT_EQ(error(o).rfind("count:", 0), 0u) << error(o);
  o = small(dir.path() / "x");
  o.width = 0;
  o.height = 5;
  EXPECT_EQ(error(o).rfind("size: 0x5", 0), 0u) << error(o);
  o = small(dir.path() / "x");
  o.quality = 101;
  EXPECT_EQ(error(o).rfind("quality: 101", 0), 0u) << error(o);
  o = small(dir.path() / "x");
  o.classes = 0;
  EXPECT_EQ(error(o).rfind("classes: 0", 0), 0u) << error(o);
  EXPECT_FALSE(fs::exists(dir.path() / "x")) << "nothing written for bad options";
  std::ofstream(dir.path() / "taken") << "x";
  o = small(dir.path());
  EXPECT_EQ(error(o).rfind("out:", 0), 0u) << error(o);
}

// --skew 0.25:160x120: every 4th image (3, 7, ...) at that size, the others as --size says; and
// the folder loads, its slowest files named with their pixels.
TEST(ImageDatasetMakerTest, ASkewMakesAnEvenlySpreadShareAnotherSize) {
  TempDir dir;
  ImageDatasetOptions o = small(dir.path() / "skew");
  o.count = 8;
  o.skew_share = 0.25;
  o.skew_width = 160;
  o.skew_height = 120;
  make_image_dataset(o);
  ImageFolderDataset::Options fo;
  fo.root = o.out;
  const ImageFolderDataset d(fo);
  int big = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const SampleFile f = d.sample_file(i);
    ASSERT_TRUE(f.width && f.height && f.bytes) << f.file;
    const bool skewed = d.path(i).ends_with("img_00000003.jpg") || d.path(i).ends_with("img_00000007.jpg");
    EXPECT_EQ(*f.width, skewed ? 160 : 96) << f.file;
    EXPECT_EQ(*f.height, skewed ? 120 : 64) << f.file;
    big += skewed;
  }
  EXPECT_EQ(big, 2);
  o.skew_width = 8;
  EXPECT_THROW(validate(o), DatasetError);
}

}  // namespace
}  // namespace feedscope
