// libtorch's torch::data::DataLoader against feedscope's BatchLoader, side by side in one run, on
// the same ImageFolder with the same per-sample work: both call feedscope's libjpeg-turbo decode
// and torchvision-semantics transform (ImageFolderDataset::load). What differs is the loader:
// libtorch's makes a tensor per sample and stacks each batch (an allocation and a copy per
// sample); feedscope's writes every sample straight into a preallocated batch slab.
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
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loader/batch_loader.h"
#include "loader/image_folder_dataset.h"

namespace {

using feedscope::ImageFolderDataset;
using Clock = std::chrono::steady_clock;

// The torch::data face of the same dataset: get() decodes and transforms into a fresh tensor.
class TorchJpegFolder : public torch::data::datasets::Dataset<TorchJpegFolder> {
 public:
  explicit TorchJpegFolder(std::shared_ptr<const ImageFolderDataset> images)
      : images_(std::move(images)) {}
  torch::data::Example<> get(std::size_t index) override {
    const auto& shape = images_->spec().shape;
    torch::Tensor x = torch::empty({shape[0], shape[1], shape[2]}, torch::kFloat32);
    feedscope::LoadContext ctx;  // the decoder and resize scratch are per thread inside load()
    const std::int64_t label = images_->load(
        index, std::span<std::byte>(static_cast<std::byte*>(x.data_ptr()), x.nbytes()), ctx);
    return {x, torch::tensor(label, torch::kInt64)};
  }
  torch::optional<std::size_t> size() const override { return images_->size(); }

 private:
  std::shared_ptr<const ImageFolderDataset> images_;
};

double libtorch_rate(std::shared_ptr<const ImageFolderDataset> images, int workers, int batch,
                     int batches) {
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      TorchJpegFolder(images).map(torch::data::transforms::Stack<>()),
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
  std::printf("%7s %14s %12s %7s   (medians of %d alternating pairs, %d batches of %d each)\n", "workers",
              "libtorch/s", "feedscope/s", "ratio", repeats, batches, batch);
  for (const int workers : {0, 1, 2}) {
    std::vector<double> lt, fs, ratio;
    for (int r = 0; r < repeats; ++r) {
      lt.push_back(libtorch_rate(images, workers, batch, batches));
      fs.push_back(feedscope_rate(images, workers, batch, batches));
      ratio.push_back(fs.back() / lt.back());
    }
    std::printf("%7d %14.1f %12.1f %6.2fx\n", workers, median(lt), median(fs), median(ratio));
    std::fflush(stdout);
  }
  return 0;
}
