#pragma once
// `images:DIR`: image files in torchvision's ImageFolder layout, listed as ImageFolder lists them and
// loaded with torchvision's ImageNet transforms, each sample decoded and transformed straight into
// the batch slab.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "loader/dataset.h"
#include "loader/image_transforms.h"

namespace feedscope {

// Thread-safe: load() may run on many threads at once; each thread keeps its own decoder and
// buffers. Listing happens once, in the constructor.
class ImageFolderDataset final : public Dataset {
 public:
  struct Options {
    std::string root;
    bool train = true;  // RandomResizedCrop + RandomHorizontalFlip; else Resize + CenterCrop
    int size = 224;     // output side; eval resizes the shorter side to size * 256 / 224 first
    std::uint64_t seed = 0;
    RandomResizedCropOptions crop;
    double flip_probability = 0.5;
    Normalization normalization;
    // JPEG only: decode at 1/2, 1/4 or 1/8 scale in the DCT domain where the crop allows it
    // (choose_jpeg_scale). Off: every JPEG at full size, as PIL decodes it.
    bool reduced_decode = true;
  };
  // Lists the folder as torchvision 0.14's ImageFolder does: classes are the entries that are
  // directories or symlinks to one (hidden ones too), sorted bytewise like Python's sorted(),
  // label = position; under each, os.walk(followlinks=True) in sorted order, every non-directory
  // whose name ends in one of kImageExtensions (any case; hidden, empty and broken ones too: they
  // fail when loaded, as in torchvision). Symlinks are followed wherever they lead. One departure:
  // a symlink back to a folder it sits in (a loop) is not entered, where os.walk would go round
  // until the path is too long; loops() counts them. Throws DatasetError naming the path for a
  // missing folder, no classes, or a class without image files (torchvision's FileNotFoundError).
  explicit ImageFolderDataset(Options options);
  ~ImageFolderDataset() override;

  std::size_t size() const override { return paths_.size(); }
  const SampleSpec& spec() const override { return spec_; }
  std::int64_t num_classes() const override { return static_cast<std::int64_t>(classes_.size()); }
  // Throws SampleError naming the file for an unreadable, truncated or corrupt image, or a file
  // that is not one (the format is sniffed from the bytes, never taken from the name).
  std::int64_t load(std::size_t index, std::span<std::byte> out, LoadContext& ctx) const override;
  std::string describe(std::size_t index) const override;
  SampleFile sample_file(std::size_t index) const override;
  std::string name() const override;

  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& path(std::size_t index) const { return paths_.at(index); }
  // Every image file; a file that vanished since the listing is skipped (its load will say so).
  std::uint64_t evict_page_cache() const override;
  std::int64_t label(std::size_t index) const { return labels_.at(index); }
  // Files passed over while listing: names without an image extension (torchvision skips them too).
  std::size_t skipped() const { return skipped_; }
  // Symlink loops not entered, each named by the link's path.
  const std::vector<std::string>& loops() const { return loops_; }

 private:
  struct Workers;
  void list();
  Options options_;
  SampleSpec spec_;
  std::vector<std::string> classes_;
  std::vector<std::string> paths_;
  std::vector<std::int32_t> labels_;
  std::size_t skipped_ = 0;
  std::vector<std::string> loops_;
  std::unique_ptr<Workers> workers_;
};

}  // namespace feedscope
