#include "loader/webdataset_dataset.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "loader/detail/shard_pattern.h"
#include "loader/jpeg_encoder.h"
#include "loader/tar_archive.h"

namespace feedscope {

namespace {

namespace fs = std::filesystem;

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

bool is_image_extension(const std::string& ext) {
  return ext == "jpg" || ext == "jpeg" || ext == "png" || ext == "webp";
}

class TarSampleReader final : public ShardReader {
 public:
  TarSampleReader(const WebDataset& dataset, std::vector<std::size_t> shards, std::string label_key)
      : dataset_(dataset), shards_(std::move(shards)), label_key_(std::move(label_key)) {}

  bool next(EncodedSample& out, LoadContext& ctx) override {
    for (;;) {
      if (!tar_) {
        if (cursor_ == shards_.size()) return false;
        shard_ = shards_[cursor_];
        ordinal_ = 0;
        pending_ = false;
        try {
          tar_ = std::make_unique<TarReader>(dataset_.shard_path(shard_));
        } catch (const std::runtime_error& e) {
          ++cursor_;
          throw SampleError(0, dataset_.shard_path(shard_), e.what());
        }
      }
      if (read_sample(out, ctx)) return true;
      tar_.reset();
      ++cursor_;
    }
  }

 private:
  // One sample of the open shard; false at its end. Throws SampleError for a bad one.
  bool read_sample(EncodedSample& out, LoadContext& ctx) {
    const std::string& path = dataset_.shard_path(shard_);
    ScopedSpan span(ctx.spans, ctx.role, Stage::read, ctx.batch);
    std::string key, ext, image_member;
    bool image = false, label = false;
    const std::uint64_t ordinal = ordinal_;
    try {
      for (;;) {
        if (!pending_) {
          if (!tar_->next(member_)) break;
          pending_ = true;
        }
        std::string member_key;
        if (!webdataset_key(member_.name, member_key, ext)) {
          pending_ = false;
          continue;
        }
        if (key.empty()) {
          key = member_key;
        } else if (member_key != key) {
          break;  // the next sample's first member: kept for it
        }
        pending_ = false;
        ext = lower(ext);
        if (is_image_extension(ext) && !image) {
          tar_->read(out.image);
          image = true;
          image_member = member_.name;
        } else if (ext == label_key_) {
          tar_->read(label_text_);
          label = true;
          label_member_ = member_.name;
        }
      }
    } catch (const TarError& e) {
      pending_ = false;
      ++ordinal_;
      if (e.framing_lost()) tar_.reset(), ++cursor_;
      const std::string source = path + " member '" + e.member() + "'";
      std::string what = e.what();
      if (what.rfind(source + ": ", 0) == 0) what.erase(0, source.size() + 2);  // SampleError names it
      throw SampleError(ordinal, source, what);
    }
    if (key.empty()) return false;
    ++ordinal_;
    out.shard = shard_;
    out.ordinal = ordinal;
    out.source.assign(path).append(" member '").append(image ? image_member : key).append("'");
    if (!image)
      throw SampleError(ordinal, out.source,
                        "sample '" + key + "' has no image member (.jpg, .jpeg, .png or .webp)");
    if (!label)
      throw SampleError(ordinal, out.source, "sample '" + key + "' has no ." + label_key_ + " member (its label)");
    const auto* begin = reinterpret_cast<const char*>(label_text_.data());
    const auto* end = begin + label_text_.size();
    while (begin < end && std::isspace(static_cast<unsigned char>(*begin))) ++begin;
    while (end > begin && std::isspace(static_cast<unsigned char>(end[-1]))) --end;
    const auto [ptr, ec] = std::from_chars(begin, end, out.label);
    if (ec != std::errc() || ptr != end || begin == end)
      throw SampleError(ordinal, out.source,
                        "member '" + label_member_ + "' holds '" + std::string(begin, std::min(end, begin + 40)) +
                            "', not an integer label");
    return true;
  }

  const WebDataset& dataset_;
  std::vector<std::size_t> shards_;
  std::string label_key_;
  std::size_t cursor_ = 0;  // into shards_
  std::size_t shard_ = 0;
  std::unique_ptr<TarReader> tar_;
  std::uint64_t ordinal_ = 0;
  TarMember member_;
  bool pending_ = false;  // member_ is read and belongs to the next sample
  std::vector<std::uint8_t> label_text_;
  std::string label_member_;
};

}  // namespace

bool webdataset_key(const std::string& name, std::string& key, std::string& extension) {
  const std::size_t slash = name.rfind('/');
  const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
  const std::size_t dot = name.find('.', base);
  if (dot == std::string::npos || dot == base) return false;
  key.assign(name, 0, dot);
  extension.assign(name, dot + 1);
  return true;
}

WebDataset::WebDataset(Options options)
    : ImageShardDataset("webdataset", options,
                        detail::list_shards("webdataset", options.pattern, {".tar", ".tar.gz", ".tgz"})),
      label_key_(lower(options.label_key)) {
  if (label_key_.empty() || label_key_.find('/') != std::string::npos)
    throw DatasetError("label_key: '" + options.label_key + "' is not allowed; allowed: a member extension such as cls");
}

std::unique_ptr<ShardReader> WebDataset::open_reader(std::vector<std::size_t> shards) const {
  return std::make_unique<TarSampleReader>(*this, std::move(shards), label_key_);
}

ShardDatasetSummary make_webdataset(const ShardDatasetOptions& options) {
  const ImageDatasetOptions& o = options.images;
  return write_shards(options, [&](std::int64_t s, std::int64_t, std::int64_t first, std::int64_t end) {
    char name[32];
    std::snprintf(name, sizeof name, "shard-%06lld.tar", static_cast<long long>(s));
    TarWriter tar((fs::path(o.out) / name).string());
    for (std::int64_t i = first; i < end; ++i) {
      char key[32];
      std::snprintf(key, sizeof key, "%08lld", static_cast<long long>(i));
      tar.add(std::string(key) + ".jpg", synthetic_jpeg(o, i));
      const std::string text = std::to_string(i % o.classes);
      tar.add(std::string(key) + ".cls",
              std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
    }
    tar.finish();
    return tar.bytes();
  });
}

}  // namespace feedscope
