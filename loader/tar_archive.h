#pragma once
// Tar archives as webdataset shards are: read front to back (plain ustar, GNU long names, PAX
// extended headers; gzip-compressed through zlib, which reads an uncompressed file as it is), and
// written (ustar) by `feedscope make-dataset webdataset`.
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace feedscope {

// Bad tar data. The message names the shard, the member and the byte offset. framing_lost():
// the reader cannot find the members after this point (a truncated file, a corrupt gzip
// stream); otherwise the next call to TarReader::next() searches on for a valid header.
class TarError : public std::runtime_error {
 public:
  TarError(const std::string& what, std::string member, bool framing_lost)
      : std::runtime_error(what), member_(std::move(member)), framing_lost_(framing_lost) {}
  const std::string& member() const noexcept { return member_; }
  bool framing_lost() const noexcept { return framing_lost_; }

 private:
  std::string member_;
  bool framing_lost_;
};

struct TarMember {
  std::string name;  // the full path inside the archive
  std::uint64_t size = 0;
  std::uint64_t offset = 0;  // of its header, in the uncompressed stream
};

// Not thread-safe: one thread reads an archive. Reads from storage in large sequential chunks
// (zlib's buffer, 1 MiB); member data is copied once, into the caller's buffer.
class TarReader {
 public:
  // Throws std::runtime_error naming `path` when it cannot be opened.
  explicit TarReader(std::string path);
  ~TarReader();
  TarReader(const TarReader&) = delete;
  TarReader& operator=(const TarReader&) = delete;

  // Moves to the next regular file (directories, links and metadata entries are passed over);
  // false at the end of the archive (two zero blocks, or the file's end between members). Throws
  // TarError for a header whose checksum fails (the next call searches on for a valid one) or a
  // file that ends inside a header (framing lost; the next call returns false).
  bool next(TarMember& member);
  // The current member's data, whole, into `out` (resized; its capacity is kept). Throws TarError
  // when the file ends inside it (framing lost). Without a call, next() skips the data.
  void read(std::vector<std::uint8_t>& out);
  const std::string& path() const noexcept { return path_; }

 private:
  struct State;
  std::string path_;
  std::unique_ptr<State> state_;
};

// Not thread-safe. Writes a ustar archive member by member; finish() writes the end blocks.
class TarWriter {
 public:
  // Throws std::runtime_error naming `path` when it cannot be created.
  explicit TarWriter(std::string path);
  ~TarWriter();
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;
  // Throws std::invalid_argument for a name over ustar's 100 bytes, std::runtime_error on I/O.
  void add(const std::string& name, std::span<const std::uint8_t> data);
  void finish();
  std::uint64_t bytes() const noexcept { return bytes_; }

 private:
  void write(const void* data, std::size_t size);
  std::string path_;
  int fd_ = -1;
  std::uint64_t bytes_ = 0;
};

}  // namespace feedscope
