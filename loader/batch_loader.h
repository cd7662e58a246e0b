#pragma once
// The multithreaded batch loader. Workers (a oneTBB arena) collate samples straight into slabs
// from a pool sized once at construction; batches come back in order by default.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/autotune.h"
#include "loader/dataset.h"
#include "loader/index_sampler.h"
#include "loader/sample_costs.h"
#include "loader/sharded_dataset.h"
#include "loader/span_recorder.h"
#include "pinned_memory/pinned_pool.h"

namespace feedscope {

// What a worker does with a sample whose load() throws.
enum class BadSamplePolicy : std::uint8_t {
  fail,  // the batch's SampleError reaches next()
  skip,  // leave the sample out of its batch, count it, go on (up to max_bad_ratio)
};

struct LoaderOptions {
  int num_workers = 2;  // 0 = load in the calling (training) thread; kAuto: tuned while running
  int batch_size = 64;
  int prefetch = 2;  // batches in flight per worker; kAuto: tuned while running
  // kAuto's bounds (the cores, the RAM budget) and room for set_setting() to move a fixed setting.
  AutoTuneOptions autotune;
  bool pin_memory = false;
  bool drop_last = false;
  bool in_order = true;  // false: deliver batches as they finish
  // Once every batch of an epoch is scheduled, idle workers start on the next epoch's first
  // batches instead of waiting for begin_epoch(). Off by default, as in PyTorch: with it on, the
  // next epoch's first samples are read before the code between epochs runs (a dataset changed
  // there is seen only from later batches).
  bool prefetch_next_epoch = false;
  int spare_slabs = 2;   // slabs beyond the in-flight ones: the batch in use and the one copying
  // Slabs the pool may add, one at a time, when the caller holds more than spare_slabs batches
  // alive (a loop that keeps the last N): the workers keep their prefetch, and no held batch is
  // ever written over. 0: the pool stays as sized; a caller holding every slab makes next() throw.
  int max_extra_slabs = 0;
  BadSamplePolicy bad_sample = BadSamplePolicy::fail;
  // skip: next() throws BadDataError once bad > max_bad_ratio x max(attempted, bad_ratio_floor).
  // The floor is a grace budget: before `bad_ratio_floor` samples were attempted, the ratio of so
  // few would be noise (one bad file first would be a ratio of 1), so up to
  // max_bad_ratio x bad_ratio_floor bad samples pass; after it, the true ratio decides.
  double max_bad_ratio = 0.01;
  std::size_t bad_ratio_floor = 1000;
  std::size_t error_examples = 10;  // bad samples whose index, file and message are kept
  // Each sample's load time into sample_costs() (two clock reads a sample); off: none recorded,
  // for the benchmark that measures what recording costs.
  bool record_sample_costs = true;
};

// One sample that failed to load.
struct BadSample {
  std::size_t index = 0;
  std::string source;   // the file (and record) it came from
  std::string message;  // the full SampleError text
};

// Counts of bad samples and the first few of them, over the loader's life (all epochs).
struct DataErrors {
  std::uint64_t bad = 0;
  std::uint64_t attempted = 0;  // samples whose load was tried, bad ones included
  std::vector<BadSample> examples;  // the first bad samples, one per sample (index and source)
  double ratio() const noexcept {
    return attempted ? static_cast<double>(bad) / static_cast<double>(attempted) : 0.0;
  }
};

// Thread-safe: written by the loader's consumer thread, read from any thread (a report, a
// metrics endpoint). Counted when a batch is delivered, so the counts are reproducible.
class DataErrorLog {
 public:
  explicit DataErrorLog(std::size_t max_examples) : max_examples_(max_examples) {}
  void add(std::uint64_t attempted, std::vector<BadSample>& bad);
  DataErrors snapshot() const;

 private:
  const std::size_t max_examples_;
  mutable std::mutex mutex_;
  DataErrors errors_;
};

// More bad samples than LoaderOptions::max_bad_ratio tolerates under the skip policy. The
// message gives the counts and names the first bad sample's file.
class BadDataError : public std::runtime_error {
 public:
  BadDataError(const std::string& what, DataErrors errors)
      : std::runtime_error(what), errors_(std::move(errors)) {}
  const DataErrors& errors() const noexcept { return errors_; }

 private:
  DataErrors errors_;
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

// The slab pool a BatchLoader allocates, computable before one exists (sweep and tune bound
// memory with it). A slab holds one batch: the samples, then the labels from a 64-byte boundary.
std::size_t slab_labels_offset(std::size_t sample_bytes, int batch_size);
std::size_t slab_bytes(std::size_t sample_bytes, int batch_size);  // before the pool's page rounding
// Batches in flight on the workers (num_workers x prefetch, at least 1) plus the spare slabs: the
// pool's size at start, before any growth (max_extra_slabs), for numbers; a loader with kAuto or
// autotune.max_workers sizes its pool for capacity().most.
int slab_count(const LoaderOptions& options);

// Loader misuse or an unrecoverable loader state (e.g. every slab held by the caller).
class LoaderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Not thread-safe: one consumer thread calls begin_epoch()/next() and the setting's methods.
// Workers are internal. Under kAuto, next() times the training thread's waits and, window by
// window, lets an AutoTuner (loader/autotune.h) move the worker count and prefetch depth.
// Two modes. Index mode (a Dataset and an IndexSampler): each batch is a run of the sampler's
// indexes, loaded by whichever worker is free. Stream mode (a ShardedDataset and a ShardPlan):
// one stream per worker (one at 0 workers), each reading its shards front to back and filling its
// own batches in turn, at most `prefetch` of them in flight; batches are delivered round-robin
// over the streams, as PyTorch's DataLoader does with an IterableDataset, and with drop_last a
// stream's last partial batch is dropped. A stream's batches never run on two threads at once, so
// its reads stay sequential. In stream mode in_order and prefetch_next_epoch have no effect.
// Construction throws std::invalid_argument for bad options and DeviceError when pinned memory
// is asked for without a device. Destruction stops and joins every worker and frees every slab
// not held by a live Batch.
class BatchLoader {
 public:
  BatchLoader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const IndexSampler> sampler,
              LoaderOptions options, SpanRegistry* spans = nullptr);
  // Stream mode. Throws std::invalid_argument for bad options or a plan whose rank is not below
  // its world size.
  BatchLoader(std::shared_ptr<const ShardedDataset> dataset, ShardPlan plan, LoaderOptions options,
              SpanRegistry* spans = nullptr);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Starts an epoch; abandons what is left of the previous one. Workers persist across epochs.
  // With prefetch_next_epoch, begin_epoch(epoch + 1) keeps what the workers started of it, and
  // any other epoch drops it.
  void begin_epoch(std::uint64_t epoch);
  // The next batch of the current epoch, or nullopt at its end. Under the fail policy, rethrows
  // a worker's SampleError; under skip, a batch may hold fewer samples (bad ones left out; a
  // batch left empty is not delivered, so Batch::index may jump) and next() throws BadDataError
  // once the bad ratio is over its bound.
  std::optional<Batch> next();
  // next() without the wait: the next batch if it is collated already, else nullopt at once (also
  // at the epoch's end, which next() tells apart). At num_workers 0 the load would be the caller's
  // own, so it is always nullopt. Throws what next() throws for the batch it takes.
  std::optional<Batch> try_next();

  // Index mode; 0 in stream mode, where an epoch's size is known only once it is read.
  std::size_t batches_per_epoch() const;
  // Empty while the current epoch has a batch; otherwise why it has none, for an error message:
  // the dataset's size, the sampler's share of it where that differs, batch_size, and drop_last
  // where it is on and is what drops the samples. In stream mode: a rank without a shard.
  std::string empty_epoch_reason() const;
  // The worker count and prefetch it runs at now: the tuner's under kAuto.
  LoaderSetting setting() const;
  // Where the setting started and how far it may move (arena and pool are sized for `most`).
  const LoaderCapacity& capacity() const;
  // Moves the worker count and prefetch depth of a running loader, within capacity().most. Batches
  // keep the order and content they have at any setting (index mode: every batch is its samples,
  // loaded where they load). Fewer workers take effect as running loads finish. In stream mode the
  // worker count is the stream count, which shapes the order: a new one applies from the next
  // begin_epoch(). Throws std::invalid_argument out of bounds, LoaderError under kAuto (the tuner
  // owns the setting there).
  void set_setting(LoaderSetting setting);
  // kAuto: the tuner's moves so far, each with what it measured (empty without kAuto).
  const std::vector<TunerMove>& autotune_moves() const;
  bool autotuned() const;
  // kAuto: when the tuner started (autotune.clock's time), from which the moves' t_s count.
  std::int64_t autotune_start_ns() const;
  int batches_in_flight() const;  // scheduled on workers, not finished
  int batches_ready() const;      // finished, waiting for next()
  const LoaderOptions& options() const;
  const DataSource& dataset() const;
  const PinnedPool& pool() const;
  // The pool itself, for whoever must watch it after the loader is gone.
  std::shared_ptr<const PinnedPool> shared_pool() const;
  // Bad samples so far; thread-safe.
  DataErrors data_errors() const;
  // Every sample's load time so far (all epochs), the slowest named by their file (index mode;
  // a stream's samples are counted but not named), and the consumer's waits: thread-safe.
  // `name_files` false: the slowest by index only (SampleFile empty), for a caller that names them.
  SampleCostSnapshot sample_costs(bool name_files = true) const;
  // Byte offset of the labels within a slab.
  std::size_t labels_offset() const;

 private:
  void start(LoaderOptions options, SpanRegistry* spans);
  std::optional<Batch> next_batch(bool wait);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace feedscope
