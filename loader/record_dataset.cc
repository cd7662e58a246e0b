#include "loader/record_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "loader/detail/record_format.h"
#include "loader/detail/record_index.h"

namespace feedscope {

namespace fs = std::filesystem;
using namespace detail;

namespace {

std::string errno_text(int err) { return std::strerror(err); }

std::string hex32(std::uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

// Reads exactly `bytes` at `offset`; false at end of file.
bool pread_all(int fd, void* data, std::size_t bytes, std::uint64_t offset, std::string& error) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = errno_text(errno);
      return false;
    }
    if (n == 0) {
      error = "unexpected end of file";
      return false;
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return true;
}

SampleLayout layout_of(const SampleSpec& spec, bool variable) {
  SampleLayout l{};
  l.flags = variable ? kFlagVariable : 0;
  l.dtype = static_cast<std::uint32_t>(spec.dtype);
  l.ndim = static_cast<std::uint32_t>(spec.shape.size());
  for (std::size_t i = 0; i < spec.shape.size(); ++i) l.shape[i] = spec.shape[i];
  return l;
}

bool same_layout(const SampleLayout& a, const SampleLayout& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

// ---- Reader ----------------------------------------------------------------------------------

RecordDataset::RecordDataset(fs::path dir) : dir_(std::move(dir)) {
  const std::string index_path = (dir_ / kIndexFileName).string();
  const auto fail = [&](const std::string& file, const std::string& why) {
    return records_error(dir_, file, why);
  };
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) throw fail(dir_.string(), "not a directory");

  const int index_fd = ::open(index_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (index_fd < 0)
    throw fail(index_path, "cannot open the index (" + errno_text(errno) +
                               "); a dataset written to the end has one");
  std::vector<char> index;
  {
    struct stat st {};
    std::string error;
    const bool ok = ::fstat(index_fd, &st) == 0 &&
                    (index.resize(static_cast<std::size_t>(st.st_size)),
                     pread_all(index_fd, index.data(), index.size(), 0, error));
    ::close(index_fd);
    if (!ok) throw fail(index_path, "cannot read: " + error);
  }
  RecordIndex parsed = parse_record_index(index, dir_);
  const IndexHeader& h = parsed.header;
  spec_ = std::move(parsed.spec);
  variable_ = parsed.variable;
  num_classes_ = h.num_classes;
  entries_ = std::move(parsed.entries);
  const std::vector<IndexShard>& table = parsed.shards;

  shards_.resize(table.size());
  for (std::uint32_t s = 0; s < table.size(); ++s) {
    Shard& shard = shards_[s];
    shard.path = (dir_ / shard_file_name(s)).string();
    shard.bytes = table[s].bytes;
    shard.fd = Descriptor(::open(shard.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (shard.fd.get() < 0) throw fail(shard.path, "cannot open (" + errno_text(errno) + ")");
    struct stat st {};
    if (::fstat(shard.fd.get(), &st) != 0) throw fail(shard.path, "cannot stat: " + errno_text(errno));
    if (static_cast<std::uint64_t>(st.st_size) != shard.bytes) {
      std::string why = "is " + std::to_string(st.st_size) + " bytes; the index expects " +
                        std::to_string(shard.bytes);
      if (static_cast<std::uint64_t>(st.st_size) < shard.bytes) {
        // Name the first record that lies past the end: the one a reader would trip on.
        for (std::uint64_t r = table[s].first_record;
             r < table[s].first_record + table[s].record_count; ++r) {
          const Entry& e = entries_[r];
          if (e.offset + sizeof(RecordHeader) + e.length > static_cast<std::uint64_t>(st.st_size)) {
            why += " (truncated: record " + std::to_string(r) + " at byte " +
                   std::to_string(e.offset) + " ends past the end of the file)";
            break;
          }
        }
      }
      throw fail(shard.path, why);
    }
    ShardHeader sh{};
    std::string error;
    if (!pread_all(shard.fd.get(), &sh, sizeof sh, 0, error))
      throw fail(shard.path, "cannot read the header: " + error);
    if (std::memcmp(sh.magic, kShardMagic, sizeof sh.magic) != 0)
      throw fail(shard.path, "bad magic: not a feedscope records shard");
    if (sh.version != kRecordsVersion)
      throw fail(shard.path, "version " + std::to_string(sh.version) + " is not supported");
    if (header_crc(sh) != sh.header_crc) throw fail(shard.path, "header checksum mismatch");
    if (sh.shard != s || sh.first_record != table[s].first_record ||
        sh.record_count != table[s].record_count || !same_layout(sh.layout, h.layout))
      throw fail(shard.path, "its header disagrees with " + index_path +
                                 " (shard number, records or sample layout): from another dataset?");
  }
}

RecordDataset::Descriptor& RecordDataset::Descriptor::operator=(Descriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

RecordDataset::Descriptor::~Descriptor() {
  if (fd_ >= 0) ::close(fd_);
}

std::int64_t RecordDataset::load(std::size_t index, std::span<std::byte> out,
                                 LoadContext& ctx) const {
  if (index >= entries_.size())
    throw SampleError(index, name(), "index out of range (size " + std::to_string(size()) + ")");
  const Entry& e = entries_[index];
  const Shard& shard = shards_[e.shard];
  if (out.size() < e.length) throw std::logic_error("records: output slot smaller than the sample");
  RecordHeader h{};
  {
    // One syscall: the header into the stack, the payload straight into the batch slab, so a
    // sample is never copied on its way from the page cache to the slab.
    ScopedSpan span(ctx.spans, ctx.role, Stage::read, ctx.batch);
    const std::size_t want = sizeof h + e.length;
    std::size_t got = 0;
    while (got < want) {
      // A short read resumes where it stopped.
      iovec v[2];
      int n = 0;
      if (got < sizeof h) {
        v[n++] = {reinterpret_cast<char*>(&h) + got, sizeof h - got};
        v[n++] = {out.data(), e.length};
      } else {
        v[n++] = {out.data() + (got - sizeof h), want - got};
      }
      const ssize_t r = ::preadv(shard.fd.get(), v, n, static_cast<off_t>(e.offset + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw SampleError(index, describe(index), "read failed: " + errno_text(errno));
      if (r == 0) {
        struct stat st {};
        const std::string now = ::fstat(shard.fd.get(), &st) == 0
                                    ? " (the file is now " + std::to_string(st.st_size) + " bytes)"
                                    : "";
        throw SampleError(index, describe(index),
                          "truncated shard: record of " + std::to_string(want) +
                              " bytes ends past the end of the file" + now);
      }
      got += static_cast<std::size_t>(r);
    }
  }
  {
    ScopedSpan span(ctx.spans, ctx.role, Stage::decode, ctx.batch);
    if (h.record != index || h.length != e.length || h.label != e.label)
      throw SampleError(index, describe(index),
                        "record header (record " + std::to_string(h.record) + ", " +
                            std::to_string(h.length) + " bytes, label " + std::to_string(h.label) +
                            ") disagrees with the index (record " + std::to_string(index) + ", " +
                            std::to_string(e.length) + " bytes, label " + std::to_string(e.label) +
                            "): corrupt header or mixed-up files");
    const std::uint32_t crc =
        crc32c(out.data(), e.length, crc32c(&h, kRecordCrcPrefix));
    if (crc != h.crc)
      throw SampleError(index, describe(index),
                        "checksum mismatch (stored " + hex32(h.crc) + ", computed " + hex32(crc) +
                            "): the record is corrupt");
  }
  if (e.length < out.size()) {
    ScopedSpan span(ctx.spans, ctx.role, Stage::collate, ctx.batch);
    std::memset(out.data() + e.length, 0, out.size() - e.length);
  }
  return e.label;
}

std::string RecordDataset::describe(std::size_t index) const {
  if (index >= entries_.size()) return name() + " record " + std::to_string(index);
  const Entry& e = entries_[index];
  return shards_[e.shard].path + " record " + std::to_string(index) + " at byte " +
         std::to_string(e.offset);
}

fs::path RecordDataset::shard_path(std::size_t shard) const { return shards_.at(shard).path; }

std::uint64_t RecordDataset::total_bytes() const noexcept {
  std::uint64_t total = 0;
  for (const Shard& s : shards_) total += s.bytes;
  return total;
}

std::uint64_t RecordDataset::evict_page_cache() const {
  std::uint64_t bytes = 0;
  for (const Shard& s : shards_) {
    drop_cached_pages(s.fd.get(), s.path);
    bytes += s.bytes;
  }
  return bytes;
}

// ---- Writer ----------------------------------------------------------------------------------

struct RecordWriter::State {
  fs::path dir;
  RecordWriterOptions options;
  SampleLayout layout{};
  std::uint64_t sample_bytes = 0;
  std::vector<IndexShard> table;
  std::vector<IndexEntry> entries;
  std::int64_t max_label = -1;
  bool finished = false;
  // The open shard.
  int fd = -1;
  std::string path;
  std::uint64_t offset = 0;  // bytes written to it, buffer included
  std::vector<char> buffer;  // batched writes: one syscall per few MiB, not per record

  static constexpr std::size_t kBuffer = std::size_t{4} << 20;

  void flush() {
    write_all(fd, buffer.data(), buffer.size(), path);
    buffer.clear();
  }
  void put(const void* data, std::size_t bytes) {
    if (buffer.size() + bytes > kBuffer) flush();
    if (bytes > kBuffer) {
      write_all(fd, data, bytes, path);
    } else {
      const auto* p = static_cast<const char*>(data);
      buffer.insert(buffer.end(), p, p + bytes);
    }
    offset += bytes;
  }
  void open_shard() {
    const auto number = static_cast<std::uint32_t>(table.size());
    path = (dir / shard_file_name(number)).string();
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error(path + ": cannot create: " + errno_text(errno));
    table.push_back(IndexShard{0, entries.size(), 0});
    offset = 0;
    ShardHeader placeholder{};  // rewritten with the record count when the shard closes
    put(&placeholder, sizeof placeholder);
  }
  void close_shard() {
    if (fd < 0) return;
    flush();
    IndexShard& t = table.back();
    t.bytes = offset;
    ShardHeader h{};
    std::memcpy(h.magic, kShardMagic, sizeof h.magic);
    h.version = kRecordsVersion;
    h.shard = static_cast<std::uint32_t>(table.size() - 1);
    h.first_record = t.first_record;
    h.record_count = t.record_count;
    h.layout = layout;
    h.header_crc = header_crc(h);
    const bool ok = ::pwrite(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h);
    const int err = errno;
    const bool closed = ::close(fd) == 0;
    fd = -1;
    if (!ok || !closed) throw std::runtime_error(path + ": cannot finish the shard: " + errno_text(err));
  }
};

RecordWriter::RecordWriter(fs::path dir, RecordWriterOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  const SampleSpec& spec = options.spec;
  if (spec.shape.empty() || spec.shape.size() > kMaxDims ||
      std::any_of(spec.shape.begin(), spec.shape.end(), [](std::int64_t d) { return d <= 0; }))
    throw DatasetError("records writer: sample shape '" + spec.to_string() +
                       "' is not allowed; allowed: 1 to 4 positive dimensions");
  if (spec.bytes() > 0xFFFFFFFFull)
    throw DatasetError("records writer: a sample of " + std::to_string(spec.bytes()) +
                       " bytes is over the 4 GiB record limit");
  if (options.variable && (spec.dtype != DType::uint8 || spec.shape.size() != 1))
    throw DatasetError("records writer: variable-size records need a 1-D uint8 sample {max_bytes}, "
                       "not " + spec.to_string());
  if (options.shard_bytes == 0)
    throw DatasetError("shard_bytes: 0 is not allowed; allowed: 1 or more");
  if (options.num_classes < 0)
    throw DatasetError("num_classes: " + std::to_string(options.num_classes) +
                       " is not allowed; allowed: 0 (1 + the largest label) or more");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir.string() + ": cannot create: " + ec.message());
  if (fs::exists(dir / kIndexFileName) || fs::exists(dir / shard_file_name(0)))
    throw DatasetError(dir.string() + ": already holds a records dataset; remove it first");
  s.dir = std::move(dir);
  s.options = std::move(options);
  s.layout = layout_of(s.options.spec, s.options.variable);
  s.sample_bytes = s.options.spec.bytes();
  s.buffer.reserve(State::kBuffer);
}

RecordWriter::~RecordWriter() {
  if (state_ && state_->fd >= 0) ::close(state_->fd);
}

void RecordWriter::append(std::int64_t label, std::span<const std::byte> payload) {
  State& s = *state_;
  if (s.finished) throw std::logic_error("records writer: append() after finish()");
  if (s.options.variable ? payload.size() > s.sample_bytes : payload.size() != s.sample_bytes)
    throw std::invalid_argument("records writer: a record of " + std::to_string(payload.size()) +
                                " bytes does not fit the sample (" + s.options.spec.to_string() +
                                ", " + std::to_string(s.sample_bytes) + " bytes" +
                                (s.options.variable ? " at most)" : ")"));
  if (label < 0)
    throw std::invalid_argument("records writer: label " + std::to_string(label) + " is negative");
  if (s.options.num_classes > 0 && label >= s.options.num_classes)
    throw std::invalid_argument("records writer: label " + std::to_string(label) +
                                " is outside 0.." + std::to_string(s.options.num_classes - 1) +
                                " (num_classes " + std::to_string(s.options.num_classes) + ")");
  const std::uint64_t record_bytes = sizeof(RecordHeader) + payload.size();
  if (s.fd < 0) {
    s.open_shard();
  } else if (s.offset + record_bytes > s.options.shard_bytes && s.table.back().record_count > 0) {
    s.close_shard();
    s.open_shard();
  }
  RecordHeader h{};
  h.record = s.entries.size();
  h.label = label;
  h.length = static_cast<std::uint32_t>(payload.size());
  h.crc = crc32c(payload.data(), payload.size(), crc32c(&h, kRecordCrcPrefix));
  s.entries.push_back(IndexEntry{s.offset, static_cast<std::uint32_t>(s.table.size() - 1),
                                 h.length, label});
  s.put(&h, sizeof h);
  s.put(payload.data(), payload.size());
  ++s.table.back().record_count;
  s.max_label = std::max(s.max_label, label);
}

void RecordWriter::finish() {
  State& s = *state_;
  if (s.finished) return;
  if (s.entries.empty()) throw std::logic_error("records writer: no record was appended");
  s.close_shard();
  s.finished = true;
  IndexHeader h{};
  std::memcpy(h.magic, kIndexMagic, sizeof h.magic);
  h.version = kRecordsVersion;
  h.shard_count = static_cast<std::uint32_t>(s.table.size());
  h.record_count = s.entries.size();
  h.num_classes = s.options.num_classes > 0 ? s.options.num_classes : s.max_label + 1;
  h.layout = s.layout;
  h.header_crc = header_crc(h);
  const std::size_t table_bytes = s.table.size() * sizeof(IndexShard);
  const std::size_t entry_bytes = s.entries.size() * sizeof(IndexEntry);
  IndexFooter footer{};
  footer.body_crc = crc32c(s.entries.data(), entry_bytes, crc32c(s.table.data(), table_bytes));
  std::memcpy(footer.magic, kIndexEndMagic, sizeof footer.magic);

  const std::string final_path = (s.dir / kIndexFileName).string();
  const std::string tmp = final_path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(tmp + ": cannot create: " + errno_text(errno));
  try {
    write_all(fd, &h, sizeof h, tmp);
    write_all(fd, s.table.data(), table_bytes, tmp);
    write_all(fd, s.entries.data(), entry_bytes, tmp);
    write_all(fd, &footer, sizeof footer, tmp);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw std::runtime_error(tmp + ": cannot close: " + errno_text(errno));
  if (::rename(tmp.c_str(), final_path.c_str()) != 0)
    throw std::runtime_error(tmp + ": cannot rename to " + final_path + ": " + errno_text(errno));
}

std::uint64_t RecordWriter::records() const noexcept { return state_->entries.size(); }
std::uint32_t RecordWriter::shards() const noexcept {
  return static_cast<std::uint32_t>(state_->table.size());
}

// ---- make-dataset records ----------------------------------------------------------------------

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One independent stream per record, so any record is reproducible alone.
std::uint64_t record_stream(const MakeRecordsOptions& o, std::uint64_t index) {
  std::uint64_t state = o.seed * 0xD1B54A32D192ED03ull + index;
  return splitmix64(state);
}

void check_make_options(const MakeRecordsOptions& o) {
  const auto bad = [](const std::string& option, std::uint64_t value, const std::string& allowed) {
    return DatasetError(option + ": " + std::to_string(value) + " is not allowed; allowed: " + allowed);
  };
  if (o.count == 0 || o.count > (std::uint64_t{1} << 40)) throw bad("--count", o.count, "1 to 2^40");
  if (o.sample_bytes == 0 || o.sample_bytes > (std::uint64_t{1} << 30))
    throw bad("--sample-bytes", o.sample_bytes, "1 to 1073741824 (1 GiB)");
  if (o.shard_bytes == 0) throw bad("--shard-bytes", 0, "1 or more (a shard holds one record at least)");
  if (o.classes < 1 || o.classes > 1000000)
    throw bad("--classes", static_cast<std::uint64_t>(o.classes), "1 to 1000000");
  if (o.out.empty()) throw DatasetError("--out: empty; allowed: a directory path");
}

}  // namespace

std::int64_t made_record_label(const MakeRecordsOptions& o, std::uint64_t index) {
  return static_cast<std::int64_t>(record_stream(o, index) % static_cast<std::uint64_t>(o.classes));
}

std::vector<std::byte> made_record_payload(const MakeRecordsOptions& o, std::uint64_t index) {
  std::uint64_t state = record_stream(o, index);
  splitmix64(state);  // the first draw is the label's
  std::uint64_t length = o.sample_bytes;
  if (o.variable) {
    const std::uint64_t min = (o.sample_bytes + 1) / 2;
    length = min + splitmix64(state) % (o.sample_bytes - min + 1);
  }
  std::vector<std::byte> payload(length);
  for (std::size_t i = 0; i < length; i += 8) {
    const std::uint64_t word = splitmix64(state);
    std::memcpy(payload.data() + i, &word, std::min<std::size_t>(8, length - i));
  }
  return payload;
}

MakeRecordsResult make_records_dataset(const MakeRecordsOptions& o) {
  check_make_options(o);
  RecordWriterOptions w;
  w.spec = SampleSpec{{static_cast<std::int64_t>(o.sample_bytes)}, DType::uint8};
  w.variable = o.variable;
  w.shard_bytes = o.shard_bytes;
  w.num_classes = o.classes;
  std::unique_ptr<RecordWriter> made;
  try {
    made = std::make_unique<RecordWriter>(o.out, w);
  } catch (const DatasetError& e) {
    throw DatasetError(std::string("--out: ") + e.what());
  }
  RecordWriter& writer = *made;
  for (std::uint64_t i = 0; i < o.count; ++i)
    writer.append(made_record_label(o, i), made_record_payload(o, i));
  writer.finish();
  MakeRecordsResult result;
  result.records = writer.records();
  result.shards = writer.shards();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(o.out, ec))
    if (entry.is_regular_file(ec)) result.bytes += entry.file_size(ec);
  return result;
}

}  // namespace feedscope
