#pragma once
// A dataset whose samples encode their own index, so a test checks the bytes that reached the
// batch, not only the labels. Sample i is kWords little-endian uint64 words: i, ~i, i * kMix, ...
#include <cstdint>
#include <cstring>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/dataset.h"

namespace feedscope::testing {

class IndexDataset final : public Dataset {
 public:
  static constexpr std::size_t kWords = 4;
  static constexpr std::uint64_t kMix = 0x9E3779B97F4A7C15ull;

  explicit IndexDataset(std::size_t n, std::set<std::size_t> bad = {})
      : n_(n), bad_(std::move(bad)) {
    spec_ = SampleSpec{{static_cast<std::int64_t>(kWords * 8)}, DType::uint8};
  }
  std::size_t size() const override { return n_; }
  const SampleSpec& spec() const override { return spec_; }
  std::int64_t num_classes() const override { return 5; }
  std::int64_t load(std::size_t index, std::span<std::byte> out, LoadContext& ctx) const override {
    ScopedSpan span(ctx.spans, ctx.role, Stage::read, ctx.batch);
    if (out.size() != spec_.bytes()) throw std::logic_error("slot of the wrong size");
    if (bad_.count(index)) throw std::runtime_error("checksum mismatch");
    const std::vector<std::uint64_t> words = expected(index);
    std::memcpy(out.data(), words.data(), out.size());
    return label_of(index);
  }
  std::string describe(std::size_t index) const override {
    return "/data/part-" + std::to_string(index) + ".bin";
  }
  std::string name() const override { return "index"; }

  static std::int64_t label_of(std::size_t index) { return static_cast<std::int64_t>(index % 5); }
  static std::vector<std::uint64_t> expected(std::size_t index) {
    const std::uint64_t i = index;
    return {i, ~i, i * kMix, i ^ kMix};
  }
  // The index a sample's bytes encode; throws when the bytes are not a whole, intact sample.
  static std::size_t decode(const std::byte* sample) {
    std::vector<std::uint64_t> words(kWords);
    std::memcpy(words.data(), sample, kWords * 8);
    if (words != expected(words[0]))
      throw std::runtime_error("sample bytes do not encode an index: torn or misplaced copy");
    return static_cast<std::size_t>(words[0]);
  }

 private:
  std::size_t n_;
  std::set<std::size_t> bad_;
  SampleSpec spec_;
};

}  // namespace feedscope::testing
