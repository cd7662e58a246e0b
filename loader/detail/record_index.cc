#include "loader/detail/record_index.h"

#include <cstdint>
#include <cstring>

namespace feedscope::detail {

DatasetError records_error(const std::filesystem::path& dir, const std::string& file,
                           const std::string& why) {
  return DatasetError("records:" + dir.string() + ": " + file + ": " + why);
}

namespace {

// An error about DIR/records.index, naming it.
struct IndexError {
  const std::filesystem::path& dir;
  std::string index_path;
  DatasetError operator()(const std::string& why) const { return records_error(dir, index_path, why); }
};

IndexHeader read_header(std::span<const char> index, const IndexError& fail) {
  IndexHeader h{};
  if (index.size() < sizeof h) throw fail("truncated: " + std::to_string(index.size()) + " bytes");
  std::memcpy(&h, index.data(), sizeof h);
  if (std::memcmp(h.magic, kIndexMagic, sizeof h.magic) != 0)
    throw fail("bad magic: not a feedscope records index");
  if (h.version != kRecordsVersion)
    throw fail("version " + std::to_string(h.version) + " is not supported; allowed: " +
               std::to_string(kRecordsVersion));
  if (header_crc(h) != h.header_crc) throw fail("header checksum mismatch");
  return h;
}

// The sample's dtype, shape and whether its records vary in length, into `out`; returns the
// bytes of a whole sample.
std::uint64_t read_sample_layout(const SampleLayout& l, RecordIndex& out, const IndexError& fail) {
  if (l.dtype > static_cast<std::uint32_t>(DType::float32) || l.ndim < 1 || l.ndim > kMaxDims)
    throw fail("bad sample layout (dtype " + std::to_string(l.dtype) + ", " +
               std::to_string(l.ndim) + " dimensions)");
  out.spec.dtype = static_cast<DType>(l.dtype);
  for (std::uint32_t i = 0; i < l.ndim; ++i) {
    if (l.shape[i] <= 0) throw fail("bad sample shape");
    out.spec.shape.push_back(l.shape[i]);
  }
  // A record's length is 32 bits, so no sample is longer (RecordWriter's limit). Checked before
  // SampleSpec::bytes() multiplies the dimensions, which would overflow.
  constexpr std::uint64_t kMaxRecordBytes = 0xFFFFFFFF;
  std::uint64_t sample_bytes = dtype_size(out.spec.dtype);
  for (const std::int64_t d : out.spec.shape) {
    if (static_cast<std::uint64_t>(d) > kMaxRecordBytes / sample_bytes)
      throw fail("bad sample shape " + out.spec.to_string() + ": over the 4 GiB record limit");
    sample_bytes *= static_cast<std::uint64_t>(d);
  }
  out.variable = (l.flags & kFlagVariable) != 0;
  return sample_bytes;
}

void check_counts(const IndexHeader& h, const IndexError& fail) {
  // RecordWriter never finishes an empty dataset; refusing one also keeps the copies below from
  // being handed an empty vector's null data().
  if (h.record_count == 0 || h.shard_count == 0)
    throw fail("holds " + std::to_string(h.record_count) + " records in " +
               std::to_string(h.shard_count) +
               " shards; a records dataset has 1 record and 1 shard at least");
  if (h.num_classes < 1)
    throw fail("declares " + std::to_string(h.num_classes) +
               " classes; labels lie in 0..classes-1, so a dataset has 1 class at least");
}

void check_size(std::size_t size, const IndexHeader& h, const IndexError& fail) {
  // Computed so that no product wraps: a record count of 2^61 + n must not pass for n.
  const std::uint64_t fixed_bytes = sizeof(IndexHeader) +
                                    std::uint64_t{h.shard_count} * sizeof(IndexShard) + sizeof(IndexFooter);
  const bool fits = h.record_count <= (UINT64_MAX - fixed_bytes) / sizeof(IndexEntry);
  const std::uint64_t expected = fits ? fixed_bytes + h.record_count * sizeof(IndexEntry) : 0;
  if (!fits || size != expected)
    throw fail("is " + std::to_string(size) + " bytes; its header (" +
               std::to_string(h.shard_count) + " shards, " + std::to_string(h.record_count) +
               " records) needs " + (fits ? std::to_string(expected) : "more than 2^64") +
               ": truncated or overwritten");
}

// The shard table and record entries, between the header and the footer, once the footer vouches
// for them.
std::span<const char> checked_body(std::span<const char> index, const IndexError& fail) {
  const char* body = index.data() + sizeof(IndexHeader);
  const std::size_t body_bytes = index.size() - sizeof(IndexHeader) - sizeof(IndexFooter);
  IndexFooter footer{};
  std::memcpy(&footer, body + body_bytes, sizeof footer);
  if (std::memcmp(footer.magic, kIndexEndMagic, sizeof footer.magic) != 0)
    throw fail("bad end magic: truncated or overwritten");
  if (crc32c(body, body_bytes) != footer.body_crc)
    throw fail("checksum mismatch in the shard table or record entries");
  return {body, body_bytes};
}

std::vector<IndexShard> read_shard_table(std::span<const char> body, const IndexHeader& h,
                                         const IndexError& fail) {
  std::vector<IndexShard> table(h.shard_count);
  std::memcpy(table.data(), body.data(), table.size() * sizeof(IndexShard));
  // Shards hold consecutive records from 0 to the record count: RecordDataset walks a shard's
  // entries by its range, so a range past the entries would read past them.
  std::uint64_t next = 0;
  for (std::size_t s = 0; s < table.size(); ++s) {
    const IndexShard& t = table[s];
    if (t.first_record != next)
      throw fail("shard table: shard " + std::to_string(s) + " starts at record " +
                 std::to_string(t.first_record) + "; shards hold consecutive records, so it must start at " +
                 std::to_string(next));
    if (t.record_count > h.record_count - next)
      throw fail("shard table: shard " + std::to_string(s) + " holds " + std::to_string(t.record_count) +
                 " records from record " + std::to_string(next) + ", past the index's " +
                 std::to_string(h.record_count));
    next += t.record_count;
  }
  if (next != h.record_count)
    throw fail("shard table: the shards hold " + std::to_string(next) + " records; the header says " +
               std::to_string(h.record_count));
  return table;
}

std::vector<IndexEntry> read_entries(std::span<const char> body, const IndexHeader& h) {
  std::vector<IndexEntry> entries(h.record_count);
  std::memcpy(entries.data(), body.data() + std::size_t{h.shard_count} * sizeof(IndexShard),
              entries.size() * sizeof(IndexEntry));
  return entries;
}

// Record i's entry: in its shard, its label among the classes, its length the sample's, its bytes
// inside the shard file.
void check_entry(const RecordIndex& index, std::size_t i, std::uint64_t sample_bytes,
                 const IndexError& fail) {
  const IndexHeader& h = index.header;
  const std::vector<IndexShard>& table = index.shards;
  const IndexEntry& e = index.entries[i];
  const std::string where = "record " + std::to_string(i);
  if (e.shard >= table.size() || i < table[e.shard].first_record ||
      i >= table[e.shard].first_record + table[e.shard].record_count)
    throw fail(where + " names shard " + std::to_string(e.shard) + ", which does not hold it");
  // The index is checksummed and each record's header must repeat its label, so a label out
  // of range is how the dataset was written, not a flipped bit: refused for the whole dataset
  // here, before any step, rather than by the loss on some later epoch.
  if (e.label < 0 || e.label >= h.num_classes)
    throw fail(where + " (" + (fail.dir / shard_file_name(e.shard)).string() + ") has label " +
               std::to_string(e.label) + ", outside 0.." + std::to_string(h.num_classes - 1) +
               " (the index's " + std::to_string(h.num_classes) + " classes)");
  if (index.variable ? e.length > sample_bytes : e.length != sample_bytes)
    throw fail(where + " is " + std::to_string(e.length) + " bytes; the sample (" +
               index.spec.to_string() + ") is " + std::to_string(sample_bytes) +
               (index.variable ? " at most" : ""));
  // Written so that no sum wraps: an offset near 2^64 must not pass for a small one.
  const std::uint64_t shard_bytes = table[e.shard].bytes;
  if (e.offset < sizeof(ShardHeader) || e.offset > shard_bytes ||
      shard_bytes - e.offset < sizeof(RecordHeader) + std::uint64_t{e.length})
    throw fail(where + " at byte " + std::to_string(e.offset) + " lies outside its shard of " +
               std::to_string(shard_bytes) + " bytes");
}

}  // namespace

RecordIndex parse_record_index(std::span<const char> index, const std::filesystem::path& dir) {
  const IndexError fail{dir, (dir / kIndexFileName).string()};
  RecordIndex out;
  out.header = read_header(index, fail);
  const IndexHeader& h = out.header;
  const std::uint64_t sample_bytes = read_sample_layout(h.layout, out, fail);
  check_counts(h, fail);
  check_size(index.size(), h, fail);
  const std::span<const char> body = checked_body(index, fail);
  out.shards = read_shard_table(body, h, fail);
  out.entries = read_entries(body, h);
  for (std::size_t i = 0; i < out.entries.size(); ++i) check_entry(out, i, sample_bytes, fail);
  return out;
}

}  // namespace feedscope::detail
