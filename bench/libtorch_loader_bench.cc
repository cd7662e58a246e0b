// libtorch's torch::data::DataLoader against feedscope's BatchLoader, side by side in one run, on
// the same ImageFolder, with three torch::data datasets:
//  - "same code": get() calls feedscope's own per-sample work (ImageFolderDataset::load: region
//    decode at the DCT scale the crop needs, fused resize+flip+normalize), so only the loader
//    differs: libtorch's makes a tensor per sample and stacks each batch (an allocation and a copy
//    per sample); feedscope's writes every sample straight into a preallocated batch slab.
//  - "whole decode": get() decodes the whole JPEG with libjpeg-turbo, as a libtorch user's dataset
//    does, then runs feedscope's own transform code (the same box, resize, flip, normalize) into
//    a fresh tensor. Only the decode strategy and the loader differ.
//  - "typical": get() does what a libtorch user writes: decode the whole JPEG with libjpeg-turbo,
//    then RandomResizedCrop (the same box), an antialiased bilinear resize, flip and Normalize
//    with torch ops. The gap to this one is everything feedscope does differently.
//
//   feedscope make-dataset images --out /tmp/imgs --count 1024
//   ./build/bench/libtorch_loader_bench /tmp/imgs [batches=24] [batch=64] [repeats=3]
//
// Each worker count runs the pair `repeats` times, alternating, and prints the medians: the
// ratio column is the median of the pairs' ratios, so a burst of load on a shared machine moves
// one pair, not the result.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <thread>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loader/batch_loader.h"
#include "loader/image_folder_dataset.h"
#include "loader/image_transforms.h"
#include "loader/jpeg_decoder.h"
#include "loader/sample_rng.h"

namespace {

using feedscope::ImageFolderDataset;
using Clock = std::chrono::steady_clock;

std::vector<std::uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A seed per worker thread for the random crop and flip.
std::uint64_t sample_seed() {
  thread_local std::mt19937_64 gen(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  return gen();
}

// A torch::data dataset over the image folder; each subclass's get() loads one sample its way.
template <class Self>
class FolderDataset : public torch::data::datasets::Dataset<Self> {
 public:
  explicit FolderDataset(std::shared_ptr<const ImageFolderDataset> images)
      : images_(std::move(images)) {}
  torch::optional<std::size_t> size() const override { return images_->size(); }

 protected:
  std::shared_ptr<const ImageFolderDataset> images_;
};

// The torch::data face of the same dataset: get() decodes and transforms into a fresh tensor.
class TorchJpegFolder : public FolderDataset<TorchJpegFolder> {
 public:
  using FolderDataset::FolderDataset;
  torch::data::Example<> get(std::size_t index) override {
    const auto& shape = images_->spec().shape;
    torch::Tensor x = torch::empty({shape[0], shape[1], shape[2]}, torch::kFloat32);
    feedscope::LoadContext ctx;  // the decoder and resize scratch are per thread inside load()
    const std::int64_t label = images_->load(
        index, std::span<std::byte>(static_cast<std::byte*>(x.data_ptr()), x.nbytes()), ctx);
    return {x, torch::tensor(label, torch::kInt64)};
  }
};

// Whole-image decode, then feedscope's transform: what region decode at a DCT scale buys.
class WholeDecodeTorchJpegFolder : public FolderDataset<WholeDecodeTorchJpegFolder> {
 public:
  using FolderDataset::FolderDataset;
  torch::data::Example<> get(std::size_t index) override {
    const std::vector<std::uint8_t> file = read_file(images_->path(index));
    thread_local feedscope::JpegDecoder decoder;
    thread_local feedscope::ResizeNormalize resize;
    thread_local std::vector<std::uint8_t> rgb;
    const feedscope::DecodedRegion d = decoder.decode(file, rgb);
    feedscope::SampleRng rng(sample_seed(), 0, index);
    const feedscope::CropBox box = feedscope::random_resized_crop_box(d.rect.width, d.rect.height, rng);
    resize.prepare(feedscope::resized_crop_geometry(box, 224));
    torch::Tensor x = torch::empty({3, 224, 224}, torch::kFloat32);
    resize.run(rgb.data(), static_cast<std::size_t>(d.rect.width) * 3, 0, 0, rng.bernoulli(0.5),
               feedscope::Normalization{}, x.data_ptr<float>());
    return {x, torch::tensor(images_->label(index), torch::kInt64)};
  }
};

// The straightforward libtorch dataset: whole-image decode, then torch ops.
class TypicalTorchJpegFolder : public FolderDataset<TypicalTorchJpegFolder> {
 public:
  using FolderDataset::FolderDataset;
  torch::data::Example<> get(std::size_t index) override {
    const std::vector<std::uint8_t> file = read_file(images_->path(index));
    thread_local feedscope::JpegDecoder decoder;  // libjpeg-turbo, the accurate DCT, as PIL
    thread_local std::vector<std::uint8_t> rgb;
    const feedscope::DecodedRegion d = decoder.decode(file, rgb);
    feedscope::SampleRng rng(sample_seed(), 0, index);
    const feedscope::CropBox box = feedscope::random_resized_crop_box(d.rect.width, d.rect.height, rng);
    namespace F = torch::nn::functional;
    torch::Tensor x = torch::from_blob(rgb.data(), {d.rect.height, d.rect.width, 3}, torch::kUInt8)
                          .slice(0, box.top, box.top + box.height)
                          .slice(1, box.left, box.left + box.width)
                          .permute({2, 0, 1})
                          .to(torch::kFloat32)
                          .unsqueeze(0);
    x = F::interpolate(x, F::InterpolateFuncOptions()
                              .size(std::vector<std::int64_t>{224, 224})
                              .mode(torch::kBilinear)
                              .align_corners(false)
                              .antialias(true))
            .squeeze(0);
    if (rng.bernoulli(0.5)) x = x.flip({2});
    static const torch::Tensor mean = torch::tensor({0.485f, 0.456f, 0.406f}).view({3, 1, 1}) * 255.0f;
    static const torch::Tensor std = torch::tensor({0.229f, 0.224f, 0.225f}).view({3, 1, 1}) * 255.0f;
    return {(x - mean) / std, torch::tensor(images_->label(index), torch::kInt64)};
  }
};

template <class TorchDataset>
double libtorch_rate(std::shared_ptr<const ImageFolderDataset> images, int workers, int batch,
                     int batches) {
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      TorchDataset(images).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(static_cast<std::size_t>(batch))
          .workers(static_cast<std::size_t>(workers)).drop_last(true));
  int done = 0;
  std::int64_t samples = 0;
  Clock::time_point start;
  while (done <= batches) {  // the first batch is warm-up
    for (auto& b : *loader) {
      if (done == 0) start = Clock::now();
      else samples += b.data.size(0);
      if (++done > batches) break;
    }
  }
  return static_cast<double>(samples) / std::chrono::duration<double>(Clock::now() - start).count();
}

double feedscope_rate(std::shared_ptr<const ImageFolderDataset> images, int workers, int batch,
                      int batches) {
  feedscope::LoaderOptions o;
  o.num_workers = workers;
  o.batch_size = batch;
  o.drop_last = true;
  feedscope::BatchLoader loader(images, std::make_shared<feedscope::RandomSampler>(images->size(), 0), o);
  int done = 0;
  std::int64_t samples = 0;
  Clock::time_point start;
  std::uint64_t epoch = 0;
  while (done <= batches) {
    std::optional<feedscope::Batch> b = loader.next();
    if (!b) {
      loader.begin_epoch(++epoch);
      continue;
    }
    if (done == 0) start = Clock::now();
    else samples += b->size;
    ++done;
  }
  return static_cast<double>(samples) / std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s IMAGE_FOLDER [batches=24] [batch=64] [repeats=3]\n", argv[0]);
    return 2;
  }
  const int batches = argc > 2 ? std::atoi(argv[2]) : 24;
  const int batch = argc > 3 ? std::atoi(argv[3]) : 64;
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 3;
  if (batches < 1 || batch < 1 || repeats < 1) {
    std::fprintf(stderr, "batches, batch and repeats must be positive integers\n");
    return 2;
  }
  ImageFolderDataset::Options o;
  o.root = argv[1];
  auto images = std::make_shared<const ImageFolderDataset>(o);
  torch::set_num_threads(1);  // the loaders' threads are the parallelism being compared
  std::printf("medians of %d alternating runs of %d batches of %d; each ratio is the median of its runs' ratios\n",
              repeats, batches, batch);
  std::printf("%7s %12s | %12s %7s | %14s %7s | %12s %7s\n", "workers", "feedscope/s",
              "same code/s", "ratio", "whole decode/s", "ratio", "typical/s", "ratio");
  for (const int workers : {0, 1, 2}) {
    std::vector<double> fs, same, whole, typical, same_ratio, whole_ratio, typical_ratio;
    for (int r = 0; r < repeats; ++r) {
      same.push_back(libtorch_rate<TorchJpegFolder>(images, workers, batch, batches));
      fs.push_back(feedscope_rate(images, workers, batch, batches));
      whole.push_back(libtorch_rate<WholeDecodeTorchJpegFolder>(images, workers, batch, batches));
      typical.push_back(libtorch_rate<TypicalTorchJpegFolder>(images, workers, batch, batches));
      same_ratio.push_back(fs.back() / same.back());
      whole_ratio.push_back(fs.back() / whole.back());
      typical_ratio.push_back(fs.back() / typical.back());
    }
    std::printf("%7d %12.1f | %12.1f %6.2fx | %14.1f %6.2fx | %12.1f %6.2fx\n", workers,
                median(fs), median(same), median(same_ratio), median(whole), median(whole_ratio),
                median(typical), median(typical_ratio));
    std::fflush(stdout);
  }
  return 0;
}
