#pragma once
// An IndexDataset whose samples from `first_gated` on load only once the test opens the gate, so
// the test decides when the batches holding them are collated: no sleep, no clock. A loader
// destroyed with a load still waiting would wait for ever: keep an OpenOnExit after the loader.
#include <condition_variable>
#include <mutex>

#include "tests/loader/index_dataset.h"

namespace feedscope::testing {

class GatedDataset final : public Dataset {
 public:
  GatedDataset(std::size_t n, std::size_t first_gated) : inner_(n), first_gated_(first_gated) {}
  std::size_t size() const override { return inner_.size(); }
  const SampleSpec& spec() const override { return inner_.spec(); }
  std::int64_t num_classes() const override { return inner_.num_classes(); }
  std::int64_t load(std::size_t index, std::span<std::byte> out, LoadContext& ctx) const override {
    if (index >= first_gated_) {
      std::unique_lock lock(mutex_);
      opened_.wait(lock, [&] { return open_; });
    }
    return inner_.load(index, out, ctx);
  }
  std::string describe(std::size_t index) const override { return inner_.describe(index); }
  std::string name() const override { return "gated"; }

  void open() {
    {
      const std::lock_guard lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }

 private:
  IndexDataset inner_;
  std::size_t first_gated_;
  // Below state is shared with the loader's workers.
  mutable std::mutex mutex_;
  mutable std::condition_variable opened_;
  bool open_ = false;
};

// Opens the gate when it goes out of scope: declared after the loader, it goes first.
struct OpenOnExit {
  GatedDataset& dataset;
  ~OpenOnExit() { dataset.open(); }
};

}  // namespace feedscope::testing
