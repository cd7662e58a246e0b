// images:DIR costs per sample, stage by stage, single-threaded, on generated 500x375 quality-90
// JPEGs (ImageNet-like), plus the whole BatchLoader at 1 and 2 workers. Set FEEDSCOPE_BENCH_IMAGES
// to a make-dataset folder to use it instead of a fresh one. Compare ratios: the machine is noisy.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "loader/batch_loader.h"
#include "loader/image_dataset_maker.h"
#include "loader/image_folder_dataset.h"
#include "loader/index_sampler.h"
#include "loader/jpeg_decoder.h"

namespace {

using namespace feedscope;

struct Fixture {
  std::filesystem::path dir;
  bool owned = false;
  std::shared_ptr<ImageFolderDataset> train, eval;
  std::vector<std::vector<std::uint8_t>> files;

  Fixture() {
    if (const char* env = std::getenv("FEEDSCOPE_BENCH_IMAGES")) {
      dir = env;
    } else {
      dir = std::filesystem::temp_directory_path() / ("feedscope-image-bench-" + std::to_string(::getpid()));
      ImageDatasetOptions o;
      o.out = dir.string();
      o.count = 128;
      make_image_dataset(o);
      owned = true;
    }
    ImageFolderDataset::Options o;
    o.root = dir.string();
    train = std::make_shared<ImageFolderDataset>(o);
    o.train = false;
    eval = std::make_shared<ImageFolderDataset>(o);
    for (std::size_t i = 0; i < std::min<std::size_t>(train->size(), 64); ++i) {
      std::ifstream in(train->path(i), std::ios::binary);
      files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  ~Fixture() {
    if (owned) std::filesystem::remove_all(dir);
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void BM_DecodeFull(benchmark::State& state) {
  auto& f = fixture();
  JpegDecoder decoder;
  std::vector<std::uint8_t> rgb;
  std::size_t i = 0;
  for (auto _ : state) {
    decoder.decode(f.files[i++ % f.files.size()], rgb);
    benchmark::DoNotOptimize(rgb.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeFull)->UseRealTime();

// The entropy-decoding floor: only the image's last row is asked for, so libjpeg-turbo
// Huffman-decodes every row above it (jpeg_skip_scanlines cannot skip that part of a sequential
// JPEG without restart markers) and inverse-transforms almost nothing. A train crop's region
// decode pays this for the rows down to the crop's last, whatever else it saves.
void BM_DecodeLastRowOnly(benchmark::State& state) {
  auto& f = fixture();
  JpegDecoder decoder;
  std::vector<std::uint8_t> rgb;
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& file = f.files[i++ % f.files.size()];
    const JpegHeader h = decoder.read_header(file);
    decoder.decode_region(file, 8, PixelRect{0, h.height - 1, h.width, 1}, rgb);
    benchmark::DoNotOptimize(rgb.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeLastRowOnly)->UseRealTime();

// The whole image at scale M/8: libjpeg-turbo has SIMD inverse DCTs for 8/8, 4/8, 2/8 and 1/8
// only; other scales run plain C.
void BM_DecodeScaled(benchmark::State& state) {
  auto& f = fixture();
  JpegDecoder decoder;
  std::vector<std::uint8_t> rgb;
  const int m = static_cast<int>(state.range(0));
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& file = f.files[i++ % f.files.size()];
    const JpegHeader h = decoder.read_header(file);
    decoder.decode_region(file, m, PixelRect{0, 0, JpegDecoder::scaled_size(h.width, m),
                                             JpegDecoder::scaled_size(h.height, m)}, rgb);
    benchmark::DoNotOptimize(rgb.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeScaled)->DenseRange(1, 8);

// Resize + flip + normalize alone: a 375x300 crop (a typical RandomResizedCrop) to 224x224.
void BM_TransformCrop(benchmark::State& state) {
  std::vector<std::uint8_t> rgb(500 * 375 * 3);
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<std::uint8_t>(i * 7);
  ResizeNormalize resize;
  std::vector<float> out(3 * 224 * 224);
  const ResizeGeometry g = resized_crop_geometry(CropBox{30, 60, 300, 375}, 224);
  for (auto _ : state) {
    resize.prepare(g);
    resize.run(rgb.data(), 500 * 3, 0, 0, true, Normalization{}, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TransformCrop);

// One sample end to end in one thread: read, header, crop plan, region decode, resize+normalize.
void load(benchmark::State& state, const ImageFolderDataset& d) {
  std::vector<float> out(static_cast<std::size_t>(d.spec().elements()));
  LoadContext ctx;
  std::size_t i = 0;
  for (auto _ : state) {
    ctx.epoch = i / d.size();
    d.load(i++ % d.size(), std::as_writable_bytes(std::span(out)), ctx);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
void BM_LoadTrain(benchmark::State& state) { load(state, *fixture().train); }
void BM_LoadEval(benchmark::State& state) { load(state, *fixture().eval); }
BENCHMARK(BM_LoadTrain)->UseRealTime();
BENCHMARK(BM_LoadEval)->UseRealTime();

// Stage split of the train load, from the span recorder.
void BM_LoadTrainStages(benchmark::State& state) {
  auto& d = *fixture().train;
  SpanRegistry spans;
  std::vector<float> out(static_cast<std::size_t>(d.spec().elements()));
  LoadContext ctx;
  ctx.spans = &spans;
  std::size_t i = 0;
  for (auto _ : state) {
    ctx.epoch = i / d.size();
    d.load(i++ % d.size(), std::as_writable_bytes(std::span(out)), ctx);
  }
  spans.collect();
  double ns[8] = {};
  for (const Span& s : spans.spans()) ns[static_cast<int>(s.stage)] += static_cast<double>(s.end_ns - s.begin_ns);
  const double n = static_cast<double>(state.iterations());
  state.counters["read_us"] = ns[static_cast<int>(Stage::read)] / n / 1e3;
  state.counters["decode_us"] = ns[static_cast<int>(Stage::decode)] / n / 1e3;
  state.counters["transform_us"] = ns[static_cast<int>(Stage::transform)] / n / 1e3;
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LoadTrainStages)->UseRealTime();

// The whole loader: batches of 64 at state.range(0) workers.
void BM_BatchLoaderTrain(benchmark::State& state) {
  auto d = fixture().train;
  LoaderOptions o;
  o.num_workers = static_cast<int>(state.range(0));
  o.batch_size = 64;
  BatchLoader loader(d, std::make_shared<SequentialSampler>(d->size()), o);
  std::uint64_t epoch = 0;
  std::int64_t samples = 0;
  for (auto _ : state) {
    auto batch = loader.next();
    if (!batch) {
      loader.begin_epoch(++epoch);
      batch = loader.next();
    }
    samples += batch->size;
  }
  state.SetItemsProcessed(samples);
}
BENCHMARK(BM_BatchLoaderTrain)->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
