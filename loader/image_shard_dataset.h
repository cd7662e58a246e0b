#pragma once
// What webdataset:PATTERN and tfrecord:PATTERN share: encoded images with integer labels read
// from shards in order, held in a seeded shuffle buffer, and decoded and transformed by the code of
// images:DIR (detail/image_sample.h). Each format supplies only its ShardReader.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loader/image_folder_dataset.h"
#include "loader/sharded_dataset.h"

namespace feedscope {

// One encoded sample as a shard holds it. Its buffers keep their capacity from sample to sample.
struct EncodedSample {
  std::vector<std::uint8_t> image;  // the image file's bytes
  std::int64_t label = 0;
  std::size_t shard = 0;
  std::uint64_t ordinal = 0;  // its position within the shard
  std::string source;         // "SHARD member NAME" / "SHARD record N", for messages
};

// Reads one format's samples from a list of shards, in order. Not thread-safe.
class ShardReader {
 public:
  virtual ~ShardReader() = default;
  // Fills `out` with the next sample; false after the last shard. Throws SampleError for a sample
  // that cannot be read (the reader goes on past it where the framing allows, else with the next
  // shard). Records the read span.
  virtual bool next(EncodedSample& out, LoadContext& ctx) = 0;
};

// A sharded dataset of encoded images with integer labels: decoded and transformed by the code of
// images:DIR (both pipelines). Thread-safe.
class ImageShardDataset : public ShardedDataset {
 public:
  struct Options {
    std::string pattern;
    ImageFolderDataset::Options image;  // its root is unused
    std::int64_t classes = 1000;        // a label outside 0..classes-1 is a bad sample
  };
  explicit ImageShardDataset(std::string kind, Options options, std::vector<std::string> shards);

  const SampleSpec& spec() const override { return spec_; }
  std::int64_t num_classes() const override { return options_.classes; }
  std::string name() const override { return kind_ + ":" + options_.pattern; }
  std::uint64_t evict_page_cache() const override;  // every shard file
  std::size_t shard_count() const override { return shards_.size(); }
  const std::string& shard_path(std::size_t shard) const override { return shards_.at(shard); }
  std::unique_ptr<SampleStream> open_stream(std::vector<std::size_t> shards, const ShardPlan& plan,
                                            std::size_t stream, std::uint64_t epoch) const override;

 protected:
  virtual std::unique_ptr<ShardReader> open_reader(std::vector<std::size_t> shards) const = 0;
  const Options& options() const { return options_; }

 private:
  std::string kind_;
  Options options_;
  SampleSpec spec_;
  std::vector<std::string> shards_;
};

}  // namespace feedscope
