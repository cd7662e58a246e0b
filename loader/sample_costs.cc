#include "loader/sample_costs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <span>

#include "loader/image_format.h"
#include "loader/jpeg_decoder.h"

namespace feedscope {

namespace {
constexpr int kSub = SampleCostSnapshot::kSubBuckets;
constexpr int kSubBits = 3;  // log2(kSub)
static_assert(1 << kSubBits == kSub);

void add_slowest(std::vector<SlowSampleCost>& into, const SlowSampleCost& s) {
  // One file is slow every epoch: the list names each once, at its slowest.
  for (SlowSampleCost& t : into)
    if (t.index == s.index) {
      t.ns = std::max(t.ns, s.ns);
      return;
    }
  into.push_back(s);
}
}  // namespace

int SampleCostSnapshot::bucket_of(std::int64_t ns) noexcept {
  if (ns <= 0) return 0;
  const auto v = static_cast<std::uint64_t>(ns);
  const int e = std::bit_width(v) - 1;
  const std::uint64_t sub = e >= kSubBits ? (v >> (e - kSubBits)) & (kSub - 1)
                                          : (v << (kSubBits - e)) & (kSub - 1);
  return e * kSub + static_cast<int>(sub);
}

double SampleCostSnapshot::bucket_low_ns(int bucket) noexcept {
  const int e = bucket / kSub;
  const int sub = bucket % kSub;
  return std::ldexp(1.0 + static_cast<double>(sub) / kSub, e);
}

double SampleCostSnapshot::quantile_ms(double q) const {
  if (count == 0) return 0;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(count);
  double seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    const auto n = static_cast<double>(counts[static_cast<std::size_t>(b)]);
    if (n == 0) continue;
    if (seen + n >= rank) {
      const double low = bucket_low_ns(b), high = bucket_low_ns(b + 1);
      const double ns = low + (high - low) * std::clamp((rank - seen) / n, 0.0, 1.0);
      return std::min(ns, static_cast<double>(max_ns)) / 1e6;
    }
    seen += n;
  }
  return static_cast<double>(max_ns) / 1e6;
}

double SampleCostSnapshot::slowest_share(double fraction) const {
  if (count == 0 || total_ns <= 0) return 0;
  double left = std::clamp(fraction, 0.0, 1.0) * static_cast<double>(count);
  double taken = 0;
  for (int b = kBuckets - 1; b >= 0 && left > 0; --b) {
    const auto n = static_cast<double>(counts[static_cast<std::size_t>(b)]);
    if (n == 0) continue;
    const double mean = static_cast<double>(sums[static_cast<std::size_t>(b)]) / n;
    const double take = std::min(n, left);
    taken += take * mean;
    left -= take;
  }
  return std::min(1.0, taken / static_cast<double>(total_ns));
}

std::uint64_t SampleCostSnapshot::count_at_least(std::int64_t ns) const {
  std::uint64_t n = 0;
  for (int b = bucket_of(ns); b < kBuckets; ++b) n += counts[static_cast<std::size_t>(b)];
  return n;
}

std::int64_t SampleCostSnapshot::sum_at_least(std::int64_t ns) const {
  std::int64_t s = 0;
  for (int b = bucket_of(ns); b < kBuckets; ++b) s += sums[static_cast<std::size_t>(b)];
  return s;
}

void SampleCostSnapshot::merge(const SampleCostSnapshot& o) {
  count += o.count;
  total_ns += o.total_ns;
  max_ns = std::max(max_ns, o.max_ns);
  for (std::size_t b = 0; b < counts.size(); ++b) {
    counts[b] += o.counts[b];
    sums[b] += o.sums[b];
  }
  for (const SlowSampleCost& s : o.slowest) add_slowest(slowest, s);
  std::sort(slowest.begin(), slowest.end(),
            [](const SlowSampleCost& a, const SlowSampleCost& b) { return a.ns > b.ns; });
  if (slowest.size() > SampleCostRecorder::kSlowest) slowest.resize(SampleCostRecorder::kSlowest);
  wait_ns += o.wait_ns;
  wait_on_slowest_ns += o.wait_on_slowest_ns;
}

// One worker's recording, on cache lines of its own. The histogram's counters have one writer, so
// plain loads and stores of relaxed atomics (no read-modify-write) keep it cheap and race-free.
struct alignas(128) SampleCostRecorder::Slot {
  std::array<std::atomic<std::uint64_t>, SampleCostSnapshot::kBuckets> counts{};
  std::array<std::atomic<std::int64_t>, SampleCostSnapshot::kBuckets> sums{};
  std::atomic<std::int64_t> max_ns{0};
  // The fastest of a full list of the slowest: a sample at or under it is not one of them.
  std::atomic<std::int64_t> floor_ns{0};
  std::mutex mutex;  // guards `top`: taken only by a sample that enters it, and by snapshot()
  std::array<SlowSampleCost, kSlowest> top;  // SampleFile left empty: never allocates here
  std::size_t top_size = 0;
};

SampleCostRecorder::SampleCostRecorder(int slots) {
  for (int i = 0; i < std::max(1, slots); ++i) slots_.push_back(std::make_unique<Slot>());
}

SampleCostRecorder::~SampleCostRecorder() = default;

void SampleCostRecorder::record(int slot, std::size_t index, std::int64_t ns) noexcept {
  Slot& s = *slots_[static_cast<std::size_t>(std::max(0, slot)) % slots_.size()];
  const auto b = static_cast<std::size_t>(SampleCostSnapshot::bucket_of(ns));
  s.counts[b].store(s.counts[b].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  s.sums[b].store(s.sums[b].load(std::memory_order_relaxed) + ns, std::memory_order_relaxed);
  if (ns > s.max_ns.load(std::memory_order_relaxed)) s.max_ns.store(ns, std::memory_order_relaxed);
  if (index == kNoIndex || ns <= s.floor_ns.load(std::memory_order_relaxed)) return;
  const std::lock_guard lock(s.mutex);
  std::size_t at = s.top_size;
  for (std::size_t i = 0; i < s.top_size; ++i)
    if (s.top[i].index == index) at = i;
  if (at < s.top_size) {
    s.top[at].ns = std::max(s.top[at].ns, ns);
  } else if (s.top_size < kSlowest) {
    s.top[s.top_size].index = index;
    s.top[s.top_size++].ns = ns;
  } else {
    std::size_t fastest = 0;
    for (std::size_t i = 1; i < kSlowest; ++i)
      if (s.top[i].ns < s.top[fastest].ns) fastest = i;
    s.top[fastest].index = index;
    s.top[fastest].ns = ns;
  }
  if (s.top_size == kSlowest) {
    std::int64_t floor = s.top[0].ns;
    for (std::size_t i = 1; i < kSlowest; ++i) floor = std::min(floor, s.top[i].ns);
    s.floor_ns.store(floor, std::memory_order_relaxed);
  }
}

void SampleCostRecorder::add_wait(std::int64_t wait_ns, std::int64_t on_slowest_ns) noexcept {
  wait_ns_.store(wait_ns_.load(std::memory_order_relaxed) + wait_ns, std::memory_order_relaxed);
  wait_on_slowest_ns_.store(wait_on_slowest_ns_.load(std::memory_order_relaxed) + on_slowest_ns,
                            std::memory_order_relaxed);
}

SampleCostSnapshot SampleCostRecorder::snapshot() const {
  SampleCostSnapshot out;
  for (const auto& slot : slots_) {
    SampleCostSnapshot one;
    for (std::size_t b = 0; b < one.counts.size(); ++b) {
      one.counts[b] = slot->counts[b].load(std::memory_order_relaxed);
      one.sums[b] = slot->sums[b].load(std::memory_order_relaxed);
      one.count += one.counts[b];
      one.total_ns += one.sums[b];
    }
    one.max_ns = slot->max_ns.load(std::memory_order_relaxed);
    {
      const std::lock_guard lock(slot->mutex);
      one.slowest.assign(slot->top.begin(), slot->top.begin() + static_cast<std::ptrdiff_t>(slot->top_size));
    }
    out.merge(one);
  }
  out.wait_ns = wait_ns_.load(std::memory_order_relaxed);
  out.wait_on_slowest_ns = wait_on_slowest_ns_.load(std::memory_order_relaxed);
  return out;
}

SampleFile probe_image_file(const std::string& path) {
  SampleFile f;
  f.file = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return f;
  struct stat st {};
  if (::fstat(fd, &st) == 0) f.bytes = static_cast<std::uint64_t>(st.st_size);
  // The frame header follows the EXIF and ICC segments (up to 64 KiB each).
  std::vector<std::uint8_t> head(256 * 1024);
  const ssize_t n = ::pread(fd, head.data(), head.size(), 0);
  ::close(fd);
  if (n <= 0) return f;
  head.resize(static_cast<std::size_t>(n));
  const ImageFormat format = sniff_image_format(head);
  if (format == ImageFormat::unknown) return f;
  f.format = image_format_name(format);
  try {
    if (format == ImageFormat::jpeg) {
      JpegDecoder decoder;
      const JpegHeader h = decoder.read_header(head);
      f.width = h.width;
      f.height = h.height;
    } else if (format == ImageFormat::png && head.size() >= 24) {
      const auto be32 = [&](std::size_t at) {
        return static_cast<int>((std::uint32_t{head[at]} << 24) | (std::uint32_t{head[at + 1]} << 16) |
                                (std::uint32_t{head[at + 2]} << 8) | std::uint32_t{head[at + 3]});
      };
      f.width = be32(16);  // IHDR, right after the signature and the chunk's length and type
      f.height = be32(20);
    }
  } catch (const std::exception&) {
    // A header that does not parse: the list shows the file and its bytes without pixels.
  }
  return f;
}

}  // namespace feedscope
