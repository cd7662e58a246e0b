#include "loader/record_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "loader/batch_loader.h"
#include "loader/detail/record_format.h"
#include "tests/loader/index_dataset.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

using testing::IndexDataset;
using testing::TempDir;
namespace fs = std::filesystem;

std::span<const std::byte> as_bytes(const std::vector<std::uint64_t>& words) {
  return std::as_bytes(std::span(words));
}

// 100 fixed records of 32 bytes (the IndexDataset encoding, read as 2x4 float32 bits) in shards
// of at most 600 bytes: 9 records per shard, 12 shards.
void write_fixed(const fs::path& dir, std::size_t count = 100) {
  RecordWriterOptions o;
  o.spec = SampleSpec{{2, 4}, DType::float32};
  o.shard_bytes = 600;
  RecordWriter writer(dir, o);
  for (std::size_t i = 0; i < count; ++i)
    writer.append(IndexDataset::label_of(i), as_bytes(IndexDataset::expected(i)));
  writer.finish();
}

std::vector<std::byte> variable_payload(std::size_t i) {
  std::vector<std::byte> p(1 + (i * 7) % 64);
  for (std::size_t k = 0; k < p.size(); ++k) p[k] = static_cast<std::byte>((i * 31 + k) & 0xff);
  return p;
}

void write_variable(const fs::path& dir, std::size_t count) {
  RecordWriterOptions o;
  o.spec = SampleSpec{{64}, DType::uint8};
  o.variable = true;
  o.shard_bytes = 1000;
  o.num_classes = 3;
  RecordWriter writer(dir, o);
  for (std::size_t i = 0; i < count; ++i)
    writer.append(static_cast<std::int64_t>(i % 3), variable_payload(i));
  writer.finish();
}

void flip_byte(const fs::path& file, std::uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x40);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
  ASSERT_TRUE(f.good()) << file;
}

std::string open_error(const fs::path& dir) {
  try {
    RecordDataset dataset(dir);
  } catch (const DatasetError& e) {
    return e.what();
  }
  ADD_FAILURE() << "opened a broken dataset in " << dir;
  return "";
}

std::string load_error(const RecordDataset& dataset, std::size_t index) {
  std::vector<std::byte> out(dataset.spec().bytes());
  LoadContext ctx;
  try {
    dataset.load(index, out, ctx);
  } catch (const SampleError& e) {
    EXPECT_EQ(e.index(), index);
    return e.what();
  }
  ADD_FAILURE() << "loaded a broken record " << index;
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The parts of DIR/records.index, rewritten by edit_index with both checksums made right again: an
// index a buggy writer could produce, which only the structural checks can refuse.
struct IndexParts {
  detail::IndexHeader header;
  std::vector<detail::IndexShard> shards;
  std::vector<detail::IndexEntry> entries;
};

void edit_index(const fs::path& dir, const std::function<void(IndexParts&)>& edit) {
  const fs::path path = dir / detail::kIndexFileName;
  std::vector<char> bytes(fs::file_size(path));
  std::ifstream(path, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  IndexParts p;
  std::memcpy(&p.header, bytes.data(), sizeof p.header);
  p.shards.resize(p.header.shard_count);
  p.entries.resize(p.header.record_count);
  const std::size_t shard_bytes = p.shards.size() * sizeof(detail::IndexShard);
  const std::size_t entry_bytes = p.entries.size() * sizeof(detail::IndexEntry);
  char* body = bytes.data() + sizeof p.header;
  std::memcpy(p.shards.data(), body, shard_bytes);
  std::memcpy(p.entries.data(), body + shard_bytes, entry_bytes);
  edit(p);
  p.header.header_crc = detail::header_crc(p.header);
  std::memcpy(bytes.data(), &p.header, sizeof p.header);
  std::memcpy(body, p.shards.data(), shard_bytes);
  std::memcpy(body + shard_bytes, p.entries.data(), entry_bytes);
  const std::uint32_t body_crc = detail::crc32c(body, shard_bytes + entry_bytes);
  std::memcpy(body + shard_bytes + entry_bytes, &body_crc, sizeof body_crc);  // footer.body_crc
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(RecordDatasetTest, FixedRecordsRoundTripAcrossShards) {
  TempDir dir;
  write_fixed(dir.path());
  RecordDataset dataset(dir.path());
  EXPECT_EQ(dataset.size(), 100u);
  EXPECT_EQ(dataset.shard_count(), 12u);
  EXPECT_FALSE(dataset.variable());
  EXPECT_EQ(dataset.spec().to_string(), "2x4 float32");
  EXPECT_EQ(dataset.num_classes(), 5);
  std::vector<std::byte> out(32);
  LoadContext ctx;
  for (std::size_t i = 0; i < dataset.size(); ++i) {
    EXPECT_EQ(dataset.load(i, out, ctx), IndexDataset::label_of(i));
    EXPECT_EQ(IndexDataset::decode(out.data()), i);
  }
  EXPECT_EQ(dataset.record_shard(99), 11u);
}

TEST(RecordDatasetTest, VariableRecordsAreZeroPaddedToTheSample) {
  TempDir dir;
  write_variable(dir.path(), 120);
  RecordDataset dataset(dir.path());
  ASSERT_TRUE(dataset.variable());
  EXPECT_GT(dataset.shard_count(), 3u);
  EXPECT_EQ(dataset.num_classes(), 3);
  std::vector<std::byte> out(64);
  LoadContext ctx;
  for (std::size_t i = 0; i < dataset.size(); ++i) {
    std::fill(out.begin(), out.end(), std::byte{0xAA});  // what a reused slab holds
    EXPECT_EQ(dataset.load(i, out, ctx), static_cast<std::int64_t>(i % 3));
    const std::vector<std::byte> payload = variable_payload(i);
    ASSERT_EQ(dataset.record_bytes(i), payload.size());
    EXPECT_TRUE(std::equal(payload.begin(), payload.end(), out.begin())) << "record " << i;
    EXPECT_TRUE(std::all_of(out.begin() + static_cast<std::ptrdiff_t>(payload.size()), out.end(),
                            [](std::byte b) { return b == std::byte{0}; }))
        << "record " << i << " tail not zeroed";
  }
}

TEST(RecordDatasetTest, RandomAccessReadsOnlyThatRecord) {
  TempDir dir;
  write_fixed(dir.path());
  std::vector<std::pair<fs::path, std::uint64_t>> where;
  {
    RecordDataset dataset(dir.path());
    for (std::size_t i = 0; i < dataset.size(); ++i)
      where.emplace_back(dataset.shard_path(dataset.record_shard(i)), dataset.record_offset(i));
  }
  // Corrupt the payload of every record but 57 and 3: a reader that scanned would trip.
  for (std::size_t i = 0; i < where.size(); ++i)
    if (i != 57 && i != 3) flip_byte(where[i].first, where[i].second + 24 + 5);
  RecordDataset dataset(dir.path());
  std::vector<std::byte> out(32);
  LoadContext ctx;
  for (std::size_t i : {57u, 3u, 57u}) {
    EXPECT_EQ(dataset.load(i, out, ctx), IndexDataset::label_of(i));
    EXPECT_EQ(IndexDataset::decode(out.data()), i);
  }
  EXPECT_TRUE(contains(load_error(dataset, 58), "checksum mismatch"));
}

TEST(RecordDatasetTest, FlippedPayloadByteIsAChecksumErrorNamingTheShard) {
  TempDir dir;
  write_fixed(dir.path());
  fs::path shard;
  std::uint64_t offset = 0;
  {
    RecordDataset dataset(dir.path());
    shard = dataset.shard_path(dataset.record_shard(40));
    offset = dataset.record_offset(40);
  }
  flip_byte(shard, offset + 24 + 31);  // the payload's last byte
  RecordDataset dataset(dir.path());
  const std::string what = load_error(dataset, 40);
  EXPECT_TRUE(contains(what, "checksum mismatch")) << what;
  EXPECT_TRUE(contains(what, shard.string())) << what;
  EXPECT_TRUE(contains(what, "record 40")) << what;
  std::vector<std::byte> out(32);
  LoadContext ctx;
  EXPECT_EQ(dataset.load(41, out, ctx), IndexDataset::label_of(41)) << "its neighbour is fine";
}

TEST(RecordDatasetTest, FlippedRecordHeaderDisagreesWithTheIndex) {
  TempDir dir;
  write_fixed(dir.path());
  fs::path shard;
  std::uint64_t offset = 0;
  {
    RecordDataset dataset(dir.path());
    shard = dataset.shard_path(dataset.record_shard(12));
    offset = dataset.record_offset(12);
  }
  flip_byte(shard, offset + 8);  // the label
  RecordDataset dataset(dir.path());
  const std::string what = load_error(dataset, 12);
  EXPECT_TRUE(contains(what, "disagrees with the index")) << what;
  EXPECT_TRUE(contains(what, shard.string())) << what;
}

TEST(RecordDatasetTest, TruncatedShardFailsAtOpenNamingTheFileAndRecord) {
  TempDir dir;
  write_fixed(dir.path());
  const fs::path shard = dir / "shard-00004.rec";
  fs::resize_file(shard, fs::file_size(shard) - 10);
  const std::string what = open_error(dir.path());
  EXPECT_TRUE(contains(what, shard.string())) << what;
  EXPECT_TRUE(contains(what, "truncated: record 44")) << what;  // shard 4 holds 36..44
}

TEST(RecordDatasetTest, ShardTruncatedAfterOpenIsASampleErrorNamingTheFile) {
  TempDir dir;
  write_fixed(dir.path());
  RecordDataset dataset(dir.path());
  const fs::path shard = dataset.shard_path(2);
  fs::resize_file(shard, dataset.record_offset(20) + 30);  // records 18..26: cut inside 20
  const std::string what = load_error(dataset, 20);
  EXPECT_TRUE(contains(what, "truncated shard")) << what;
  EXPECT_TRUE(contains(what, shard.string())) << what;
  std::vector<std::byte> out(32);
  LoadContext ctx;
  EXPECT_EQ(IndexDataset::decode((dataset.load(19, out, ctx), out.data())), 19u);
}

TEST(RecordDatasetTest, BadMagicNamesTheFile) {
  TempDir dir;
  write_fixed(dir.path());
  flip_byte(dir / "shard-00003.rec", 0);
  std::string what = open_error(dir.path());
  EXPECT_TRUE(contains(what, (dir / "shard-00003.rec").string())) << what;
  EXPECT_TRUE(contains(what, "bad magic")) << what;
  flip_byte(dir / "shard-00003.rec", 0);
  flip_byte(dir / "records.index", 1);
  what = open_error(dir.path());
  EXPECT_TRUE(contains(what, (dir / "records.index").string())) << what;
  EXPECT_TRUE(contains(what, "bad magic")) << what;
}

TEST(RecordDatasetTest, CorruptIndexOrShardHeaderIsRefusedAtOpen) {
  TempDir dir;
  write_fixed(dir.path());
  const auto index_bytes = fs::file_size(dir / "records.index");
  flip_byte(dir / "records.index", index_bytes - 40);  // inside the record entries
  std::string what = open_error(dir.path());
  EXPECT_TRUE(contains(what, "checksum mismatch in the shard table or record entries")) << what;
  flip_byte(dir / "records.index", index_bytes - 40);
  flip_byte(dir / "shard-00001.rec", 30);  // the shard's record count
  what = open_error(dir.path());
  EXPECT_TRUE(contains(what, "shard-00001.rec: header checksum mismatch")) << what;
}

// Found by fuzz/records_index_fuzz.cc: a shard range past the entries passed the checks, and
// naming a truncated shard's first missing record then read past the entries.
TEST(RecordDatasetTest, ShardTableMustHoldConsecutiveRecords) {
  TempDir dir;
  write_fixed(dir.path());  // shard 3 holds records 27..35, shard 11 record 99 alone
  edit_index(dir.path(), [](IndexParts& p) {
    p.shards[11].record_count = 1000;
    p.shards[11].bytes += 100;  // so the shard file looks truncated
  });
  std::string what = open_error(dir.path());
  EXPECT_TRUE(contains(what, "records.index: shard table: shard 11 holds 1000 records from record 99, "
                             "past the index's 100")) << what;
  edit_index(dir.path(), [](IndexParts& p) {
    p.shards[11].record_count = 1;
    p.shards[11].bytes -= 100;
    p.shards[3].first_record = 26;
  });
  what = open_error(dir.path());
  EXPECT_TRUE(contains(what, "shard 3 starts at record 26; shards hold consecutive records, so it "
                             "must start at 27")) << what;
  edit_index(dir.path(), [](IndexParts& p) {
    p.shards[3].first_record = 27;
    p.shards[11].record_count = 0;
  });
  what = open_error(dir.path());
  EXPECT_TRUE(contains(what, "the shards hold 99 records; the header says 100")) << what;
  edit_index(dir.path(), [](IndexParts& p) { p.shards[11].record_count = 1; });
  EXPECT_NO_THROW(RecordDataset{dir.path()});
}

// Labels are in the index: one the classes cannot hold is refused at open, naming the record,
// its shard file and the label, whatever the bad-sample policy.
TEST(RecordDatasetTest, LabelOutsideTheClassesIsRefusedAtOpen) {
  TempDir dir;
  write_variable(dir.path(), 40);  // 3 classes; shards of 1000 bytes
  const auto shard_of = [&](std::uint32_t s) { return (dir / detail::shard_file_name(s)).string(); };
  std::uint32_t shard = 0;
  edit_index(dir.path(), [&](IndexParts& p) {
    p.entries[17].label = 3;
    shard = p.entries[17].shard;
  });
  std::string what = open_error(dir.path());
  EXPECT_TRUE(contains(what, "records.index: record 17 (" + shard_of(shard) +
                                 ") has label 3, outside 0..2 (the index's 3 classes)")) << what;
  edit_index(dir.path(), [](IndexParts& p) {
    p.entries[17].label = 2;
    p.entries[0].label = -1;
  });
  what = open_error(dir.path());
  EXPECT_TRUE(contains(what, "record 0 (" + shard_of(0) + ") has label -1, outside 0..2")) << what;
  edit_index(dir.path(), [](IndexParts& p) {
    p.entries[0].label = 0;
    p.header.num_classes = 0;
  });
  what = open_error(dir.path());
  EXPECT_TRUE(contains(what, "records.index: declares 0 classes; labels lie in 0..classes-1")) << what;
  edit_index(dir.path(), [](IndexParts& p) { p.header.num_classes = 3; });
  EXPECT_NO_THROW(RecordDataset{dir.path()});
}

// Found by fuzz/records_index_fuzz.cc: dimensions whose product overflows int64 reached
// SampleSpec::bytes(), undefined behaviour that let any byte count through.
TEST(RecordDatasetTest, SampleOverTheRecordLimitIsRefused) {
  TempDir dir;
  write_fixed(dir.path());  // 2x4 float32
  edit_index(dir.path(), [](IndexParts& p) {
    p.header.layout.shape[0] = std::int64_t{1} << 40;
    p.header.layout.shape[1] = std::int64_t{1} << 40;
  });
  std::string what = open_error(dir.path());
  EXPECT_TRUE(contains(what, "records.index: bad sample shape 1099511627776x1099511627776 float32: "
                             "over the 4 GiB record limit")) << what;
  edit_index(dir.path(), [](IndexParts& p) {
    p.header.layout.shape[0] = 1 << 30;  // 4 GiB of float32 exactly: one byte over
    p.header.layout.shape[1] = 1;
  });
  EXPECT_TRUE(contains(open_error(dir.path()), "over the 4 GiB record limit"));
}

// Found by fuzz/records_index_fuzz.cc: an entry offset near 2^64 wrapped the bounds check and
// passed, and every read of the record then failed (a pread at a negative offset).
TEST(RecordDatasetTest, EntryOffsetNearTwoToThe64IsOutsideItsShard) {
  TempDir dir;
  write_fixed(dir.path());
  edit_index(dir.path(), [](IndexParts& p) { p.entries[5].offset = ~std::uint64_t{0} - 20; });
  const std::string what = open_error(dir.path());
  EXPECT_TRUE(contains(what, "records.index: record 5 at byte 18446744073709551595 lies outside its "
                             "shard of")) << what;
}

// A record count of 2^61 + n made the index's expected size wrap to that of n records, and the
// open failed with std::length_error (the CLI's "runtime failure") instead of naming the index.
TEST(RecordDatasetTest, RecordCountThatWrapsTheIndexSizeIsRefused) {
  TempDir dir;
  write_fixed(dir.path());
  edit_index(dir.path(), [](IndexParts& p) {
    p.header.record_count += std::uint64_t{1} << 61;
    p.shards.back().record_count += std::uint64_t{1} << 61;
  });
  const std::string what = open_error(dir.path());
  EXPECT_TRUE(contains(what, "records.index: is 2792 bytes; its header (12 shards, "
                             "2305843009213694052 records) needs more than 2^64")) << what;
}

// Found by fuzz/records_index_fuzz.cc (UBSan: memcpy into an empty vector's null data()): an
// index of no shards and no records opened as an empty dataset, which RecordWriter never writes.
TEST(RecordDatasetTest, IndexWithoutRecordsIsRefused) {
  TempDir dir;
  detail::IndexHeader h{};
  std::memcpy(h.magic, detail::kIndexMagic, sizeof h.magic);
  h.version = detail::kRecordsVersion;
  h.layout.ndim = 1;
  h.layout.shape[0] = 16;
  h.header_crc = detail::header_crc(h);
  detail::IndexFooter footer{};
  footer.body_crc = detail::crc32c(&h, 0);
  std::memcpy(footer.magic, detail::kIndexEndMagic, sizeof footer.magic);
  std::ofstream out(dir / detail::kIndexFileName, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&h), sizeof h);
  out.write(reinterpret_cast<const char*>(&footer), sizeof footer);
  out.close();
  const std::string what = open_error(dir.path());
  EXPECT_TRUE(contains(what, "records.index: holds 0 records in 0 shards; a records dataset has 1 "
                             "record and 1 shard at least")) << what;
}

TEST(RecordDatasetTest, MissingIndexOrShardNamesTheFile) {
  TempDir dir;
  write_fixed(dir.path());
  fs::remove(dir / "shard-00007.rec");
  const auto open_fds = [] {
    return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator());
  };
  const auto fds = open_fds();
  std::string what = open_error(dir.path());
  EXPECT_TRUE(contains(what, (dir / "shard-00007.rec").string())) << what;
  EXPECT_EQ(open_fds(), fds) << "shards 0..6 were opened before the failure and must be closed";
  fs::remove(dir / "records.index");
  what = open_error(dir.path());
  EXPECT_TRUE(contains(what, (dir / "records.index").string())) << what;
  EXPECT_TRUE(contains(what, "cannot open the index")) << what;
  EXPECT_TRUE(contains(open_error(dir / "nowhere"), "not a directory"));
}

TEST(RecordDatasetTest, LoadsThroughTheBatchLoaderAndSkipsACorruptRecord) {
  TempDir dir;
  write_fixed(dir.path());
  fs::path shard;
  {
    RecordDataset dataset(dir.path());
    shard = dataset.shard_path(dataset.record_shard(66));
    flip_byte(shard, dataset.record_offset(66) + 30);
  }
  auto dataset = std::make_shared<RecordDataset>(dir.path());
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 16;
  o.bad_sample = BadSamplePolicy::skip;
  o.max_bad_ratio = 0.05;
  SpanRegistry spans;
  BatchLoader loader(dataset, std::make_shared<RandomSampler>(100, 3), o, &spans);
  std::vector<int> seen(100);
  while (auto batch = loader.next())
    for (std::int64_t i = 0; i < batch->size; ++i) {
      const std::size_t index = IndexDataset::decode(batch->data + 32 * i);
      EXPECT_EQ(batch->labels[i], IndexDataset::label_of(index));
      ++seen[index];
    }
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i == 66 ? 0 : 1) << i;
  const DataErrors errors = loader.data_errors();
  ASSERT_EQ(errors.examples.size(), 1u);
  EXPECT_EQ(errors.examples[0].index, 66u);
  EXPECT_TRUE(contains(errors.examples[0].source, shard.string()));
  spans.collect();
  std::map<Stage, int> stages;
  for (const Span& s : spans.spans()) ++stages[s.stage];
  EXPECT_EQ(stages[Stage::read], 100);
  EXPECT_EQ(stages[Stage::decode], 100);
}

std::size_t resident_pages(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  ::fstat(fd, &st);
  void* map = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> in_core(static_cast<std::size_t>((st.st_size + page - 1) / page));
  ::mincore(map, static_cast<std::size_t>(st.st_size), in_core.data());
  ::munmap(map, static_cast<std::size_t>(st.st_size));
  return static_cast<std::size_t>(std::count_if(in_core.begin(), in_core.end(),
                                                [](unsigned char c) { return c & 1; }));
}

TEST(RecordDatasetTest, EvictPageCacheDropsTheShardsFromMemory) {
  TempDir dir;
  RecordWriterOptions w;
  w.spec = SampleSpec{{4096}, DType::uint8};
  w.shard_bytes = 1 << 20;
  {
    RecordWriter writer(dir.path(), w);
    const std::vector<std::byte> payload(4096, std::byte{7});
    for (int i = 0; i < 512; ++i) writer.append(0, payload);
    writer.finish();
  }
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    // Dirty pages cannot be dropped; make them clean first.
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    ::fsync(fd);
    ::close(fd);
  }
  RecordDataset dataset(dir.path());
  std::vector<std::byte> out(4096);
  LoadContext ctx;
  for (std::size_t i = 0; i < dataset.size(); ++i) dataset.load(i, out, ctx);
  std::size_t before = 0;
  for (std::size_t s = 0; s < dataset.shard_count(); ++s) before += resident_pages(dataset.shard_path(s));
  if (before == 0) GTEST_SKIP() << "this file system keeps no page cache for the shards";
  EXPECT_EQ(dataset.evict_page_cache(), dataset.total_bytes());
  std::size_t after = 0;
  for (std::size_t s = 0; s < dataset.shard_count(); ++s) after += resident_pages(dataset.shard_path(s));
  EXPECT_EQ(after, 0u) << before << " pages were resident before";
}

// Shards changed under a running loader, between epochs: one cut just before a record starts (a
// read at or past the end), one cut inside a record (a short read), one removed (its descriptor
// stays open, so it keeps being read). Records are read with preadv, never mapped: a shrunken
// shard is an error naming the file and record, never a SIGBUS or a short read taken as data.
class ShardsChangedBetweenEpochsTest : public ::testing::TestWithParam<BadSamplePolicy> {};

TEST_P(ShardsChangedBetweenEpochsTest, FailNamesTheShardAndSkipCountsEveryLostRecord) {
  TempDir dir;
  write_fixed(dir.path());
  auto dataset = std::make_shared<RecordDataset>(dir.path());
  LoaderOptions o;
  o.num_workers = 2;
  o.batch_size = 16;
  o.bad_sample = GetParam();
  o.max_bad_ratio = 1.0;
  BatchLoader loader(dataset, std::make_shared<SequentialSampler>(100), o);
  const auto deliver_epoch = [&](std::set<std::size_t>& seen) {
    while (auto batch = loader.next())
      for (std::int64_t i = 0; i < batch->size; ++i) {
        const std::size_t index = IndexDataset::decode(batch->data + 32 * i);
        ASSERT_EQ(batch->labels[i], IndexDataset::label_of(index)) << "record " << index;
        EXPECT_TRUE(seen.insert(index).second) << "record " << index << " came twice";
      }
  };
  std::set<std::size_t> first;
  deliver_epoch(first);
  ASSERT_EQ(first.size(), 100u);
  ASSERT_EQ(loader.data_errors().bad, 0u);

  // Shard 2 holds records 18..26, shard 5 45..53, shard 7 63..71.
  const fs::path cut_before = dataset->shard_path(2), cut_inside = dataset->shard_path(5);
  fs::resize_file(cut_before, dataset->record_offset(18));
  fs::resize_file(cut_inside, dataset->record_offset(49) + 20);
  fs::remove(dataset->shard_path(7));
  std::set<std::size_t> lost;
  for (std::size_t i = 18; i <= 26; ++i) lost.insert(i);
  for (std::size_t i = 49; i <= 53; ++i) lost.insert(i);

  loader.begin_epoch(1);
  if (GetParam() == BadSamplePolicy::fail) {
    try {
      std::set<std::size_t> seen;
      deliver_epoch(seen);
      FAIL() << "an epoch over a truncated shard passed the fail policy";
    } catch (const SampleError& e) {
      EXPECT_EQ(e.index(), 18u);
      EXPECT_EQ(e.source(), cut_before.string() + " record 18 at byte " +
                                std::to_string(dataset->record_offset(18)));
      EXPECT_TRUE(contains(e.what(), "truncated shard")) << e.what();
      EXPECT_TRUE(contains(e.what(), "the file is now " + std::to_string(dataset->record_offset(18)) +
                                         " bytes")) << e.what();
    }
    return;
  }
  std::set<std::size_t> second;
  deliver_epoch(second);
  for (std::size_t i = 0; i < 100; ++i)
    EXPECT_EQ(second.count(i), lost.count(i) ? 0u : 1u) << "record " << i;
  const DataErrors errors = loader.data_errors();
  EXPECT_EQ(errors.bad, lost.size());
  EXPECT_EQ(errors.attempted, 200u);
  ASSERT_EQ(errors.examples.size(), 10u) << "the first 10 distinct bad records are kept";
  EXPECT_EQ(errors.examples[0].index, 18u);
  EXPECT_TRUE(contains(errors.examples[0].source, cut_before.string()));
  EXPECT_TRUE(contains(errors.examples[9].source, cut_inside.string()));
  EXPECT_TRUE(contains(errors.examples[9].message, "truncated shard")) << errors.examples[9].message;
}

INSTANTIATE_TEST_SUITE_P(Policies, ShardsChangedBetweenEpochsTest,
                         ::testing::Values(BadSamplePolicy::fail, BadSamplePolicy::skip),
                         [](const auto& info) {
                           return info.param == BadSamplePolicy::fail ? "fail" : "skip";
                         });

}  // namespace
}  // namespace feedscope
