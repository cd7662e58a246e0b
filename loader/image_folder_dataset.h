#pragma once
// `images:DIR`: JPEG files in torchvision's ImageFolder layout, loaded with torchvision's ImageNet
// transforms, each sample decoded and transformed straight into the batch slab.
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
  };
  // Lists the folder: classes are the subfolders sorted by name (bytewise, like Python's
  // sorted()), label = position; files ending .jpg/.jpeg (any case) under each, walked as
  // os.walk(followlinks=True) in sorted order, except that a symlink leading outside the root is
  // not followed and a folder is entered once (a symlink loop ends). Throws DatasetError naming
  // the path for a missing folder, no classes, or a class without files.
  explicit ImageFolderDataset(Options options);
  ~ImageFolderDataset() override;

  std::size_t size() const override { return paths_.size(); }
  const SampleSpec& spec() const override { return spec_; }
  std::int64_t num_classes() const override { return static_cast<std::int64_t>(classes_.size()); }
  // Throws SampleError naming the file for an unreadable, truncated or corrupt JPEG.
  std::int64_t load(std::size_t index, std::span<std::byte> out, LoadContext& ctx) const override;
  std::string describe(std::size_t index) const override;
  std::string name() const override;

  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& path(std::size_t index) const { return paths_.at(index); }
  // Every image file; a file that vanished since the listing is skipped (its load will say so).
  std::uint64_t evict_page_cache() const override;
  std::int64_t label(std::size_t index) const { return labels_.at(index); }
  // Entries passed over while listing: files without a JPEG extension, symlinks leaving the
  // root, folders already visited.
  std::size_t skipped() const { return skipped_; }

 private:
  struct Workers;
  void list(const std::filesystem::path& canonical_root);
  Options options_;
  SampleSpec spec_;
  std::vector<std::string> classes_;
  std::vector<std::string> paths_;
  std::vector<std::int32_t> labels_;
  std::size_t skipped_ = 0;
  std::unique_ptr<Workers> workers_;
};

}  // namespace feedscope
