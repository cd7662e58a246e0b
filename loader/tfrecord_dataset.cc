#include "loader/tfrecord_dataset.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "loader/detail/sequential_file.h"
#include "loader/detail/shard_pattern.h"
#include "loader/detail/tf_example.h"
#include "loader/jpeg_encoder.h"

namespace feedscope {

namespace {

namespace fs = std::filesystem;

std::uint64_t le64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::uint32_t le32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
}

std::string hex32(std::uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

// A record's length beyond which the length itself is taken for corrupt: no image file is 2 GiB.
constexpr std::uint64_t kMaxRecord = std::uint64_t{1} << 31;

class TfRecordReader final : public ShardReader {
 public:
  TfRecordReader(const TfRecordDataset& dataset, std::vector<std::size_t> shards)
      : dataset_(dataset), shards_(std::move(shards)) {}

  bool next(EncodedSample& out, LoadContext& ctx) override {
    for (;;) {
      if (!file_) {
        if (cursor_ == shards_.size()) return false;
        shard_ = shards_[cursor_];
        ordinal_ = 0;
        try {
          file_ = std::make_unique<detail::SequentialFile>(dataset_.shard_path(shard_));
        } catch (const std::runtime_error& e) {
          ++cursor_;
          throw SampleError(0, dataset_.shard_path(shard_), e.what());
        }
      }
      if (read_record(out, ctx)) return true;
      end_shard();
    }
  }

 private:
  void end_shard() {
    file_.reset();
    ++cursor_;
  }

  // The next record of the open shard; false at its end. Throws SampleError for a bad one; where
  // the framing is lost (a bad length, a cut file, a corrupt gzip stream), the shard ends there.
  bool read_record(EncodedSample& out, LoadContext& ctx) {
    const std::string& path = dataset_.shard_path(shard_);
    const std::uint64_t ordinal = ordinal_;
    const std::uint64_t at = file_->position();
    out.shard = shard_;
    out.ordinal = ordinal;
    out.source.assign(path).append(" record ").append(std::to_string(ordinal)).append(" at byte ").append(std::to_string(at));
    const auto framing_lost = [&](const std::string& why) {
      end_shard();
      return SampleError(ordinal, out.source, why + "; the rest of the shard cannot be framed");
    };
    {
      ScopedSpan span(ctx.spans, ctx.role, Stage::read, ctx.batch);
      std::uint8_t header[12];
      std::size_t got = 0;
      try {
        got = file_->read(header, sizeof header);
      } catch (const std::runtime_error& e) {
        throw framing_lost(e.what());
      }
      if (got == 0) return false;
      ++ordinal_;
      if (got < sizeof header) throw framing_lost("truncated: the file ends inside a record's header");
      const std::uint64_t length = le64(header);
      const std::uint32_t stored = le32(header + 8), computed = detail::tfrecord_masked_crc(header, 8);
      if (stored != computed)
        throw framing_lost("length checksum mismatch (stored " + hex32(stored) + ", computed " + hex32(computed) +
                           "): not a TFRecord file, or a corrupt one");
      if (length > kMaxRecord) throw framing_lost("a record of " + std::to_string(length) + " bytes");
      record_.resize(static_cast<std::size_t>(length) + 4);
      try {
        got = file_->read(record_.data(), record_.size());
      } catch (const std::runtime_error& e) {
        throw framing_lost(e.what());
      }
      if (got < record_.size())
        throw framing_lost("truncated: the file ends " + std::to_string(record_.size() - got) +
                           " bytes before the record's end");
      const std::uint32_t data_stored = le32(record_.data() + length);
      const std::uint32_t data_computed = detail::tfrecord_masked_crc(record_.data(), static_cast<std::size_t>(length));
      if (data_stored != data_computed)
        throw SampleError(ordinal, out.source,
                          "data checksum mismatch (stored " + hex32(data_stored) + ", computed " + hex32(data_computed) +
                              "): the record is corrupt");
      record_.resize(static_cast<std::size_t>(length));
    }
    try {
      const detail::ExampleImage example = detail::parse_example(record_, kTfImageKey, kTfLabelKey);
      out.image.assign(example.image.begin(), example.image.end());
      out.label = example.label;
    } catch (const std::runtime_error& e) {
      throw SampleError(ordinal, out.source, e.what());
    }
    return true;
  }

  const TfRecordDataset& dataset_;
  std::vector<std::size_t> shards_;
  std::size_t cursor_ = 0;
  std::size_t shard_ = 0;
  std::unique_ptr<detail::SequentialFile> file_;
  std::uint64_t ordinal_ = 0;
  std::vector<std::uint8_t> record_;
};


}  // namespace

TfRecordDataset::TfRecordDataset(Options options)
    : ImageShardDataset("tfrecord", options, detail::list_shards("tfrecord", options.pattern, {})) {}

std::unique_ptr<ShardReader> TfRecordDataset::open_reader(std::vector<std::size_t> shards) const {
  return std::make_unique<TfRecordReader>(*this, std::move(shards));
}

ShardDatasetSummary make_tfrecord_dataset(const ShardDatasetOptions& options) {
  const ImageDatasetOptions& o = options.images;
  return write_shards(options, [&](std::int64_t s, std::int64_t shards, std::int64_t first, std::int64_t end) {
    char name[64];
    std::snprintf(name, sizeof name, "train-%05lld-of-%05lld", static_cast<long long>(s),
                  static_cast<long long>(shards));
    const std::string path = (fs::path(o.out) / name).string();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error(path + ": cannot create: " + std::strerror(errno));
    std::uint64_t bytes = 0;
    try {
      for (std::int64_t i = first; i < end; ++i) {
        const std::vector<std::uint8_t> record = detail::tfrecord_frame(detail::encode_example(
            kTfImageKey, synthetic_jpeg(o, i), kTfLabelKey, static_cast<int>(i % o.classes),
            {{"image/format", "JPEG"}}));
        write_all(fd, record.data(), record.size(), path);
        bytes += record.size();
      }
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (::close(fd) != 0) throw std::runtime_error(path + ": cannot finish: " + std::strerror(errno));
    return bytes;
  });
}

}  // namespace feedscope
