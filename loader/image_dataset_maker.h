#pragma once
// Generates an ImageFolder dataset of JPEG files that compress like photographs (smooth shading,
// shapes with edges, sensor-like noise) rather than flat colours, so decode cost is realistic.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace feedscope {

struct ImageDatasetOptions {
  std::string out;  // created; must not exist or be empty
  std::int64_t count = 0;
  int width = 500;  // ImageNet's most common size
  int height = 375;
  int classes = 10;
  int quality = 90;
  std::uint64_t seed = 0;
  // A share of the images at another size (make-dataset images --skew SHARE:WxH): real folders
  // hold a few huge photos among ordinary ones. Image i is one of them where floor((i + 1) x share)
  // passes floor(i x share), so they are spread evenly and the same at any count. 0: none.
  double skew_share = 0;
  int skew_width = 0;
  int skew_height = 0;
};

// The size of image `index`: the skew's for the share --skew names, else width x height.
std::pair<int, int> image_size_of(const ImageDatasetOptions& options, std::int64_t index);

struct ImageDatasetSummary {
  std::int64_t files = 0;
  std::uint64_t bytes = 0;
  std::vector<std::string> classes;  // folder names, in label order
};

// Throws DatasetError naming the option ("count", "size", "classes", "quality", "out") and the
// allowed values.
void validate(const ImageDatasetOptions& options);

// Writes out/<class>/<image>.jpg for images 0..count-1, image i in class i % classes, in parallel.
// The same options give byte-identical files (with the same build of this library and libm). Throws DatasetError for bad options and
// std::runtime_error naming the file for I/O failures.
ImageDatasetSummary make_image_dataset(const ImageDatasetOptions& options);

// What every make-dataset kind shares (images, webdataset, tfrecord):
// validate(options), then makes options.out, which must be new or an empty directory.
void prepare_dataset_dir(const ImageDatasetOptions& options);
// The JPEG file of image `index` (class index % classes), as make_image_dataset writes it.
std::vector<std::uint8_t> synthetic_jpeg(const ImageDatasetOptions& options, std::int64_t index);
// make-dataset of a shard format (webdataset, tfrecord): the images and how many per shard.
struct ShardDatasetOptions {
  ImageDatasetOptions images;  // out, count, size, classes, quality, seed: as make-dataset images
  std::int64_t shard_samples = 1000;
};
struct ShardDatasetSummary {
  std::int64_t samples = 0;
  std::int64_t shards = 0;
  std::uint64_t bytes = 0;  // the shard files
};
// What the shard writers share: checks shard_samples (DatasetError naming it), then
// prepare_dataset_dir(images); then, on one thread per core, write_shard(shard, shards, first,
// end) for every shard, which writes images [first, end) into shard `shard` of `shards` under
// images.out and returns the bytes it wrote. The summary counts them.
using ShardWriter = std::function<std::uint64_t(std::int64_t shard, std::int64_t shards,
                                                std::int64_t first, std::int64_t end)>;
ShardDatasetSummary write_shards(const ShardDatasetOptions& options, const ShardWriter& write_shard);
// Runs work(i) for every i in [0, n) on one thread per core, each thread taking the next number.
// The first exception stops the others after their current item and is rethrown here.
void for_each_in_parallel(std::int64_t n, const std::function<void(std::int64_t)>& work);

// The RGB pixels of image `index` of class `label` (width * height * 3 bytes).
std::vector<std::uint8_t> synthetic_photo(int width, int height, int label, int classes,
                                          std::uint64_t seed, std::uint64_t index);

}  // namespace feedscope
