#include "pinned_memory/copy_engine.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "pinned_memory/detail/cuda_ops.h"
#include "pinned_memory/errors.h"

namespace feedscope {

DeviceCopy::DeviceCopy(DeviceCopy&& other) noexcept
    : engine_(std::exchange(other.engine_, nullptr)),
      buffer_(std::exchange(other.buffer_, -1)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceCopy& DeviceCopy::operator=(DeviceCopy&& other) noexcept {
  if (this != &other) {
    release_after(nullptr);
    engine_ = std::exchange(other.engine_, nullptr);
    buffer_ = std::exchange(other.buffer_, -1);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceCopy::order_before(void* stream) const {
  if (engine_ != nullptr) engine_->order_before(buffer_, stream);
}

void DeviceCopy::release_after(void* stream) noexcept {
  if (engine_ == nullptr) return;
  engine_->release(buffer_, stream, std::nullopt);
  engine_ = nullptr;
  buffer_ = -1;
  data_ = nullptr;
  bytes_ = 0;
}

void DeviceCopy::release_after(void* stream, void* also) noexcept {
  if (engine_ == nullptr) return;
  engine_->release(buffer_, stream, also == stream ? std::nullopt : std::optional<void*>(also));
  engine_ = nullptr;
  buffer_ = -1;
  data_ = nullptr;
  bytes_ = 0;
}

namespace {

std::int64_t steady_now_ns() {  // loader/span_recorder.h's clock, which this module cannot see
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct CopyEngine::Cuda {
  // Timing events of one copy, taken from a pool at submit and returned when the copy retires: a
  // buffer's next copy may be queued before the host has read the previous copy's timing.
  struct TimingPair {
    void* begin = nullptr;
    void* end = nullptr;
  };

  explicit Cuda(detail::CudaOps& o) : ops(o) {}
  ~Cuda() {
    // The copies in flight read their slabs until done: wait for them before anything is freed.
    if (stream != nullptr && !timing_of_in_flight.empty()) {
      try {
        detail::wait_for_event(
            ops, timing_pool[static_cast<std::size_t>(timing_of_in_flight.back())].end);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "feedscope: copy engine: waiting for the last copy: %s\n", e.what());
      }
    }
    for (void* e : ready) ops.destroy_event(e);
    for (void* e : consumed) ops.destroy_event(e);
    for (void* e : consumed_also) ops.destroy_event(e);
    for (const TimingPair& t : timing_pool) {
      ops.destroy_event(t.begin);
      ops.destroy_event(t.end);
    }
    if (reference != nullptr) ops.destroy_event(reference);
    for (void* b : buffers) ops.release(b);
    if (stream != nullptr) ops.destroy_stream(stream);
  }

  detail::CudaOps& ops;
  void* stream = nullptr;
  std::vector<void*> buffers;
  std::vector<void*> ready;     // per buffer: its latest copy is done
  std::vector<void*> consumed;  // per buffer: the work that read it is done
  // Per buffer: the same on a second stream that read it (release_after(stream, also)), and
  // whether its last release recorded it, so that a buffer read on one stream waits for one event.
  std::vector<void*> consumed_also;
  std::vector<bool> also_pending;
  std::vector<TimingPair> timing_pool;
  std::vector<int> free_timing;
  std::deque<int> timing_of_in_flight;  // parallel to CopyEngine::in_flight_
  // The device-to-host clock anchor: `reference` completed at host time `reference_ns`.
  void* reference = nullptr;
  std::int64_t reference_ns = 0;
};

CopyEngine::CopyEngine(Options options)
    : options_(options),
      ops_(options.ops != nullptr ? *options.ops : detail::cuda_runtime_ops()) {
  if (options_.buffer_bytes == 0)
    throw std::invalid_argument("copy engine: buffer_bytes is 0; allowed: 1 or more");
  if (options_.max_extra_buffers < 0)
    throw std::invalid_argument("copy engine: max_extra_buffers " +
                                std::to_string(options_.max_extra_buffers) + " is negative");
  if (options_.buffers < 2)
    throw std::invalid_argument("copy engine: buffers " + std::to_string(options_.buffers) +
                                " cannot overlap a copy with a step; allowed: 2 or more");
  const char* why = nullptr;
  const int count = ops_.device_count(&why);
  if (count == 0) throw DeviceError(std::string("copy engine: no CUDA device: ") + why);
  if (options_.device < 0 || options_.device >= count)
    throw DeviceError("copy engine: device " + std::to_string(options_.device) +
                      " does not exist: " + std::to_string(count) + " CUDA device(s) present");

  const detail::DeviceScope on_device(ops_, options_.device);
  cuda_ = std::make_unique<Cuda>(ops_);
  Cuda& c = *cuda_;
  // Non-blocking: the copy stream must not serialize with the legacy default stream the step
  // runs on; the two are ordered by events only.
  c.stream = ops_.create_stream();
  for (int i = 0; i < options_.buffers; ++i) add_buffer();
  c.reference = ops_.create_event(true);
  anchor();
  finished_.reserve(2 * held_.size());
}

void CopyEngine::add_buffer() {
  Cuda& c = *cuda_;
  c.buffers.push_back(ops_.allocate(options_.buffer_bytes));
  c.ready.push_back(ops_.create_event(false));
  c.consumed.push_back(ops_.create_event(false));
  c.consumed_also.push_back(ops_.create_event(false));
  c.also_pending.push_back(false);
  // Two timing pairs a buffer: enough for every copy that can be queued but not yet retired.
  for (int i = 0; i < 2; ++i) {
    Cuda::TimingPair t;
    t.begin = ops_.create_event(true);
    c.timing_pool.push_back(t);  // held before the next call can throw: ~Cuda frees it
    c.timing_pool.back().end = ops_.create_event(true);
    c.free_timing.push_back(static_cast<int>(c.timing_pool.size()) - 1);
  }
  held_.push_back(false);
}

int CopyEngine::next_free_buffer() const noexcept {
  const int n = buffers();
  for (int i = 0; i < n; ++i) {
    const int candidate = (next_buffer_ + i) % n;
    if (!held_[static_cast<std::size_t>(candidate)]) return candidate;
  }
  return n < max_buffers() ? n : -1;
}

int CopyEngine::free_buffer() {
  const int buffer = next_free_buffer();
  if (buffer != buffers()) return buffer;
  const detail::DeviceScope on_device(ops_, options_.device);
  add_buffer();
  return buffer;
}

void CopyEngine::wait_until_submit_ready(bool pinned) {
  const int buffer = next_free_buffer();
  if (pinned || buffer < 0) return;  // no buffer: submit() throws
  const detail::DeviceScope on_device(ops_, options_.device);
  Cuda& c = *cuda_;
  if (!c.timing_of_in_flight.empty())
    detail::wait_for_event(
        ops_, c.timing_pool[static_cast<std::size_t>(c.timing_of_in_flight.back())].end);
  // A buffer about to be added has had no reader.
  if (buffer >= buffers()) return;
  const auto b = static_cast<std::size_t>(buffer);
  detail::wait_for_event(ops_, c.consumed[b]);
  if (c.also_pending[b]) detail::wait_for_event(ops_, c.consumed_also[b]);
}

bool CopyEngine::can_submit_now(bool pinned) {
  const int buffer = next_free_buffer();
  if (buffer < 0) return false;
  if (pinned) return true;
  const detail::DeviceScope on_device(ops_, options_.device);
  Cuda& c = *cuda_;
  if (!c.timing_of_in_flight.empty() &&
      !ops_.query(c.timing_pool[static_cast<std::size_t>(c.timing_of_in_flight.back())].end))
    return false;
  if (buffer >= buffers()) return true;
  const auto b = static_cast<std::size_t>(buffer);
  return ops_.query(c.consumed[b]) && (!c.also_pending[b] || ops_.query(c.consumed_also[b]));
}

CopyEngine::~CopyEngine() {
  if (cuda_) {
    try {
      const detail::DeviceScope on_device(ops_, options_.device);
      cuda_.reset();  // waits for the copies in flight first
    } catch (...) {
      cuda_.reset();
    }
  }
  in_flight_.clear();  // the copies are done: their slabs go back to their pools
}

void CopyEngine::anchor() {
  Cuda& c = *cuda_;
  ops_.record(c.reference, c.stream);
  // Polled with yields only (the first attempts' idle), never a sleep: the host time is read the
  // moment the event is seen done.
  while (!ops_.query(c.reference)) ops_.idle(0);
  c.reference_ns = steady_now_ns();
}

DeviceCopy CopyEngine::submit(Slab slab, std::size_t bytes, std::int64_t tag) {
  if (bytes > options_.buffer_bytes)
    throw std::invalid_argument("copy engine: a copy of " + std::to_string(bytes) +
                                " bytes exceeds the device buffer of " +
                                std::to_string(options_.buffer_bytes));
  if (bytes > slab.size())
    throw std::invalid_argument("copy engine: a copy of " + std::to_string(bytes) +
                                " bytes exceeds its slab of " + std::to_string(slab.size()));
  wait_until_submit_ready(slab.pinned());
  const int buffer = free_buffer();
  if (buffer < 0)
    throw CopyEngineExhausted("all " + std::to_string(buffers()) +
                              " device buffers are held by batches still alive in the training "
                              "loop; release a batch before taking the next");
  next_buffer_ = (buffer + 1) % buffers();

  const detail::DeviceScope on_device(ops_, options_.device);
  Cuda& c = *cuda_;
  retire_completed();
  if (c.free_timing.empty()) {  // more copies queued than retired: wait for the oldest
    detail::wait_for_event(
        ops_, c.timing_pool[static_cast<std::size_t>(c.timing_of_in_flight.front())].end);
    retire_completed();
  }
  // Re-anchor the clock while the stream is idle, so that float milliseconds from the anchor
  // stay precise in a long run.
  if (in_flight_.empty() && steady_now_ns() - c.reference_ns > 10'000'000'000) anchor();

  const auto b = static_cast<std::size_t>(buffer);
  const int timing = c.free_timing.back();
  const Cuda::TimingPair& t = c.timing_pool[static_cast<std::size_t>(timing)];
  // The step that read this buffer last must be done before the copy overwrites it. An event
  // never recorded (the buffer's first use) makes the wait a no-op.
  ops_.stream_wait(c.stream, c.consumed[b]);
  if (c.also_pending[b]) ops_.stream_wait(c.stream, c.consumed_also[b]);
  c.also_pending[b] = false;
  ops_.record(t.begin, c.stream);
  ops_.copy_to_device_async(c.buffers[b], slab.data(), bytes, c.stream);
  ops_.record(t.end, c.stream);
  ops_.record(c.ready[b], c.stream);

  c.free_timing.pop_back();
  held_[b] = true;
  in_flight_.push_back(InFlight{std::move(slab), buffer, tag, bytes});
  c.timing_of_in_flight.push_back(timing);
  DeviceCopy copy;
  copy.engine_ = this;
  copy.buffer_ = buffer;
  copy.data_ = static_cast<std::byte*>(c.buffers[b]);
  copy.bytes_ = bytes;
  return copy;
}

void CopyEngine::retire_completed() {
  Cuda& c = *cuda_;
  while (!in_flight_.empty()) {
    const int timing = c.timing_of_in_flight.front();
    const Cuda::TimingPair& t = c.timing_pool[static_cast<std::size_t>(timing)];
    if (!ops_.query(t.end)) return;
    const InFlight& done = in_flight_.front();
    const float from_reference_ms = ops_.elapsed_ms(c.reference, t.begin);
    const float duration_ms = ops_.elapsed_ms(t.begin, t.end);
    CopyTiming out;
    out.tag = done.tag;
    out.begin_ns = c.reference_ns + static_cast<std::int64_t>(from_reference_ms * 1e6);
    out.end_ns = out.begin_ns + static_cast<std::int64_t>(duration_ms * 1e6);
    out.bytes = done.bytes;
    out.pinned = done.slab.pinned();
    if (finished_.size() >= kKeptTimings) {  // nobody collects: keep the newest
      finished_.erase(finished_.begin());
      ++timings_dropped_;
    }
    finished_.push_back(out);
    c.free_timing.push_back(timing);
    c.timing_of_in_flight.pop_front();
    in_flight_.pop_front();  // the slab returns to its pool
  }
}

void CopyEngine::reclaim(std::vector<CopyTiming>* timings) {
  const detail::DeviceScope on_device(ops_, options_.device);
  retire_completed();
  if (timings == nullptr) return;
  timings->insert(timings->end(), finished_.begin(), finished_.end());
  finished_.clear();
}

void CopyEngine::wait_idle() {
  {
    const detail::DeviceScope on_device(ops_, options_.device);
    Cuda& c = *cuda_;
    if (!c.timing_of_in_flight.empty())
      detail::wait_for_event(
          ops_, c.timing_pool[static_cast<std::size_t>(c.timing_of_in_flight.back())].end);
  }
  reclaim(nullptr);
}

int CopyEngine::buffers_in_use() const noexcept {
  int n = 0;
  for (const bool h : held_) n += h ? 1 : 0;
  return n;
}

void CopyEngine::order_before(int buffer, void* stream) const {
  const detail::DeviceScope on_device(ops_, options_.device);
  ops_.stream_wait(stream, cuda_->ready[static_cast<std::size_t>(buffer)]);
}

void CopyEngine::release(int buffer, void* stream, std::optional<void*> also) noexcept {
  const auto b = static_cast<std::size_t>(buffer);
  try {
    const detail::DeviceScope on_device(ops_, options_.device);
    ops_.record_noexcept(cuda_->consumed[b], stream);
    if (also) ops_.record_noexcept(cuda_->consumed_also[b], *also);
    cuda_->also_pending[b] = also.has_value();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "feedscope: copy engine: releasing a buffer: %s\n", e.what());
  }
  held_[b] = false;
}

bool copy_engine_available(std::string* why_not) {
  const char* why = nullptr;
  if (detail::cuda_runtime_ops().device_count(&why) > 0) return true;
  if (why_not != nullptr) *why_not = std::string("no CUDA device: ") + why;
  return false;
}

}  // namespace feedscope
