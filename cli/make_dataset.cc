#include "cli/make_dataset.h"

#include <array>
#include <charconv>
#include <cstdint>
#include <limits>
#include <functional>
#include <iomanip>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/config.h"
#include "loader/dataset.h"
#include "loader/image_dataset_maker.h"
#include "loader/record_dataset.h"
#include "loader/tfrecord_dataset.h"
#include "loader/webdataset_dataset.h"

namespace feedscope {

namespace {

std::pair<int, int> parse_size(const std::string& text);

// "0.02:4000x3000" -> a share and a size; empty: no skew. Anything else is a ConfigError naming --skew.
void parse_skew(const std::string& text, ImageDatasetOptions& o) {
  if (text.empty()) return;
  const std::size_t colon = text.find(':');
  double share = -1;
  const char* end = text.data() + (colon == std::string::npos ? text.size() : colon);
  const bool ok = colon != std::string::npos && std::from_chars(text.data(), end, share).ptr == end &&
                  share > 0 && share <= 1;
  if (!ok) throw ConfigError("skew", "--skew: '" + text + "' is not SHARE:WxH with a share over 0 and at most 1; allowed: e.g. 0.02:4000x3000");
  try {
    std::tie(o.skew_width, o.skew_height) = parse_size(text.substr(colon + 1));
  } catch (const ConfigError&) {
    throw ConfigError("skew", "--skew: '" + text + "': the size is not WxH; allowed: e.g. 0.02:4000x3000");
  }
  o.skew_share = share;
}

// "500x375" -> (500, 375); anything else is a ConfigError naming --size.
std::pair<int, int> parse_size(const std::string& text) {
  const std::size_t x = text.find('x');
  int width = -1, height = -1;
  const char* end = text.data() + text.size();
  const bool ok = x != std::string::npos &&
                  std::from_chars(text.data(), text.data() + x, width).ptr == text.data() + x &&
                  std::from_chars(text.data() + x + 1, end, height).ptr == end && x > 0 && x + 1 < text.size();
  if (!ok) throw ConfigError("size", "--size: '" + text + "' is not WxH; allowed: e.g. 500x375");
  return {width, height};
}

struct Kind {
  CLI::App* command;
  std::function<void(std::ostream&)> run;
  std::function<void()> check = [] {};  // what run() parses beyond the command line
};

}  // namespace

struct MakeDatasetCommand::Impl {
  CLI::App* command = nullptr;
  std::vector<Kind> kinds;

  // images: an ImageFolder tree of JPEG files that decode like ImageNet's.
  struct Images {
    ImageDatasetOptions options;
    std::string size = "500x375";
    std::string skew;  // SHARE:WxH, empty: none
  } images;

  // webdataset and tfrecord: the images' JPEGs in shards.
  struct Shards {
    ShardDatasetOptions options;
    std::string size = "500x375";
  } webdataset, tfrecord;

  // records: checksummed record shards plus an index (docs/records-format.md).
  struct Records {
    MakeRecordsOptions options;
    std::string out;
  } records;

  void add_records() {
    CLI::App* c = command->add_subcommand(
        "records", "checksummed record shards plus an index (docs/records-format.md)");
    MakeRecordsOptions& o = records.options;
    c->add_option("--out", records.out, "output directory (must not hold a dataset yet)")->required();
    c->add_option("--count", o.count, "records")->required()->check(
        CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
    c->add_option("--sample-bytes", o.sample_bytes, "bytes per record (with --variable: at most)")
        ->required()
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 30));
    c->add_option("--shard-bytes", o.shard_bytes,
                  "close a shard before it passes this size; accepts KiB, MiB, GiB")
        ->capture_default_str()
        ->transform(CLI::AsSizeValue(false))
        ->check(CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max()));
    c->add_flag("--variable", o.variable,
                "record lengths uniform in [sample-bytes/2, sample-bytes], zero-padded on read");
    c->add_option("--classes", o.classes, "labels are uniform in 0..K-1")
        ->capture_default_str()
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000}));
    c->add_option("--seed", o.seed, "the dataset is a pure function of it")->capture_default_str();
    kinds.push_back({c, [this](std::ostream& out) {
                       MakeRecordsOptions opts = records.options;
                       opts.out = records.out;
                       const MakeRecordsResult made = make_records_dataset(opts);
                       out << "feedscope: wrote " << made.records << " records in " << made.shards
                           << " shard(s), " << made.bytes << " bytes, to " << records.out << "\n";
                     }});
  }

  // `make` writes the shards.
  void add_shards(const std::string& name, const std::string& help, const std::string& kind, Shards& shards,
                  ShardDatasetSummary (*make)(const ShardDatasetOptions&)) {
    CLI::App* c = command->add_subcommand(name, help);
    ImageDatasetOptions& o = shards.options.images;
    c->add_option("--out", o.out, "directory to create (new or empty)")->required();
    c->add_option("--count", o.count, "number of samples [1 or more]")->required();
    c->add_option("--shard-samples", shards.options.shard_samples, "samples per shard [1 or more]")->capture_default_str();
    c->add_option("--size", shards.size, "WxH of each image [each side 16 to 16384]")->capture_default_str();
    c->add_option("--classes", o.classes, "image i has label i % K")->capture_default_str();
    c->add_option("--quality", o.quality, "JPEG quality [1 to 100]")->capture_default_str();
    c->add_option("--seed", o.seed, "same seed, byte-identical shards")->capture_default_str();
    kinds.push_back({c, [&shards, kind, make](std::ostream& out) {
                       ShardDatasetOptions opts = shards.options;
                       std::tie(opts.images.width, opts.images.height) = parse_size(shards.size);
                       ShardDatasetSummary made;
                       try {
                         made = make(opts);
                       } catch (const DatasetError& e) {
                         const std::string what = e.what();
                         const std::string key = what.substr(0, what.find(':'));
                         throw ConfigError(key, "--" + (key == "shard_samples" ? "shard-samples" + what.substr(key.size()) : what));
                       }
                       out << "feedscope: wrote " << made.samples << " samples in " << made.shards << " shard(s), "
                           << std::fixed << std::setprecision(1) << static_cast<double>(made.bytes) / 1e6
                           << " MB, to " << opts.images.out << "\n"
                           << "load it with: feedscope run --dataset " << kind << ":" << opts.images.out << "\n";
                     },
                     [&shards] { parse_size(shards.size); }});
  }

  void add_webdataset() {
    add_shards("webdataset", "the JPEGs of `images` as webdataset tar shards (KEY.jpg + KEY.cls per sample)",
               "webdataset", webdataset, make_webdataset);
  }

  void add_tfrecord() {
    add_shards("tfrecord", "the JPEGs of `images` as TFRecord files of tf.train.Example (ImageNet's fields)",
               "tfrecord", tfrecord, make_tfrecord_dataset);
  }

  void add_images() {
    CLI::App* c = command->add_subcommand("images", "JPEG files in ImageFolder layout (DIR/<class>/<image>.jpg)");
    c->add_option("--out", images.options.out, "directory to create (new or empty)")->required();
    c->add_option("--count", images.options.count, "number of images [1 or more]")->required();
    c->add_option("--size", images.size, "WxH of each image [each side 16 to 16384]")->capture_default_str();
    c->add_option("--classes", images.options.classes, "class folders; image i goes to class i % K")
        ->capture_default_str();
    c->add_option("--quality", images.options.quality, "JPEG quality [1 to 100]")->capture_default_str();
    c->add_option("--seed", images.options.seed, "same seed, byte-identical files")->capture_default_str();
    c->add_option("--skew", images.skew,
                  "SHARE:WxH: that share of the images at that size, spread evenly (a few huge "
                  "photos among ordinary ones), e.g. 0.02:4000x3000");
    kinds.push_back({c, [this](std::ostream& out) {
                       ImageDatasetOptions o = images.options;
                       std::tie(o.width, o.height) = parse_size(images.size);
                       parse_skew(images.skew, o);
                       ImageDatasetSummary s;
                       try {
                         s = make_image_dataset(o);
                       } catch (const DatasetError& e) {
                         const std::string what = e.what();
                         throw ConfigError(what.substr(0, what.find(':')), "--" + what);
                       }
                       out << "feedscope: wrote " << s.files << " JPEG files (" << std::fixed
                           << std::setprecision(1) << static_cast<double>(s.bytes) / 1e6 << " MB, "
                           << s.bytes / static_cast<std::uint64_t>(s.files) / 1000 << " KB each) in "
                           << s.classes.size() << " classes to " << o.out << "\n"
                           << "load it with: feedscope run --dataset images:" << o.out << "\n";
                     },
                     [this] {
                       parse_size(images.size);
                       ImageDatasetOptions o;
                       parse_skew(images.skew, o);
                     }});
  }
};

MakeDatasetCommand::MakeDatasetCommand(CLI::App& app) : impl_(std::make_unique<Impl>()) {
  impl_->command = app.add_subcommand(
      "make-dataset", "write a dataset to load: images (JPEG), webdataset (tar shards), tfrecord or records (checksummed shards)");
  impl_->command->require_subcommand(1);
  impl_->add_images();
  impl_->add_webdataset();
  impl_->add_tfrecord();
  impl_->add_records();
}

MakeDatasetCommand::~MakeDatasetCommand() = default;

bool MakeDatasetCommand::chosen() const { return impl_->command->parsed(); }

void MakeDatasetCommand::check() const {
  for (const Kind& kind : impl_->kinds)
    if (kind.command->parsed()) kind.check();
}

void MakeDatasetCommand::run(std::ostream& out) const {
  for (const Kind& kind : impl_->kinds)
    if (kind.command->parsed()) kind.run(out);
}

}  // namespace feedscope
