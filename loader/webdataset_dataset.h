#pragma once
// webdataset:PATTERN — tar shards as the webdataset library writes and reads them (the Hugging
// Face hub, DALI and timm read them too). A sample is a run of consecutive members that share a
// key, webdataset's rule: the member's path up to the first dot of its file name; the rest of the
// name, lower-cased, is the member's extension. Its image is the .jpg, .jpeg, .png or .webp
// member, decoded and transformed as images:DIR samples are; its label the member named by the
// label key (default .cls), an integer in text. Members whose file name has no dot, or starts with
// one, belong to no sample (webdataset skips them too); other extensions are read past.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loader/image_dataset_maker.h"
#include "loader/image_shard_dataset.h"

namespace feedscope {

// Thread-safe (streams are opened per loader stream; each is read by one thread at a time).
class WebDataset final : public ImageShardDataset {
 public:
  struct Options : ImageShardDataset::Options {
    std::string label_key = "cls";  // the label member's extension
  };
  // Lists the shards (`.tar`, `.tar.gz`, `.tgz`; see detail/shard_pattern.h). Throws DatasetError
  // naming the pattern when it matches nothing, the path for a named shard that does not exist,
  // the value for a bad label key or output size. Shards are opened when an epoch reads them.
  explicit WebDataset(Options options);

 protected:
  std::unique_ptr<ShardReader> open_reader(std::vector<std::size_t> shards) const override;

 private:
  std::string label_key_;
};

// webdataset's split of a member name into key and extension: false when the name belongs to no
// sample (no dot in the file name, or a leading one).
bool webdataset_key(const std::string& name, std::string& key, std::string& extension);

// `feedscope make-dataset webdataset`: the JPEGs of make_image_dataset (the same bytes for the same
// options; image i in class i % classes) as samples "%08d.jpg" + "%08d.cls", shard_samples per
// shard, in out/shard-%06d.tar, written in parallel. Throws DatasetError naming the option for a
// bad value (as validate(), and shard_samples), std::runtime_error naming the file on I/O errors.
ShardDatasetSummary make_webdataset(const ShardDatasetOptions& options);

}  // namespace feedscope
