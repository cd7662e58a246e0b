#pragma once
// Each sample's load time (read, decode and transform together), recorded by the loader's workers
// into a log-bucket histogram and a fixed-size list of the slowest samples per worker, merged when
// a report asks: a batch is only as fast as its slowest sample, and a mean hides the few files that
// cost the most.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace feedscope {

// Where a sample came from, for a report's list of the slowest: the file and, where it is an image,
// its size on disk and in pixels. Unset: not known (a shard member, a synthetic sample).
struct SampleFile {
  std::string file;
  std::optional<std::uint64_t> bytes;
  std::optional<int> width;
  std::optional<int> height;
  std::string format;  // "jpeg", "png", ...; empty where not known
};

// The file, size and pixel size of an image file on disk, its header read (JPEG, PNG); what cannot
// be read stays unset. Never throws.
SampleFile probe_image_file(const std::string& path);

// One of the slowest samples.
struct SlowSampleCost {
  std::size_t index = 0;
  std::int64_t ns = 0;
  SampleFile file;  // filled by BatchLoader::sample_costs(), not by the recorder
};

// The merged recording: every sample's time in the histogram, the slowest by index.
struct SampleCostSnapshot {
  // 8 buckets per power of two (each within 12.5 % of its lower bound), nanoseconds 1 to 2^63.
  static constexpr int kSubBuckets = 8;
  static constexpr int kBuckets = 64 * kSubBuckets;
  static int bucket_of(std::int64_t ns) noexcept;
  static double bucket_low_ns(int bucket) noexcept;

  std::uint64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t max_ns = 0;
  std::vector<std::uint64_t> counts = std::vector<std::uint64_t>(kBuckets);
  std::vector<std::int64_t> sums = std::vector<std::int64_t>(kBuckets);  // ns per bucket
  std::vector<SlowSampleCost> slowest;  // slowest first
  // The consumer's time in next() for batches it waited for, and the part of that time in which
  // the batch it waited for was loading its slowest sample (a batch is one worker's job).
  std::int64_t wait_ns = 0;
  std::int64_t wait_on_slowest_ns = 0;

  // The q-quantile in milliseconds (q in 0..1), interpolated within its bucket; 0 without samples.
  double quantile_ms(double q) const;
  // The share of all load time that the slowest `fraction` of samples took (within a bucket's
  // width, the bucket straddling the cut taken pro rata).
  double slowest_share(double fraction) const;
  // The samples that took `ns` or more (whole buckets from the one holding `ns`): how many and
  // their summed time.
  std::uint64_t count_at_least(std::int64_t ns) const;
  std::int64_t sum_at_least(std::int64_t ns) const;
  void merge(const SampleCostSnapshot& other);
};

// Thread-safe, one writer per slot: record() from the worker that owns `slot` (its arena index),
// never allocating and never locking unless the sample is one of that slot's slowest so far;
// snapshot() from any thread.
class SampleCostRecorder {
 public:
  static constexpr std::size_t kSlowest = 20;

  explicit SampleCostRecorder(int slots);
  ~SampleCostRecorder();
  // `index` is the sample's (Dataset) index; kNoIndex for a stream's sample, which is counted but
  // not listed among the slowest.
  static constexpr std::size_t kNoIndex = static_cast<std::size_t>(-1);
  void record(int slot, std::size_t index, std::int64_t ns) noexcept;
  // The consumer thread's waits (one writer).
  void add_wait(std::int64_t wait_ns, std::int64_t on_slowest_ns) noexcept;
  SampleCostSnapshot snapshot() const;

 private:
  struct Slot;
  std::vector<std::unique_ptr<Slot>> slots_;
  // Below state is shared between the consumer thread (writer) and readers.
  std::atomic<std::int64_t> wait_ns_{0};
  std::atomic<std::int64_t> wait_on_slowest_ns_{0};
};

}  // namespace feedscope
