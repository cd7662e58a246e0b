#pragma once
// feedscope::Loader: feedscope's multithreaded batch loader for a libtorch loop, in place of
// torch::data's DataLoader. Link feedscope::loader (find_package(feedscope), after
// find_package(Torch)).
//
//   feedscope::Loader loader({.dataset = "images:/data/train", .batch_size = 64, .num_workers = 4,
//                             .shuffle = true, .device = "cuda"});
//   for (auto& batch : loader) {           // one epoch: float32 [64, 3, 224, 224], int64 [64]
//     auto loss = loss_fn(model->forward(batch.data), batch.target);
//     ...
//   }
//
// Worker threads read, decode, transform and collate straight into pinned slabs; on a GPU each
// batch's copy runs on a stream of its own, one batch ahead of the step, and is ordered before the
// stream the batches are taken on (Options::stream) with an event, never a host sync. A
// batch's tensors view its slab (or device buffer) without a copy: it returns to the loader when
// the last of them is freed, so clone() what must outlive the next few batches.
//
// Your own torch dataset (a torch::data::datasets::Dataset whose get() returns Example<>, data of
// one shape, float32 or uint8, and one integer label) is loaded the same way, get() called from
// the worker threads at once:
//
//   feedscope::Loader loader(MyDataset(root), {.batch_size = 64, .num_workers = 4});
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <torch/data/example.h>
#include <torch/types.h>

#include <feedscope/version.h>

namespace feedscope {

class Session;

// One sample of a torch dataset, as the loader asks for it: get() is called from many worker
// threads at once (a dataset whose get() is not thread-safe guards it itself).
class TorchSamples {
 public:
  virtual ~TorchSamples() = default;
  virtual std::optional<std::size_t> size() const = 0;
  virtual torch::data::Example<> get(std::size_t index) = 0;
};

// What the loader takes of a torch::data dataset: get(index) and size().
template <typename D>
concept TorchDataset = requires(D dataset, std::size_t index) {
  { dataset.get(index) } -> std::convertible_to<torch::data::Example<>>;
  dataset.size().has_value();
};

// A torch::data dataset as TorchSamples.
template <TorchDataset Dataset>
class TorchSamplesOf final : public TorchSamples {
 public:
  explicit TorchSamplesOf(Dataset dataset) : dataset_(std::move(dataset)) {}
  std::optional<std::size_t> size() const override {
    const auto n = dataset_.size();  // c10::optional or std::optional, by libtorch version
    return n.has_value() ? std::optional<std::size_t>(*n) : std::nullopt;
  }
  torch::data::Example<> get(std::size_t index) override { return dataset_.get(index); }

 private:
  Dataset dataset_;
};

// Not thread-safe: the loop's thread iterates. Batches may be freed on any thread, also after the
// Loader is gone.
class Loader {
 public:
  using Batch = torch::data::Example<>;  // data [B, ...] float32 or uint8, target [B] int64

  // num_workers and prefetch: tuned while the loop runs (docs/autotune.md).
  static constexpr int kAuto = -1;

  // `feedscope run`'s keys, with its defaults and its messages: a bad value throws
  // std::invalid_argument naming the key, the value and what is allowed.
  struct Options {
    // images:DIR | webdataset:PATTERN | tfrecord:PATTERN | records:DIR | synthetic:SHAPE; empty
    // when the loader is given a torch dataset.
    std::string dataset{};
    std::int64_t batch_size = 1;
    int num_workers = 0;  // worker threads; 0: load in the loop's thread; kAuto: tuned
    int prefetch = 2;     // batches in flight per worker; kAuto: tuned
    bool shuffle = false;
    std::uint64_t seed = 0;  // with shuffle: each epoch's order is a function of (seed, epoch)
    bool drop_last = false;
    std::string pipeline = "train";  // images: torchvision's RandomResizedCrop + flip, or "eval"
    int image_size = 224;
    std::string device = "cpu";      // "cpu", "cuda", "cuda:N"
    std::optional<bool> pin_memory{};  // unset: pinned where the batches go to a GPU
    // A DistributedSampler's share: -1 reads $RANK and $WORLD_SIZE (1 where unset).
    int rank = -1;
    int world_size = -1;
    // Batches the loop may keep alive at once before the loader refuses the next (a list of the last
    // N); the pool grows to make room, up to this.
    int max_held_batches = 16;
    // The cudaStream_t the loop takes batches on: each copy is ordered before it. A device buffer
    // is reused only after the work queued, when its tensors died, on it and on the legacy default
    // stream, so a batch may also be read on the default stream once that waited for this one (a
    // side-stream prefetcher); a third stream is ordered by neither. Null: the legacy default
    // stream, which is torch's current stream unless the loop set another.
    void* stream = nullptr;
    // A torch dataset's number of classes (torch datasets do not say); 0: not known.
    std::int64_t num_classes = 0;
    // Any other of run's keys by name: bad_sample, max_bad_ratio, reduced_decode, shuffle_buffer,
    // label_key, classes, synthetic_samples, max_workers, ram_budget_mib.
    std::map<std::string, std::string> more{};
  };

  // Opens the dataset and starts the workers on epoch 0. Throws std::invalid_argument naming the
  // key, value or file (a bad option, a dataset that cannot be opened), std::runtime_error for a
  // GPU that is not there.
  explicit Loader(Options options);
  template <TorchDataset Dataset>
  Loader(Dataset dataset, Options options)
      : Loader(std::make_shared<TorchSamplesOf<Dataset>>(std::move(dataset)), std::move(options)) {}
  Loader(std::shared_ptr<TorchSamples> samples, Options options);
  ~Loader();
  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;

  class Iterator;
  struct Sentinel {};
  // Starts an epoch: the one set_epoch() named, else the one after the last (0 first).
  Iterator begin();
  Sentinel end() const noexcept { return {}; }
  // The epoch the next begin() starts, as DistributedSampler::set_epoch.
  void set_epoch(std::uint64_t epoch);

  // Samples in the dataset, batches an epoch; null for a shard stream (its length is not known).
  std::optional<std::size_t> size() const;
  std::optional<std::int64_t> batches_per_epoch() const;
  const Options& options() const noexcept;

  // Joins a Session: the workers' read, decode, transform and collate spans, the copies and the
  // per-sample costs go into its report, so its diagnosis sees inside the loader. The session
  // must outlive the loader's loop; spans recorded before are dropped.
  void attach(Session& session);

  // The next batch of the epoch into `out`; false at its end. Rethrows a bad sample's error
  // (naming its file) as std::runtime_error. Iterator::operator++ calls it.
  bool next(Batch& out);

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using difference_type = std::ptrdiff_t;
    using value_type = Batch;
    using reference = Batch&;

    Batch& operator*() { return batch_; }
    Batch* operator->() { return &batch_; }
    Iterator& operator++() {
      done_ = !loader_->next(batch_);
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& it, Sentinel) { return it.done_; }
    friend bool operator!=(const Iterator& it, Sentinel) { return !it.done_; }

   private:
    friend class Loader;
    explicit Iterator(Loader* loader) : loader_(loader) {}
    Loader* loader_;
    Batch batch_;
    bool done_ = false;
  };

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace feedscope
