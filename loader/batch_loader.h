#pragma once
// The multithreaded batch loader. Workers (a oneTBB arena) collate samples straight into slabs
// from a pool sized once at construction; batches come back in order by default.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>

#include "loader/dataset.h"
#include "loader/index_sampler.h"
#include "loader/span_recorder.h"
#include "pinned_memory/pinned_pool.h"

namespace feedscope {

struct LoaderOptions {
  int num_workers = 2;  // 0 = load in the calling (training) thread
  int batch_size = 64;
  int prefetch = 2;  // batches in flight per worker
  bool pin_memory = false;
  bool drop_last = false;
  bool in_order = true;  // false: deliver batches as they finish
  int spare_slabs = 2;   // slabs beyond the in-flight ones: the batch in use and the one copying
};

// One batch: `size` samples of the dataset's SampleSpec, contiguous in `data`, then `size` int64
// labels. Owns its slab; the slab returns to the pool when the Batch (or whatever took over
// its slab) is destroyed.
struct Batch {
  std::int64_t index = -1;  // position within the epoch
  std::uint64_t epoch = 0;
  std::int64_t size = 0;
  std::byte* data = nullptr;
  std::int64_t* labels = nullptr;
  Slab slab;
};

// Loader misuse or an unrecoverable loader state (e.g. every slab held by the caller).
class LoaderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Not thread-safe: one consumer thread calls begin_epoch()/next(). Workers are internal.
// Construction throws std::invalid_argument for bad options and DeviceError when pinned memory
// is asked for without a device. Destruction stops and joins every worker and frees every slab
// not held by a live Batch.
class BatchLoader {
 public:
  BatchLoader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const IndexSampler> sampler,
              LoaderOptions options, SpanRegistry* spans = nullptr);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Starts an epoch; abandons what is left of the previous one. Workers persist across epochs.
  void begin_epoch(std::uint64_t epoch);
  // The next batch of the current epoch, or nullopt at its end. Rethrows a worker's SampleError.
  std::optional<Batch> next();

  std::size_t batches_per_epoch() const;
  int batches_in_flight() const;  // scheduled on workers, not finished
  int batches_ready() const;      // finished, waiting for next()
  const LoaderOptions& options() const;
  const Dataset& dataset() const;
  const PinnedPool& pool() const;
  // Byte offset of the labels within a slab.
  std::size_t labels_offset() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace feedscope
