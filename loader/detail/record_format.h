#pragma once
// The on-disk layout of a records dataset (docs/records-format.md), shared by the writer and the
// reader. Little-endian, fixed-size structs read and written whole.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "loader/detail/crc32c.h"

namespace feedscope::detail {

static_assert(std::endian::native == std::endian::little,
              "the records format is little-endian and read by memcpy");

inline constexpr char kShardMagic[8] = {'F', 'S', 'R', 'E', 'C', 'S', 'H', 'D'};
inline constexpr char kIndexMagic[8] = {'F', 'S', 'R', 'E', 'C', 'I', 'D', 'X'};
inline constexpr char kIndexEndMagic[8] = {'F', 'S', 'R', 'E', 'C', 'E', 'N', 'D'};
inline constexpr std::uint32_t kRecordsVersion = 1;
inline constexpr std::uint32_t kFlagVariable = 1;
inline constexpr const char* kIndexFileName = "records.index";
inline constexpr int kMaxDims = 4;

// The dataset description both headers carry.
struct SampleLayout {
  std::uint32_t flags;
  std::uint32_t dtype;  // DType's value
  std::uint32_t ndim;
  std::uint32_t reserved;
  std::int64_t shape[kMaxDims];  // unused dimensions are 0
};
static_assert(sizeof(SampleLayout) == 48);

struct ShardHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t shard;
  std::uint64_t first_record;
  std::uint64_t record_count;
  SampleLayout layout;
  std::uint32_t reserved;
  std::uint32_t header_crc;  // CRC32C of the bytes before it
};
static_assert(sizeof(ShardHeader) == 88);

struct RecordHeader {
  std::uint64_t record;  // global record number
  std::int64_t label;
  std::uint32_t length;  // payload bytes
  std::uint32_t crc;     // CRC32C of the 20 bytes before it, continued over the payload
};
static_assert(sizeof(RecordHeader) == 24);
inline constexpr std::size_t kRecordCrcPrefix = 20;

struct IndexHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t shard_count;
  std::uint64_t record_count;
  std::int64_t num_classes;
  SampleLayout layout;
  std::uint32_t reserved;
  std::uint32_t header_crc;
};
static_assert(sizeof(IndexHeader) == 88);

struct IndexShard {
  std::uint64_t bytes;  // the shard file's exact size
  std::uint64_t first_record;
  std::uint64_t record_count;
};
static_assert(sizeof(IndexShard) == 24);

struct IndexEntry {
  std::uint64_t offset;  // of the RecordHeader within its shard
  std::uint32_t shard;
  std::uint32_t length;
  std::int64_t label;
};
static_assert(sizeof(IndexEntry) == 24);

struct IndexFooter {
  std::uint32_t body_crc;  // CRC32C of the shard table and the entries
  std::uint32_t reserved;
  char magic[8];
};
static_assert(sizeof(IndexFooter) == 16);

template <typename Header>
std::uint32_t header_crc(const Header& h) {
  return crc32c(&h, offsetof(Header, header_crc));
}

inline std::string shard_file_name(std::uint32_t shard) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%05u.rec", shard);
  return name;
}

}  // namespace feedscope::detail
