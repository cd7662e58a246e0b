#pragma once
// Bridges to libtorch: a user's torch::data dataset loaded by the BatchLoader, and a Batch viewed
// as tensors without a copy. Include only where libtorch is wanted; link feedscope_loader_torch.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include <torch/data/datasets/base.h>
#include <torch/data/example.h>

#include "loader/batch_loader.h"
#include "loader/dataset.h"

namespace feedscope {

namespace detail {
// The sample spec of a tensor (its shape; float32 or uint8). Throws DatasetError naming `what`.
SampleSpec spec_of_tensor(const at::Tensor& data, const std::string& what);
// Checks one example against `spec` and copies it into `out`; returns its label. Throws
// SampleError naming index and source for a shape, dtype or label that does not fit.
std::int64_t collate_example(const at::Tensor& data, const at::Tensor& target,
                             const SampleSpec& spec, std::size_t index, const std::string& source,
                             std::span<std::byte> out, LoadContext& ctx);
}  // namespace detail

// A torch::data::datasets::Dataset<Self, Example<>> loaded by the BatchLoader: get(index) on a
// worker (the `read` span), the example checked against the spec learned from sample 0 and copied
// into the slab (`collate`). Thread-safe as far as get() is: the BatchLoader calls it from many
// workers at once, as libtorch's own stateless datasets allow; set `serialize` for a get() that
// is not safe to call concurrently.
template <typename TorchDataset>
class TorchDatasetAdapter final : public Dataset {
 public:
  struct Options {
    std::int64_t num_classes = 0;  // torch datasets do not say; needed to train on it
    bool serialize = false;        // one get() at a time
    std::string name = "torch";    // for reports and error messages
  };

  // Throws DatasetError when size() is unknown or 0, or sample 0 is not float32/uint8 data with
  // one integer label.
  explicit TorchDatasetAdapter(TorchDataset dataset, Options options = {})
      : dataset_(std::move(dataset)), options_(std::move(options)) {
    const auto size = dataset_.size();  // c10::optional or std::optional, by libtorch version
    if (!size.has_value() || *size == 0)
      throw DatasetError(options_.name + ": the torch dataset's size() is " +
                         (size.has_value() ? std::string("0") : std::string("unknown")) +
                         "; the loader needs a known, non-zero size");
    size_ = *size;
    auto first = dataset_.get(0);
    spec_ = detail::spec_of_tensor(first.data, options_.name + " sample 0");
  }

  std::size_t size() const override { return size_; }
  const SampleSpec& spec() const override { return spec_; }
  std::int64_t num_classes() const override { return options_.num_classes; }
  std::int64_t load(std::size_t index, std::span<std::byte> out, LoadContext& ctx) const override {
    torch::data::Example<> example = get(index, ctx);
    return detail::collate_example(example.data, example.target, spec_, index, describe(index),
                                   out, ctx);
  }
  std::string describe(std::size_t index) const override {
    return options_.name + "#" + std::to_string(index);
  }
  std::string name() const override { return options_.name; }

 private:
  torch::data::Example<> get(std::size_t index, LoadContext& ctx) const {
    ScopedSpan span(ctx.spans, ctx.role, Stage::read, ctx.batch);
    if (!options_.serialize) return dataset_.get(index);
    std::lock_guard lock(mutex_);
    return dataset_.get(index);
  }

  mutable TorchDataset dataset_;  // libtorch's get() is not const
  Options options_;
  std::size_t size_ = 0;
  SampleSpec spec_;
  mutable std::mutex mutex_;
};

// A batch as tensors over its slab, without a copy: data is [size, *spec.shape] of spec.dtype,
// labels is [size] int64. The tensors keep the slab (and its pool) alive; the slab returns to the
// pool when the last of them is freed, so clone() what must outlive the next few batches.
struct BatchTensors {
  at::Tensor data;
  at::Tensor labels;
};
BatchTensors batch_tensors(Batch batch, const SampleSpec& spec);

}  // namespace feedscope
