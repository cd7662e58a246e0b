#include "loader/image_folder_dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "loader/batch_loader.h"
#include "loader/image_dataset_maker.h"
#include "loader/index_sampler.h"
#include "loader/jpeg_decoder.h"
#include "loader/jpeg_encoder.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::vector<std::uint8_t> small_jpeg(int width = 64, int height = 48, std::uint64_t index = 0) {
  return encode_jpeg(synthetic_photo(width, height, 0, 2, 1, index), width, height);
}

void write(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> relative_paths(const ImageFolderDataset& d, const fs::path& root) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < d.size(); ++i)
    out.push_back(fs::path(d.path(i)).lexically_relative(root).string() + ":" + std::to_string(d.label(i)));
  return out;
}

ImageFolderDataset::Options options_for(const fs::path& root, bool train = true, int size = 32) {
  ImageFolderDataset::Options o;
  o.root = root.string();
  o.train = train;
  o.size = size;
  o.seed = 11;
  return o;
}

std::vector<float> load(const ImageFolderDataset& d, std::size_t index, std::uint64_t epoch = 0) {
  std::vector<float> out(static_cast<std::size_t>(d.spec().elements()));
  LoadContext ctx;
  ctx.epoch = epoch;
  d.load(index, std::as_writable_bytes(std::span(out)), ctx);
  return out;
}

TEST(ImageFolderDatasetTest, ClassesAndFilesInTorchvisionOrder) {
  TempDir dir;
  const auto jpeg = small_jpeg();
  // Byte order: upper case sorts before lower case, as Python's sorted(). Every extension of
  // torchvision's IMG_EXTENSIONS, in any case; hidden files and folders count, as there.
  for (const char* f : {"b/2.jpg", "b/10.JPEG", "b/1.Jpg", "a/z.jpeg", "a/sub/y.jpg", "a/sub2/x.jpg",
                        "a/a.jpg", "B/only.jpg", "a/p.png", "a/q.WebP", "a/r.bmp", "a/s.ppm", "a/t.pgm",
                        "a/u.tif", "a/v.TIFF", "a/.hidden.jpg", ".cache/w.jpg"})
    write(dir.path() / f, jpeg);
  write(dir.path() / "a/notes.txt", {1, 2, 3});
  write(dir.path() / "a/picture.gif", {1, 2, 3});
  write(dir.path() / "a/jpg", jpeg);  // no extension at all
  write(dir.path() / "loose.jpg", jpeg);  // files at the top level are not a class
  ImageFolderDataset d(options_for(dir.path()));
  EXPECT_EQ(d.classes(), (std::vector<std::string>{".cache", "B", "a", "b"}));
  EXPECT_EQ(d.num_classes(), 4);
  // sorted(os.walk()): the folder "a" first, then "a/sub", "a/sub2"; files sorted in each.
  EXPECT_EQ(relative_paths(d, dir.path()),
            (std::vector<std::string>{".cache/w.jpg:0", "B/only.jpg:1", "a/.hidden.jpg:2", "a/a.jpg:2",
                                      "a/p.png:2", "a/q.WebP:2", "a/r.bmp:2", "a/s.ppm:2", "a/t.pgm:2",
                                      "a/u.tif:2", "a/v.TIFF:2", "a/z.jpeg:2", "a/sub/y.jpg:2",
                                      "a/sub2/x.jpg:2", "b/1.Jpg:3", "b/10.JPEG:3", "b/2.jpg:3"}));
  EXPECT_EQ(d.skipped(), 3u);
  EXPECT_EQ(d.spec().shape, (std::vector<std::int64_t>{3, 32, 32}));
  EXPECT_EQ(d.spec().dtype, DType::float32);
  EXPECT_EQ(d.name(), "images:" + dir.path().string());
  EXPECT_EQ(d.describe(4), (dir.path() / "a/p.png").string());
}

TEST(ImageFolderDatasetTest, SymlinksAreFollowedAndLoopsEnd) {
  TempDir dir, outside;
  const auto jpeg = small_jpeg();
  const fs::path root = dir.path() / "root";
  write(root / "cat/1.jpg", jpeg);
  write(root / "cat/deep/2.jpg", jpeg);
  write(root / "dog/3.jpg", jpeg);
  write(outside.path() / "secret/4.jpg", jpeg);
  write(outside.path() / "5.jpg", jpeg);
  write(outside.path() / "store/6.jpg", jpeg);
  fs::create_directory_symlink("..", root / "cat/deep/up");          // loop back to cat
  fs::create_directory_symlink(".", root / "dog/self");              // loop to itself
  fs::create_directory_symlink(root / "dog", root / "cat/dogs");     // a second path to dog
  fs::create_directory_symlink(outside.path() / "secret", root / "cat/escape");
  fs::create_symlink(outside.path() / "5.jpg", root / "dog/escape.jpg");
  fs::create_directory_symlink(outside.path() / "store", root / "bird");  // a class out of the root
  fs::create_symlink(root / "missing.jpg", root / "dog/broken.jpg");      // listed; fails to load
  ImageFolderDataset d(options_for(root));
  EXPECT_EQ(d.classes(), (std::vector<std::string>{"bird", "cat", "dog"}));
  EXPECT_EQ(relative_paths(d, root),
            (std::vector<std::string>{"bird/6.jpg:0", "cat/1.jpg:1", "cat/deep/2.jpg:1", "cat/dogs/3.jpg:1",
                                      "cat/dogs/broken.jpg:1", "cat/dogs/escape.jpg:1", "cat/escape/4.jpg:1",
                                      "dog/3.jpg:2", "dog/broken.jpg:2", "dog/escape.jpg:2"}));
  EXPECT_EQ(d.loops(), (std::vector<std::string>{(root / "cat/deep/up").string(), (root / "cat/dogs/self").string(),
                                                 (root / "dog/self").string()}));
  EXPECT_NO_THROW(load(d, 5));  // cat/dogs/escape.jpg, a link out of the root
  try {
    load(d, 4);
    ADD_FAILURE() << "a broken link loaded";
  } catch (const SampleError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.jpg"), std::string::npos) << e.what();
  }
}

TEST(ImageFolderDatasetTest, BadFoldersNameThePath) {
  TempDir dir;
  const auto message = [](const fs::path& root) {
    try {
      ImageFolderDataset d(options_for(root));
    } catch (const DatasetError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const fs::path missing = dir.path() / "missing";
  EXPECT_NE(message(missing).find("no such directory"), std::string::npos);
  EXPECT_NE(message(missing).find(missing.string()), std::string::npos);
  fs::create_directories(dir.path() / "empty");
  EXPECT_NE(message(dir.path() / "empty").find("no class folders"), std::string::npos);
  write(dir.path() / "file", {1});
  EXPECT_NE(message(dir.path() / "file").find("not a directory"), std::string::npos);
  write(dir.path() / "c/a/1.jpg", small_jpeg());
  fs::create_directories(dir.path() / "c/b");
  write(dir.path() / "c/b/x.gif", {1});
  const std::string no_files = message(dir.path() / "c");
  EXPECT_NE(no_files.find("no image files (.jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp) in class folder(s) b"),
            std::string::npos) << no_files;
  ImageFolderDataset::Options bad = options_for(dir.path() / "c/a");
  bad.size = 0;
  EXPECT_THROW(ImageFolderDataset{bad}, DatasetError);
}

TEST(ImageFolderDatasetTest, TrainSamplesAreNormalizedAndReproducible) {
  TempDir dir;
  write(dir.path() / "a/1.jpg", small_jpeg(120, 90, 1));
  write(dir.path() / "b/2.jpg", small_jpeg(90, 120, 2));
  ImageFolderDataset d(options_for(dir.path(), true, 48));
  ImageFolderDataset same(options_for(dir.path(), true, 48));
  for (std::size_t i = 0; i < d.size(); ++i) {
    const auto x = load(d, i);
    for (const float v : x) {
      ASSERT_TRUE(std::isfinite(v));
      ASSERT_GE(v, (0 - 0.485f) / 0.229f - 1e-4f);
      ASSERT_LE(v, (1 - 0.406f) / 0.225f + 1e-4f);
    }
    EXPECT_EQ(x, load(same, i));  // same seed, epoch, index
    EXPECT_NE(x, load(d, i, 1));  // another epoch, another crop
  }
  ImageFolderDataset::Options other = options_for(dir.path(), true, 48);
  other.seed = 12;
  EXPECT_NE(load(d, 0), load(ImageFolderDataset(other), 0));
}

TEST(ImageFolderDatasetTest, FlipsAboutHalfTheTime) {
  TempDir dir;
  write(dir.path() / "a/1.jpg", small_jpeg(64, 48, 3));
  // A crop that is always the whole image isolates the flip: each sample is the image or its mirror.
  ImageFolderDataset::Options o = options_for(dir.path(), true, 24);
  o.crop.scale_min = o.crop.scale_max = 1.0;
  o.crop.ratio_min = o.crop.ratio_max = 64.0 / 48.0;
  ImageFolderDataset d(o);
  const auto first = load(d, 0, 0);
  std::vector<float> mirror(first.size());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 24; ++y)
      for (int x = 0; x < 24; ++x) mirror[(c * 24 + y) * 24 + x] = first[(c * 24 + y) * 24 + 23 - x];
  int flipped = 0;
  constexpr int kEpochs = 1000;
  for (int e = 0; e < kEpochs; ++e) {
    const auto x = load(d, 0, static_cast<std::uint64_t>(e));
    ASSERT_TRUE(x == first || x == mirror) << "epoch " << e;
    flipped += x != first;
  }
  EXPECT_NEAR(flipped / double(kEpochs), 0.5, 0.06);  // ~3.8 standard errors
}

TEST(ImageFolderDatasetTest, EvalMatchesAFullDecodeResizedAndCentreCropped) {
  TempDir dir;
  const auto file = small_jpeg(1200, 900, 4);
  write(dir.path() / "a/1.jpg", file);
  ImageFolderDataset::Options o = options_for(dir.path(), false, 112);  // resize 128, crop 112
  ImageFolderDataset d(o);
  const auto x = load(d, 0);
  EXPECT_EQ(x, load(d, 0, 5)) << "eval has no randomness";
  o.reduced_decode = false;
  const auto full = load(ImageFolderDataset(o), 0);
  // The straightforward way: decode everything at full size, resize the whole image, crop.
  JpegDecoder decoder;
  std::vector<std::uint8_t> rgb;
  decoder.decode(file, rgb);
  ResizeNormalize resize;
  resize.prepare(resize_center_crop_geometry(1200, 900, 128, 112));
  std::vector<float> expected(x.size());
  resize.run(rgb.data(), 1200 * 3, 0, 0, false, Normalization{}, expected.data());
  EXPECT_EQ(full, expected) << "reduced decode off: the full decode, region or not, gives the same pixels";
  double sum = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sum += std::fabs(x[i] - expected[i]);
  // The 900-pixel crop keeps 450 >= 3 x 112 at 4/8 scale, so it is decoded there, which drops the
  // pixel-level grain a triangle filter only damps: within 1 grey level on average (a wrong crop
  // or scale is 20+).
  EXPECT_LT(sum / static_cast<double>(x.size()), 1.0 / 255 / 0.226);
  EXPECT_GT(sum, 0.0) << "a DCT-scaled decode should not be bit-identical to full decode + resize";
}

TEST(ImageFolderDatasetTest, GrayscaleCmykAndProgressiveFilesLoadAsRgb) {
  TempDir dir;
  const int w = 80, h = 60;
  const auto rgb = synthetic_photo(w, h, 0, 2, 9, 0);
  std::vector<std::uint8_t> grey(static_cast<std::size_t>(w * h)), cmyk(static_cast<std::size_t>(w * h * 4));
  for (std::size_t i = 0; i < grey.size(); ++i) {
    grey[i] = rgb[3 * i];
    // Adobe's inverted CMYK of a pure grey: no colour ink, black = the grey level.
    cmyk[4 * i] = cmyk[4 * i + 1] = cmyk[4 * i + 2] = 255;
    cmyk[4 * i + 3] = rgb[3 * i];
  }
  JpegEncodeOptions o;
  o.components = 1;
  write(dir.path() / "a/grey.jpg", encode_jpeg(grey, w, h, o));
  o.components = 4;
  write(dir.path() / "a/cmyk.jpg", encode_jpeg(cmyk, w, h, o));
  o.components = 3;
  o.progressive = true;
  write(dir.path() / "a/progressive.jpg", encode_jpeg(rgb, w, h, o));
  for (const bool train : {true, false}) {
    ImageFolderDataset d(options_for(dir.path(), train, 32));
    ASSERT_EQ(d.size(), 3u);
    const Normalization n;
    for (std::size_t i = 0; i < 2; ++i) {  // cmyk.jpg, grey.jpg: grey pixels, R = G = B
      const auto x = load(d, i);
      for (std::size_t p = 0; p < 32 * 32; ++p) {
        const float r = x[p] * n.std[0] + n.mean[0];
        const float g = x[1024 + p] * n.std[1] + n.mean[1];
        const float b = x[2048 + p] * n.std[2] + n.mean[2];
        ASSERT_NEAR(r, g, 2.0f / 255) << d.path(i);
        ASSERT_NEAR(r, b, 2.0f / 255) << d.path(i);
      }
    }
    if (!train) {
      // Both hold the same grey levels (and eval crops both alike), so the CMYK inversion and
      // black channel are read right.
      const auto from_cmyk = load(d, 0), from_grey = load(d, 1);
      double diff = 0;
      for (std::size_t p = 0; p < from_cmyk.size(); ++p) diff += std::fabs(from_cmyk[p] - from_grey[p]);
      EXPECT_LT(diff / static_cast<double>(from_cmyk.size()), 3.0 / 255 / 0.225);
    }
    const auto x = load(d, 2);
    EXPECT_TRUE(std::all_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); }));
  }
}

TEST(ImageFolderDatasetTest, TruncatedAndCorruptFilesThrowSampleErrorNamingTheFile) {
  TempDir dir;
  const auto good = small_jpeg(160, 120, 5);
  write(dir.path() / "a/0_good.jpg", good);
  write(dir.path() / "a/1_truncated.jpg", std::vector<std::uint8_t>(good.begin(), good.begin() + static_cast<long>(good.size() * 6 / 10)));
  auto corrupt = good;
  for (std::size_t i = corrupt.size() / 2; i < corrupt.size() / 2 + 40; ++i) corrupt[i] = static_cast<std::uint8_t>(i * 37);
  corrupt[corrupt.size() / 2 + 3] = 0xFF;
  corrupt[corrupt.size() / 2 + 4] = 0x45;  // a stray marker in the scan
  write(dir.path() / "a/2_corrupt.jpg", corrupt);
  auto bad_header = good;
  bad_header[2] = 0x00;  // the first marker's 0xFF
  write(dir.path() / "a/3_header.jpg", bad_header);
  write(dir.path() / "a/4_empty.jpg", {});
  for (const bool train : {true, false}) {
    ImageFolderDataset d(options_for(dir.path(), train, 32));
    EXPECT_NO_THROW(load(d, 0));
    for (std::size_t i = 1; i < d.size(); ++i) {
      // Every crop: a region decode that never reaches the damage must still refuse the file.
      for (std::uint64_t epoch = 0; epoch < (train ? 5u : 1u); ++epoch) {
        try {
          load(d, i, epoch);
          ADD_FAILURE() << d.path(i) << " loaded";
        } catch (const SampleError& e) {
          EXPECT_EQ(e.index(), i);
          EXPECT_EQ(e.source(), d.path(i));
          EXPECT_NE(std::string(e.what()).find(d.path(i)), std::string::npos) << e.what();
        }
      }
    }
  }
}

TEST(ImageFolderDatasetTest, SameBatchesWhateverTheWorkerCount) {
  TempDir dir;
  ImageDatasetOptions make;
  make.out = (dir.path() / "data").string();
  make.count = 24;
  make.width = 80;
  make.height = 60;
  make.classes = 3;
  make_image_dataset(make);
  auto dataset = std::make_shared<ImageFolderDataset>(options_for(dir.path() / "data", true, 40));
  auto sampler = std::make_shared<SequentialSampler>(dataset->size());
  std::vector<std::vector<std::byte>> reference;
  for (const int workers : {0, 1, 2, 3}) {
    LoaderOptions o;
    o.num_workers = workers;
    o.batch_size = 5;
    BatchLoader loader(dataset, sampler, o);
    std::vector<std::vector<std::byte>> batches;
    for (const std::uint64_t epoch : {0u, 1u}) {
      loader.begin_epoch(epoch);
      while (auto batch = loader.next()) {
        const std::size_t bytes = static_cast<std::size_t>(batch->size) * dataset->spec().bytes();
        batches.emplace_back(batch->data, batch->data + bytes);
        for (std::int64_t i = 0; i < batch->size; ++i)
          EXPECT_EQ(batch->labels[i], dataset->label(static_cast<std::size_t>(batch->index * 5 + i)));
      }
    }
    ASSERT_EQ(batches.size(), 10u);
    if (reference.empty()) reference = batches;
    else EXPECT_TRUE(batches == reference) << workers << " workers";
  }
  EXPECT_NE(reference[0], reference[5]) << "epochs 0 and 1 should crop differently";
}

// Files changed under a running loader, between epochs: one JPEG deleted, one truncated. Under
// fail the epoch stops at the first, naming it; under skip it goes on, and every lost file is
// counted and listed, epoch after epoch.
class ImagesChangedBetweenEpochsTest : public ::testing::TestWithParam<BadSamplePolicy> {};

TEST_P(ImagesChangedBetweenEpochsTest, FailNamesTheFileAndSkipCountsItEveryEpoch) {
  TempDir dir;
  ImageDatasetOptions make;
  make.out = (dir.path() / "data").string();
  make.count = 12;
  make.width = 64;
  make.height = 48;
  make.classes = 2;
  make_image_dataset(make);
  auto dataset = std::make_shared<ImageFolderDataset>(options_for(dir.path() / "data", true, 16));
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 4;
  o.bad_sample = GetParam();
  o.max_bad_ratio = 1.0;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(dataset->size()), o);
  const auto samples_in_epoch = [&] {
    std::int64_t samples = 0;
    while (auto batch = loader.next()) samples += batch->size;
    return samples;
  };
  ASSERT_EQ(samples_in_epoch(), 12);

  const std::string deleted = dataset->path(3), truncated = dataset->path(8);
  fs::remove(deleted);
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  loader.begin_epoch(1);
  if (GetParam() == BadSamplePolicy::fail) {
    struct Expected {
      std::size_t index;
      std::string file, why;
    };
    for (const auto& [index, file, why] :
         std::vector<Expected>{{3, deleted, "cannot open: No such file"}, {8, truncated, ""}}) {
      try {
        while (loader.next()) {
        }
        ADD_FAILURE() << file << " loaded";
      } catch (const SampleError& e) {
        EXPECT_EQ(e.index(), index);
        EXPECT_EQ(e.source(), file);
        EXPECT_NE(std::string(e.what()).find(file + "): " + why), std::string::npos) << e.what();
      }
      // The loader goes on past the failed batch if asked: the next one fails on the next file.
    }
    return;
  }
  for (std::uint64_t epoch = 1; epoch <= 3; ++epoch) {
    if (epoch > 1) loader.begin_epoch(epoch);
    EXPECT_EQ(samples_in_epoch(), 10) << "epoch " << epoch;
  }
  const DataErrors errors = loader.data_errors();
  EXPECT_EQ(errors.bad, 6u);
  EXPECT_EQ(errors.attempted, 48u);
  ASSERT_EQ(errors.examples.size(), 2u) << "one example per file, not per epoch";
  EXPECT_EQ(errors.examples[0].source, deleted);
  EXPECT_NE(errors.examples[0].message.find("cannot open: No such file"), std::string::npos)
      << errors.examples[0].message;
  EXPECT_EQ(errors.examples[1].source, truncated);
}

INSTANTIATE_TEST_SUITE_P(Policies, ImagesChangedBetweenEpochsTest,
                         ::testing::Values(BadSamplePolicy::fail, BadSamplePolicy::skip),
                         [](const auto& info) {
                           return info.param == BadSamplePolicy::fail ? "fail" : "skip";
                         });

}  // namespace
}  // namespace feedscope
