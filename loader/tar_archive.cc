#include "loader/tar_archive.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "loader/dataset.h"
#include "loader/detail/sequential_file.h"

namespace feedscope {

namespace {

constexpr std::size_t kBlock = 512;

// A numeric header field: octal digits (space- or NUL-terminated), or GNU's base-256 with the
// top bit of the first byte set. False when it is neither.
bool parse_number(const char* field, std::size_t width, std::uint64_t& out) {
  const auto* u = reinterpret_cast<const unsigned char*>(field);
  if (u[0] & 0x80) {
    if (u[0] & 0x40) return false;  // negative
    std::uint64_t v = u[0] & 0x3f;
    for (std::size_t i = 1; i < width; ++i) {
      if (v >> 56) return false;
      v = (v << 8) | u[i];
    }
    out = v;
    return true;
  }
  std::size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  std::uint64_t v = 0;
  bool digits = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v >> 61) return false;
    v = v * 8 + static_cast<std::uint64_t>(field[i] - '0');
    digits = true;
  }
  for (; i < width; ++i)
    if (field[i] != ' ' && field[i] != '\0') return false;
  out = v;
  return digits;
}

// The header's checksum field against the sum of its bytes (the field counted as spaces);
// tar accepts the sum over signed chars too.
bool checksum_ok(const unsigned char* h) {
  std::uint64_t stored = 0;
  if (!parse_number(reinterpret_cast<const char*>(h) + 148, 8, stored)) return false;
  std::uint64_t unsigned_sum = 0;
  std::int64_t signed_sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) {
    const unsigned char c = (i >= 148 && i < 156) ? ' ' : h[i];
    unsigned_sum += c;
    signed_sum += static_cast<signed char>(c);
  }
  return stored == unsigned_sum || static_cast<std::int64_t>(stored) == signed_sum;
}

std::string field(const unsigned char* h, std::size_t at, std::size_t width) {
  const char* p = reinterpret_cast<const char*>(h) + at;
  return std::string(p, strnlen(p, width));
}

std::uint64_t padded(std::uint64_t size) { return (size + kBlock - 1) / kBlock * kBlock; }

}  // namespace

struct TarReader::State {
  explicit State(const std::string& path) : file(path) {}
  detail::SequentialFile file;
  std::uint64_t position = 0;   // bytes of the (uncompressed) stream consumed
  std::uint64_t remaining = 0;  // of the current member's data and padding
  std::uint64_t data_left = 0;  // of the current member's data
  std::string member;           // the current (or last) member's name, for messages
  bool ended = false;
  bool resync = false;  // the last header was bad: search on for a valid one
  std::vector<std::uint8_t> scratch;

  std::string where(const std::string& path) const {
    return path + (member.empty() ? "" : " member '" + member + "'");
  }

  // Reads up to `size` bytes; fewer only at the end of the file. Throws for a corrupt stream.
  std::size_t read_some(void* data, std::size_t size, const std::string& path) {
    try {
      const std::size_t got = file.read(data, size);
      position += got;
      return got;
    } catch (const std::runtime_error& e) {
      ended = true;
      throw TarError(where(path) + " at byte " + std::to_string(file.position()) + ": " + e.what(), member, true);
    }
  }

  void skip(std::uint64_t bytes, const std::string& path) {
    if (scratch.size() < (64u << 10)) scratch.resize(64u << 10);
    while (bytes > 0) {
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, scratch.size()));
      const std::size_t got = read_some(scratch.data(), want, path);
      bytes -= got;
      if (got < want) {
        ended = true;
        throw TarError(where(path) + ": truncated: the file ends " + std::to_string(bytes) +
                           " bytes before the member's end (at byte " + std::to_string(position) + ")",
                       member, true);
      }
    }
  }
};

TarReader::TarReader(std::string path) : path_(std::move(path)), state_(std::make_unique<State>(path_)) {}

TarReader::~TarReader() = default;

bool TarReader::next(TarMember& member) {
  State& s = *state_;
  if (s.ended) return false;
  if (s.remaining > 0) {
    const std::uint64_t left = s.remaining;
    s.remaining = 0;
    s.data_left = 0;
    s.skip(left, path_);
  }
  std::string long_name;  // from a GNU 'L' entry or a PAX 'path'
  bool have_long_name = false;
  std::uint64_t pax_size = 0;
  bool have_pax_size = false;
  unsigned char h[kBlock];
  for (;;) {
    const std::uint64_t at = s.position;
    const std::size_t got = s.read_some(h, kBlock, path_);
    if (got == 0 && !have_long_name && !have_pax_size) {
      s.ended = true;  // the file ends between members: what Python's tarfile accepts too
      return false;
    }
    if (got < kBlock) {
      s.ended = true;
      throw TarError(s.where(path_) + ": truncated: the file ends inside a header at byte " +
                         std::to_string(at),
                     s.member, true);
    }
    if (std::all_of(h, h + kBlock, [](unsigned char c) { return c == 0; })) {
      if (s.resync) continue;
      s.ended = true;  // the end-of-archive blocks
      return false;
    }
    if (!checksum_ok(h)) {
      if (s.resync) continue;
      s.resync = true;
      throw TarError(path_ + " at byte " + std::to_string(at) + " (after member '" + s.member +
                         "'): header checksum mismatch: a corrupt header; searching on for the next member",
                     s.member, false);
    }
    s.resync = false;
    std::uint64_t size = 0;
    if (!parse_number(reinterpret_cast<const char*>(h) + 124, 12, size)) {
      s.ended = true;
      throw TarError(path_ + " at byte " + std::to_string(at) + ": member '" + field(h, 0, 100) +
                         "' has an unreadable size field",
                     field(h, 0, 100), true);
    }
    if (have_pax_size) size = pax_size;
    const char type = static_cast<char>(h[156]);
    std::string name = field(h, 0, 100);
    if (std::memcmp(h + 257, "ustar\0", 6) == 0) {
      const std::string prefix = field(h, 345, 155);
      if (!prefix.empty()) name = prefix + "/" + name;
    }
    if (have_long_name) name = long_name;
    s.member = name;
    if (type == 'L' || type == 'x') {
      // Metadata for the next header: its name (GNU) or its records (PAX).
      std::vector<std::uint8_t> data(static_cast<std::size_t>(size));
      if (s.read_some(data.data(), data.size(), path_) < data.size()) {
        s.ended = true;
        throw TarError(path_ + " at byte " + std::to_string(at) +
                           ": truncated: the file ends inside a long-name or PAX header",
                       name, true);
      }
      s.skip(padded(size) - size, path_);
      if (type == 'L') {
        long_name.assign(data.begin(), std::find(data.begin(), data.end(), std::uint8_t{0}));
        have_long_name = true;
        continue;
      }
      // PAX records: "LENGTH key=value\n".
      std::size_t p = 0;
      while (p < data.size()) {
        std::size_t space = p;
        std::uint64_t length = 0;
        while (space < data.size() && data[space] >= '0' && data[space] <= '9')
          length = length * 10 + (data[space++] - '0');
        if (space >= data.size() || data[space] != ' ' || length == 0 || p + length > data.size()) break;
        const std::string record(data.begin() + static_cast<std::ptrdiff_t>(space + 1),
                                 data.begin() + static_cast<std::ptrdiff_t>(p + length - 1));
        const std::size_t eq = record.find('=');
        if (eq != std::string::npos) {
          const std::string key = record.substr(0, eq), value = record.substr(eq + 1);
          if (key == "path") {
            long_name = value;
            have_long_name = true;
          } else if (key == "size") {
            pax_size = std::strtoull(value.c_str(), nullptr, 10);
            have_pax_size = true;
          }
        }
        p += length;
      }
      continue;
    }
    s.remaining = padded(size);
    s.data_left = size;
    if (type == '0' || type == '\0' || type == '7') {
      member.name = std::move(name);
      member.size = size;
      member.offset = at;
      return true;
    }
    // A directory, link, device or global PAX header: not a sample's file.
    const std::uint64_t left = s.remaining;
    s.remaining = 0;
    s.data_left = 0;
    s.skip(left, path_);
    have_long_name = have_pax_size = false;
  }
}

void TarReader::read(std::vector<std::uint8_t>& out) {
  State& s = *state_;
  out.resize(static_cast<std::size_t>(s.data_left));
  const std::size_t got = s.read_some(out.data(), out.size(), path_);
  if (got < out.size()) {
    s.ended = true;
    throw TarError(s.where(path_) + ": truncated: the file ends " + std::to_string(out.size() - got) +
                       " bytes before the member's end (at byte " + std::to_string(s.position) + ")",
                   s.member, true);
  }
  s.remaining -= s.data_left;
  s.data_left = 0;
}

// ---- Writer ------------------------------------------------------------------------------------

TarWriter::TarWriter(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(path_ + ": cannot create: " + std::strerror(errno));
}

TarWriter::~TarWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TarWriter::write(const void* data, std::size_t size) {
  write_all(fd_, data, size, path_);
  bytes_ += size;
}

void TarWriter::add(const std::string& name, std::span<const std::uint8_t> data) {
  if (name.empty() || name.size() > 100)
    throw std::invalid_argument("tar: member name '" + name + "' is not 1 to 100 bytes (ustar)");
  char h[kBlock] = {};
  std::memcpy(h, name.data(), name.size());
  std::snprintf(h + 100, 8, "%07o", 0644u);
  std::snprintf(h + 108, 8, "%07o", 0u);
  std::snprintf(h + 116, 8, "%07o", 0u);
  std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(data.size()));
  std::snprintf(h + 136, 12, "%011o", 0u);
  h[156] = '0';
  std::memcpy(h + 257, "ustar\0" "00", 8);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (const char c : h) sum += static_cast<unsigned char>(c);
  std::snprintf(h + 148, 8, "%06o", sum);  // six digits, NUL, then the space already there
  write(h, kBlock);
  write(data.data(), data.size());
  static constexpr char zeros[kBlock] = {};
  write(zeros, padded(data.size()) - data.size());
}

void TarWriter::finish() {
  static constexpr char zeros[2 * kBlock] = {};
  write(zeros, sizeof zeros);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw std::runtime_error(path_ + ": cannot finish: " + std::strerror(errno));
}

}  // namespace feedscope
