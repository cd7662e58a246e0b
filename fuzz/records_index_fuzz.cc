// libFuzzer target: the records index parser (loader/detail/record_index.h) that RecordDataset
// runs before opening any shard. Each input is tried twice: as it is, and with both CRC32Cs
// recomputed, since random bytes almost never pass the checksums and the checks behind them
// (sizes, shard table, entries) would go untested. Bad input must be a DatasetError; an index
// that parses must be safe for what RecordDataset does with it, which the checks below assert.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "loader/detail/record_index.h"

namespace {

using namespace feedscope;
using namespace feedscope::detail;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "records index accepted, but %s\n", what);
  std::abort();
}

void parse(std::span<const char> bytes) {
  RecordIndex index;
  try {
    index = parse_record_index(bytes, "fuzz-records");
  } catch (const DatasetError&) {
    return;
  }
  const std::uint64_t sample_bytes = index.spec.bytes();
  // RecordDataset reads entries by shard range (naming the first record past a truncation).
  std::uint64_t next = 0;
  for (const IndexShard& s : index.shards) {
    if (s.first_record != next || s.record_count > index.entries.size() - next)
      broken("a shard's record range is not the next records of the index");
    next += s.record_count;
  }
  if (next != index.entries.size()) broken("the shards do not hold every record");
  for (const IndexEntry& e : index.entries) {
    if (e.shard >= index.shards.size()) broken("an entry names a shard the table lacks");
    const std::uint64_t shard_bytes = index.shards[e.shard].bytes;
    if (e.offset > shard_bytes || shard_bytes - e.offset < sizeof(RecordHeader) + e.length)
      broken("an entry lies outside its shard");
    if (e.length > sample_bytes) broken("an entry is longer than the sample");
    if (e.label < 0 || e.label >= index.header.num_classes)
      broken("an entry's label is outside 0..classes-1");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const char> bytes(reinterpret_cast<const char*>(data), size);
  parse(bytes);
  if (size < sizeof(IndexHeader) + sizeof(IndexFooter)) return 0;
  std::vector<char> fixed(bytes.begin(), bytes.end());
  IndexHeader h;
  std::memcpy(&h, fixed.data(), sizeof h);
  h.header_crc = header_crc(h);
  std::memcpy(fixed.data(), &h, sizeof h);
  const std::size_t body_bytes = size - sizeof(IndexHeader) - sizeof(IndexFooter);
  const std::uint32_t body_crc = crc32c(fixed.data() + sizeof(IndexHeader), body_bytes);
  std::memcpy(fixed.data() + sizeof(IndexHeader) + body_bytes + offsetof(IndexFooter, body_crc),
              &body_crc, sizeof body_crc);
  parse(fixed);
  return 0;
}
