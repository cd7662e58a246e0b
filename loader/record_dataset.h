#pragma once
// records:DIR — samples stored as checksummed records in shard files, reachable in O(1) through
// an index (docs/records-format.md). RecordWriter writes the format; RecordDataset reads it.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "loader/dataset.h"
#include "loader/detail/record_format.h"

namespace feedscope {

// Thread-safe for load(): each record is one preadv on its shard's descriptor, opened once, so
// workers share no file offset and take no lock. Opening checks the index and every shard
// header; a record's bytes are checked (CRC32C) when it is loaded.
class RecordDataset final : public Dataset {
 public:
  // Throws DatasetError naming the file: missing directory or index, bad magic or version, a
  // checksum-failed index or shard header, a shard whose size or header disagrees with the index,
  // a label outside 0..num_classes-1 (naming the record, its shard and the label).
  explicit RecordDataset(std::filesystem::path dir);
  RecordDataset(const RecordDataset&) = delete;
  RecordDataset& operator=(const RecordDataset&) = delete;

  std::size_t size() const override { return entries_.size(); }
  const SampleSpec& spec() const override { return spec_; }
  std::int64_t num_classes() const override { return num_classes_; }
  // Variable-size records fill the first record_bytes(index) bytes of `out` and zero the rest.
  // Throws SampleError naming the shard file and the record's byte offset for a short read
  // (truncated shard), a record header that disagrees with the index, or a checksum mismatch.
  std::int64_t load(std::size_t index, std::span<std::byte> out, LoadContext& ctx) const override;
  std::string describe(std::size_t index) const override;
  std::string name() const override { return "records:" + dir_.string(); }

  bool variable() const noexcept { return variable_; }
  std::size_t record_bytes(std::size_t index) const { return entries_.at(index).length; }
  std::int64_t label(std::size_t index) const { return entries_.at(index).label; }
  std::size_t record_shard(std::size_t index) const { return entries_.at(index).shard; }
  // Byte offset of the record (its header) within its shard.
  std::uint64_t record_offset(std::size_t index) const { return entries_.at(index).offset; }
  std::size_t shard_count() const noexcept { return shards_.size(); }
  std::filesystem::path shard_path(std::size_t shard) const;
  std::uint64_t total_bytes() const noexcept;  // every shard file

  // Every shard; dirty or mapped pages may stay.
  std::uint64_t evict_page_cache() const override;

 private:
  using Entry = detail::IndexEntry;  // offset, shard, length, label
  // Closes its descriptor, so a constructor that throws half-way leaks none.
  class Descriptor {
   public:
    Descriptor() = default;
    explicit Descriptor(int fd) noexcept : fd_(fd) {}
    Descriptor(Descriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    Descriptor& operator=(Descriptor&& other) noexcept;
    ~Descriptor();
    int get() const noexcept { return fd_; }

   private:
    int fd_ = -1;
  };
  struct Shard {
    std::string path;
    Descriptor fd;
    std::uint64_t bytes = 0;
  };
  std::filesystem::path dir_;
  SampleSpec spec_;
  bool variable_ = false;
  std::int64_t num_classes_ = 0;
  std::vector<Entry> entries_;
  std::vector<Shard> shards_;
};

struct RecordWriterOptions {
  SampleSpec spec;        // fixed: every record is exactly spec.bytes(); variable: at most that
  bool variable = false;  // variable needs a 1-D uint8 spec: {max_bytes}
  std::uint64_t shard_bytes = std::uint64_t{256} << 20;  // a shard closes before passing this
  std::int64_t num_classes = 0;  // 0: 1 + the largest label written; else labels lie below it
};

// Not thread-safe: one writing thread. Writes shards as records arrive and the index last (to a
// temporary name, then renamed), so an interrupted write leaves a directory that does not open.
class RecordWriter {
 public:
  // Creates `dir` if needed. Throws DatasetError when it already holds a records index or shard,
  // or the options are bad (naming the option), std::runtime_error on I/O errors (naming the file).
  RecordWriter(std::filesystem::path dir, RecordWriterOptions options);
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  // Throws std::invalid_argument when the payload size does not fit the spec, or a label outside
  // 0..num_classes-1 (only negative ones where num_classes is 0).
  void append(std::int64_t label, std::span<const std::byte> payload);
  // Closes the last shard and writes the index. Nothing may be appended afterwards.
  void finish();

  std::uint64_t records() const noexcept;
  std::uint32_t shards() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct MakeRecordsOptions {
  std::filesystem::path out;
  std::uint64_t count = 0;
  std::uint64_t sample_bytes = 0;
  std::uint64_t shard_bytes = std::uint64_t{256} << 20;
  bool variable = false;  // lengths uniform in [ceil(sample_bytes / 2), sample_bytes]
  std::int64_t classes = 10;
  std::uint64_t seed = 0;
};

struct MakeRecordsResult {
  std::uint64_t records = 0;
  std::uint32_t shards = 0;
  std::uint64_t bytes = 0;  // shards and index together
};

// `feedscope make-dataset records`: `count` records of pseudo-random bytes, labels uniform in
// [0, classes), all a pure function of `seed`. Throws DatasetError naming the option for a bad
// value (count, sample_bytes, shard_bytes, classes) and as RecordWriter does.
MakeRecordsResult make_records_dataset(const MakeRecordsOptions& options);

// The payload and label make_records_dataset writes for record `index`, for tests and checks.
std::vector<std::byte> made_record_payload(const MakeRecordsOptions& options, std::uint64_t index);
std::int64_t made_record_label(const MakeRecordsOptions& options, std::uint64_t index);

}  // namespace feedscope
