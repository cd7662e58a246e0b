#include "loader/synthetic_dataset.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <random>

namespace feedscope {

std::vector<std::int64_t> parse_shape(const std::string& text) {
  std::vector<std::int64_t> shape;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find('x', pos), text.size());
    std::int64_t dim = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + pos, text.data() + end, dim);
    if (ec != std::errc() || ptr != text.data() + end || dim <= 0 || dim > (1 << 20)) {
      throw DatasetError("bad shape '" + text +
                         "': expected positive dimensions joined by 'x', e.g. 3x32x32 or 784");
    }
    shape.push_back(dim);
    pos = end + 1;
  }
  if (shape.empty() || shape.size() > 4)
    throw DatasetError("bad shape '" + text + "': expected 1 to 4 dimensions");
  return shape;
}

SyntheticDataset::SyntheticDataset(Options options) : options_(std::move(options)) {
  spec_.shape = options_.shape;
  spec_.dtype = DType::float32;
  if (options_.count == 0) throw DatasetError("synthetic dataset: count must be > 0");
  if (options_.classes < 2) throw DatasetError("synthetic dataset: classes must be >= 2");
  const std::size_t elements = static_cast<std::size_t>(spec_.elements());
  const std::size_t per_sample = spec_.bytes();
  if (per_sample > options_.max_stored_bytes)
    throw DatasetError("synthetic dataset: one sample of " + spec_.to_string() + " is " +
                       std::to_string(per_sample) + " bytes, over the " +
                       std::to_string(options_.max_stored_bytes) + "-byte limit");
  stored_ = std::min(options_.count, options_.max_stored_bytes / per_sample);

  std::mt19937_64 rng(options_.seed);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  // A fixed +/-a pattern per class, with a chosen so class means sit about 4 noise deviations
  // apart whatever the sample size: learnable, so the loss falls over the first hundred steps
  // rather than at once.
  std::vector<float> means(static_cast<std::size_t>(options_.classes) * elements);
  std::bernoulli_distribution coin(0.5);
  const float amplitude = 3.0f / std::sqrt(static_cast<float>(elements));
  for (float& m : means) m = coin(rng) ? amplitude : -amplitude;
  data_.resize(stored_ * elements);
  for (std::size_t i = 0; i < stored_; ++i) {
    const std::size_t label = i % static_cast<std::size_t>(options_.classes);
    const float* mean = means.data() + label * elements;
    float* sample = data_.data() + i * elements;
    for (std::size_t e = 0; e < elements; ++e) sample[e] = mean[e] + noise(rng);
  }
}

std::int64_t SyntheticDataset::load(std::size_t index, std::span<std::byte> out,
                                    LoadContext& ctx) const {
  if (index >= options_.count)
    throw SampleError(index, describe(index), "index out of range (size " +
                                                  std::to_string(options_.count) + ")");
  const std::size_t slot = index % stored_;
  const std::size_t bytes = spec_.bytes();
  {
    ScopedSpan span(ctx.spans, ctx.role, Stage::collate, ctx.batch);
    std::memcpy(out.data(), data_.data() + slot * (bytes / sizeof(float)), bytes);
  }
  return static_cast<std::int64_t>(slot % static_cast<std::size_t>(options_.classes));
}

std::string SyntheticDataset::describe(std::size_t index) const {
  return name() + "#" + std::to_string(index);
}

std::string SyntheticDataset::name() const {
  std::string shape;
  for (std::size_t i = 0; i < options_.shape.size(); ++i)
    shape += (i ? "x" : "") + std::to_string(options_.shape[i]);
  return "synthetic:" + shape;
}

}  // namespace feedscope
