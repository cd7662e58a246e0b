#pragma once
// What the loader reads from. Samples are written straight into the batch slab, so a dataset
// never allocates an intermediate sample buffer on the hot path.
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/sample_costs.h"
#include "loader/span_recorder.h"

namespace feedscope {

enum class DType : std::uint8_t { uint8, float32 };
std::size_t dtype_size(DType dtype) noexcept;
const char* dtype_name(DType dtype) noexcept;

struct SampleSpec {
  std::vector<std::int64_t> shape;  // one sample, without the batch dimension
  DType dtype = DType::float32;
  std::int64_t elements() const noexcept;
  std::size_t bytes() const noexcept { return static_cast<std::size_t>(elements()) * dtype_size(dtype); }
  std::string to_string() const;  // "3x32x32 float32"
};

// Per-call context: where the sample goes in the batch, and where to record stage spans.
struct LoadContext {
  SpanRegistry* spans = nullptr;  // may be null: no recording
  LaneRole role = LaneRole::worker;
  std::int64_t batch = -1;
  int worker = 0;  // 0..num_workers-1, for per-worker scratch buffers
  std::uint64_t epoch = 0;  // with the index, seeds per-sample randomness (augmentation)
};

// What every source of samples tells the loader and the reports, whether it is read by index
// (Dataset) or front to back, shard by shard (ShardedDataset, loader/sharded_dataset.h).
class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual const SampleSpec& spec() const = 0;
  virtual std::int64_t num_classes() const = 0;
  // "synthetic:3x32x32", for reports.
  virtual std::string name() const = 0;
  // Drops the dataset's files from the page cache (posix_fadvise DONTNEED) so the next epoch
  // reads from storage: cold-storage runs without root. Returns the bytes advised; 0 for a
  // dataset that lives in memory. Throws std::runtime_error naming a file the kernel refuses.
  virtual std::uint64_t evict_page_cache() const { return 0; }
};

// Random access by sample index. Thread-safe: load() is called from many worker threads at once.
class Dataset : public DataSource {
 public:
  virtual std::size_t size() const = 0;
  // Writes sample `index` into `out` (exactly spec().bytes() bytes) and returns its label.
  // Throws SampleError for bad data.
  virtual std::int64_t load(std::size_t index, std::span<std::byte> out, LoadContext& ctx) const = 0;
  // Where sample `index` comes from (a file name), for error messages.
  virtual std::string describe(std::size_t index) const = 0;
  // describe() and, where the dataset knows them, the sample's bytes on disk and pixels: for the
  // report's slowest samples, called a few times per report, never per load.
  virtual SampleFile sample_file(std::size_t index) const { return SampleFile{describe(index), {}, {}, {}, {}}; }
};

// Drops one open file's pages from the page cache, for evict_page_cache(). Flushes first:
// DONTNEED passes over dirty pages, so a dataset written a moment ago (make-dataset, then run)
// would otherwise stay cached and read "cold" at memory speed. Throws naming `path`.
void drop_cached_pages(int fd, const std::string& path);
// Writes all `bytes` of `data` to `fd` (a short write goes on, EINTR is retried), for the dataset
// writers (make-dataset records, tfrecord, webdataset's tar). Throws "<path>: write failed: ...".
void write_all(int fd, const void* data, std::size_t bytes, const std::string& path);

// drop_cached_pages for every file of `paths` (one that vanished since it was listed is passed
// over: its read will say so); returns their bytes together.
std::uint64_t drop_cached_files(const std::vector<std::string>& paths);

// A sample that could not be loaded. Carries the sample index and its source (file) so the error
// reaching the training thread names both.
class SampleError : public std::runtime_error {
 public:
  SampleError(std::size_t index, std::string source, const std::string& what)
      : std::runtime_error("sample " + std::to_string(index) + " (" + source + "): " + what),
        index_(index), source_(std::move(source)) {}
  std::size_t index() const noexcept { return index_; }
  const std::string& source() const noexcept { return source_; }

 private:
  std::size_t index_;
  std::string source_;
};

// A dataset specification that cannot be opened (bad path, bad shape). Names the value.
class DatasetError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace feedscope
