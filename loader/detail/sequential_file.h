#pragma once
// A shard file read front to back in large chunks, gzip-compressed or not: zlib's gzread inflates
// a gzip file and reads any other file as it is, through one 1 MiB buffer.
#include <cstddef>
#include <cstdint>
#include <string>

namespace feedscope::detail {

// Not thread-safe: one reader.
class SequentialFile {
 public:
  // Throws std::runtime_error naming `path` when it cannot be opened.
  explicit SequentialFile(const std::string& path);
  ~SequentialFile();
  SequentialFile(const SequentialFile&) = delete;
  SequentialFile& operator=(const SequentialFile&) = delete;

  // Reads up to `bytes`; fewer only at the end of the file. Throws std::runtime_error with zlib's
  // message for a corrupt gzip stream.
  std::size_t read(void* data, std::size_t bytes);
  // Bytes read so far (of the inflated stream for a gzip file).
  std::uint64_t position() const noexcept { return position_; }

 private:
  void* file_;  // gzFile, kept out of this header
  std::uint64_t position_ = 0;
};

}  // namespace feedscope::detail
