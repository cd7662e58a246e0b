#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loader/dataset.h"

namespace feedscope {

// In-memory float32 samples generated from a seed. Each class has its own mean pattern plus
// noise, so a model trained on it learns (the loss falls) and a run proves the whole path. Keeps
// at most `max_stored_bytes` of distinct samples; indexes beyond wrap around them.
class SyntheticDataset final : public Dataset {
 public:
  struct Options {
    std::vector<std::int64_t> shape{3, 32, 32};
    std::size_t count = 8192;
    std::int64_t classes = 10;
    std::uint64_t seed = 0;
    std::size_t max_stored_bytes = std::size_t{256} << 20;
  };
  explicit SyntheticDataset(Options options);

  std::size_t size() const override { return options_.count; }
  const SampleSpec& spec() const override { return spec_; }
  std::int64_t num_classes() const override { return options_.classes; }
  std::int64_t load(std::size_t index, std::span<std::byte> out, LoadContext& ctx) const override;
  std::string describe(std::size_t index) const override;
  std::string name() const override;

 private:
  Options options_;
  SampleSpec spec_;
  std::size_t stored_ = 0;
  std::vector<float> data_;
};

// Parses "3x32x32" (or "784") into a shape; throws DatasetError naming the text.
std::vector<std::int64_t> parse_shape(const std::string& text);

}  // namespace feedscope
