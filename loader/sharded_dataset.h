#pragma once
// Datasets read front to back, shard by shard: webdataset:PATTERN (tar) and tfrecord:PATTERN
// (image_shard_dataset.h holds what the two share).
//
// Why streams and not indexes: a shard is read in large sequential chunks, which is what makes a
// storage-bound job fast, and a gzip-compressed shard cannot be read any other way. So the loader
// does what webdataset does under PyTorch's DataLoader (BatchLoader's stream mode): each epoch the
// shard list is shuffled by (seed, epoch), split over ranks (rank r takes shards r, r + world, ...),
// then over the loader's streams, one per worker (stream w takes every num_workers-th of those);
// each stream reads its shards in turn, passes the samples through a shuffle buffer, decodes and
// transforms them, and fills whole batches. Batches are delivered round-robin over the streams.
//
// What "every sample once per epoch" means here: over all ranks and workers every sample of every
// shard is delivered exactly once per epoch (no padding, unlike DistributedSampler, so ranks may
// get unequal counts), provided there are at least world_size x num_workers shards (a stream
// without one stays idle). The order is not a uniform permutation: shards are shuffled, and a
// sample moves at most about shuffle_buffer places within its stream.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "loader/dataset.h"

namespace feedscope {

// How a sharded dataset's epochs are split and shuffled.
struct ShardPlan {
  std::size_t rank = 0;
  std::size_t world_size = 1;
  bool shuffle = true;  // shard order per epoch and the sample shuffle buffer
  std::uint64_t seed = 0;
  std::size_t shuffle_buffer = 1000;  // samples held per stream; 0 or 1: shards' own order
};

// The shards stream `stream` of `streams` reads in `epoch` on plan.rank: all `shard_count` shards,
// permuted by (seed, epoch) when plan.shuffle, then every world_size-th from rank, then every
// streams-th of those from stream.
std::vector<std::size_t> stream_shards(std::size_t shard_count, const ShardPlan& plan,
                                       std::size_t stream, std::size_t streams, std::uint64_t epoch);

// One stream's samples for one epoch. Not thread-safe: one thread at a time (the loader runs a
// stream's batches one after another).
class SampleStream {
 public:
  virtual ~SampleStream() = default;
  // Writes the next sample into `out` (spec().bytes()) and returns its label; nullopt at the end.
  // Throws SampleError for a bad sample, naming its shard and member; the stream goes on after
  // it where the shard's framing allows.
  virtual std::optional<std::int64_t> next(std::span<std::byte> out, LoadContext& ctx) = 0;
};

class ShardedDataset : public DataSource {
 public:
  virtual std::size_t shard_count() const = 0;
  virtual const std::string& shard_path(std::size_t shard) const = 0;
  // A stream over `shards` (indexes into the shard list), in that order. Thread-safe.
  virtual std::unique_ptr<SampleStream> open_stream(std::vector<std::size_t> shards, const ShardPlan& plan,
                                                    std::size_t stream, std::uint64_t epoch) const = 0;
};

}  // namespace feedscope
