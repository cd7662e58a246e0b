#pragma once
// tfrecord:PATTERN — TFRecord files of tf.train.Example records with the ImageNet TFRecord fields
// (image/encoded: the image file's bytes; image/class/label: an int64), as TensorFlow's ImageNet
// build scripts write them. Read without TensorFlow: the framing (both masked CRC32Cs checked) and
// the protobuf by hand (detail/tf_example.h). Images are decoded and transformed as images:DIR
// samples are; shards are streamed as webdataset's (sharded_dataset.h).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loader/image_dataset_maker.h"
#include "loader/image_shard_dataset.h"

namespace feedscope {

inline constexpr const char* kTfImageKey = "image/encoded";
inline constexpr const char* kTfLabelKey = "image/class/label";

// Thread-safe (each loader stream opens its own reader).
class TfRecordDataset final : public ImageShardDataset {
 public:
  // Lists the shards: every regular file, not hidden, in a directory (ImageNet's are named
  // train-00000-of-01024, without an extension), or the files the pattern names. gzip-compressed
  // files are inflated. Throws DatasetError naming the pattern when it matches nothing, the path
  // for a named file that does not exist.
  explicit TfRecordDataset(Options options);

 protected:
  std::unique_ptr<ShardReader> open_reader(std::vector<std::size_t> shards) const override;
};

// `feedscope make-dataset tfrecord`: the JPEGs of make_image_dataset (image i, label i % classes)
// as Examples with image/encoded, image/class/label and image/format, shard_samples per file, in
// out/train-%05d-of-%05d, written in parallel. Throws as make_webdataset does.
ShardDatasetSummary make_tfrecord_dataset(const ShardDatasetOptions& options);

}  // namespace feedscope
