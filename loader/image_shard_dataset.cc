#include "loader/image_shard_dataset.h"

#include <algorithm>
#include <utility>

#include "loader/detail/image_sample.h"
#include "loader/sample_rng.h"

namespace feedscope {

namespace {

// The shuffle buffer in front of the decoder, as webdataset's shuffle(): the first `capacity`
// samples fill it, then each sample handed out is a random one of it, its place taken by the next
// read; at the end of the shards it empties in random order. Holding encoded bytes, not pixels,
// keeps it to about capacity x the stored image size.
class ImageStream final : public SampleStream {
 public:
  ImageStream(std::unique_ptr<ShardReader> reader, const ImageShardDataset::Options& options, std::size_t capacity,
              std::uint64_t seed, std::uint64_t epoch, std::size_t stream)
      : reader_(std::move(reader)),
        options_(options),
        capacity_(std::max<std::size_t>(1, capacity)),
        pick_(seed ^ 0x5368756666ULL, epoch, stream),
        epoch_(epoch) {}

  std::optional<std::int64_t> next(std::span<std::byte> out, LoadContext& ctx) override {
    while (!reader_done_ && held_ < capacity_) {
      if (held_ == slots_.size()) slots_.emplace_back();
      if (!reader_->next(slots_[held_], ctx)) {
        reader_done_ = true;
        break;
      }
      ++held_;
    }
    if (held_ == 0) return std::nullopt;
    const std::size_t pick = capacity_ > 1 ? static_cast<std::size_t>(pick_.next() % held_) : 0;
    std::swap(slots_[pick], slots_[held_ - 1]);
    --held_;
    // The slot stays allocated past held_: the next read reuses its buffers.
    const EncodedSample& sample = slots_[held_];
    if (sample.label < 0 || sample.label >= options_.classes)
      throw SampleError(sample.ordinal, sample.source,
                        "label " + std::to_string(sample.label) + " is outside 0.." +
                            std::to_string(options_.classes - 1) + " (classes " +
                            std::to_string(options_.classes) + "; set --classes)");
    SampleRng rng(options_.image.seed, epoch_, (std::uint64_t{sample.shard} << 32) ^ sample.ordinal);
    try {
      detail::decode_image_sample(sample.image, options_.image, rng, scratch_, ctx,
                                  reinterpret_cast<float*>(out.data()));
    } catch (const ImageError& e) {
      throw SampleError(sample.ordinal, sample.source, e.what());
    }
    return sample.label;
  }

 private:
  std::unique_ptr<ShardReader> reader_;
  const ImageShardDataset::Options& options_;
  std::size_t capacity_;
  SampleRng pick_;
  std::uint64_t epoch_;
  std::vector<EncodedSample> slots_;  // [0, held_) are waiting
  std::size_t held_ = 0;
  bool reader_done_ = false;
  detail::ImageScratch scratch_;
};

}  // namespace

ImageShardDataset::ImageShardDataset(std::string kind, Options options, std::vector<std::string> shards)
    : kind_(std::move(kind)), options_(std::move(options)), shards_(std::move(shards)) {
  const int size = options_.image.size;
  if (size < 8 || size > 4096)
    throw DatasetError(kind_ + ": output size " + std::to_string(size) + " is not allowed; allowed: 8 to 4096");
  if (options_.classes < 1)
    throw DatasetError(kind_ + ": classes " + std::to_string(options_.classes) + " is not allowed; allowed: 1 or more");
  spec_.shape = {3, size, size};
  spec_.dtype = DType::float32;
}

std::unique_ptr<SampleStream> ImageShardDataset::open_stream(std::vector<std::size_t> shards, const ShardPlan& plan,
                                                             std::size_t stream, std::uint64_t epoch) const {
  return std::make_unique<ImageStream>(open_reader(std::move(shards)), options_,
                                       plan.shuffle ? plan.shuffle_buffer : 1, plan.seed, epoch, stream);
}

std::uint64_t ImageShardDataset::evict_page_cache() const {
  return drop_cached_files(shards_);
}

}  // namespace feedscope
