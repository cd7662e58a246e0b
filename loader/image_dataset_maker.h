#pragma once
// Generates an ImageFolder dataset of JPEG files that compress like photographs (smooth shading,
// shapes with edges, sensor-like noise) rather than flat colours, so decode cost is realistic.
#include <cstdint>
#include <span>
#include <string>
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
};

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

// The RGB pixels of image `index` of class `label` (width * height * 3 bytes).
std::vector<std::uint8_t> synthetic_photo(int width, int height, int label, int classes,
                                          std::uint64_t seed, std::uint64_t index);

}  // namespace feedscope
