#pragma once
// Reading a records index (docs/records-format.md) from its bytes alone: everything RecordDataset
// checks before it opens a shard, apart from the file I/O so that tests and the fuzzer
// (fuzz/records_index_fuzz.cc) can feed it any bytes.
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "loader/dataset.h"
#include "loader/detail/record_format.h"

namespace feedscope::detail {

struct RecordIndex {
  IndexHeader header{};
  SampleSpec spec;
  bool variable = false;
  std::vector<IndexShard> shards;
  std::vector<IndexEntry> entries;
};

// "records:DIR: FILE: why", the form of every error opening a records dataset.
DatasetError records_error(const std::filesystem::path& dir, const std::string& file,
                           const std::string& why);

// Parses `index`, the bytes of DIR/records.index, and checks what the index says of itself: magic,
// version, checksums, the sample layout, its size against its counts, the shard table (consecutive
// records from 0), every entry against its shard and every label against the number of classes.
// Throws DatasetError naming the index file (records_error) for the first problem.
RecordIndex parse_record_index(std::span<const char> index, const std::filesystem::path& dir);

}  // namespace feedscope::detail
