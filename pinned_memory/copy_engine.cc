#include "pinned_memory/copy_engine.h"

#include <chrono>
#include <string>
#include <utility>

#include "pinned_memory/errors.h"

#if FEEDSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "pinned_memory/detail/cuda_call.h"
#endif

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
  engine_->release(buffer_, stream);
  engine_ = nullptr;
  buffer_ = -1;
  data_ = nullptr;
  bytes_ = 0;
}

#if FEEDSCOPE_WITH_CUDA

namespace {
std::int64_t steady_now_ns() {  // loader/span_recorder.h's clock, which this module cannot see
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

struct CopyEngine::Cuda {
  // Timing events of one copy, taken from a pool at submit and returned at reclaim: a buffer's
  // next copy may be queued before the host has read the previous copy's timing.
  struct TimingPair {
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
  };

  cudaStream_t stream = nullptr;
  std::vector<void*> buffers;
  std::vector<cudaEvent_t> ready;     // per buffer: its latest copy is done
  std::vector<cudaEvent_t> consumed;  // per buffer: the work that read it is done
  std::vector<TimingPair> timing_pool;
  std::vector<int> free_timing;
  std::deque<int> timing_of_in_flight;  // parallel to CopyEngine::in_flight_
  // The device-to-host clock anchor: `reference` completed at host time `reference_ns`.
  cudaEvent_t reference = nullptr;
  std::int64_t reference_ns = 0;

  void anchor() {
    FEEDSCOPE_CUDA_CALL(cudaEventRecord(reference, stream));
    FEEDSCOPE_CUDA_CALL(cudaEventSynchronize(reference));
    reference_ns = steady_now_ns();
  }

  ~Cuda() {
    if (stream != nullptr) FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaStreamSynchronize(stream));
    for (cudaEvent_t e : ready) FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaEventDestroy(e));
    for (cudaEvent_t e : consumed) FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaEventDestroy(e));
    for (const TimingPair& t : timing_pool) {
      FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaEventDestroy(t.begin));
      FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaEventDestroy(t.end));
    }
    if (reference != nullptr) FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaEventDestroy(reference));
    for (void* b : buffers) FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaFree(b));
    if (stream != nullptr) FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaStreamDestroy(stream));
  }
};

CopyEngine::CopyEngine(Options options) : options_(options) {
  if (options_.buffer_bytes == 0)
    throw std::invalid_argument("copy engine: buffer_bytes is 0; allowed: 1 or more");
  if (options_.buffers < 2)
    throw std::invalid_argument("copy engine: buffers " + std::to_string(options_.buffers) +
                                " cannot overlap a copy with a step; allowed: 2 or more");
  std::string why;
  if (!copy_engine_available(&why)) throw DeviceError("copy engine: " + why);
  int count = 0;
  FEEDSCOPE_CUDA_CALL(cudaGetDeviceCount(&count));
  if (options_.device < 0 || options_.device >= count)
    throw DeviceError("copy engine: device " + std::to_string(options_.device) +
                      " does not exist: " + std::to_string(count) + " CUDA device(s) present");

  const detail::DeviceGuard guard(options_.device);
  cuda_ = std::make_unique<Cuda>();
  Cuda& c = *cuda_;
  // Non-blocking: the copy stream must not serialize with the legacy default stream the step
  // runs on; the two are ordered by events only.
  FEEDSCOPE_CUDA_CALL(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  const auto n = static_cast<std::size_t>(options_.buffers);
  c.buffers.resize(n, nullptr);
  c.ready.resize(n, nullptr);
  c.consumed.resize(n, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    FEEDSCOPE_CUDA_CALL(cudaMalloc(&c.buffers[i], options_.buffer_bytes));
    FEEDSCOPE_CUDA_CALL(cudaEventCreateWithFlags(&c.ready[i], cudaEventDisableTiming));
    FEEDSCOPE_CUDA_CALL(cudaEventCreateWithFlags(&c.consumed[i], cudaEventDisableTiming));
  }
  // Two timing pairs a buffer: enough for every copy that can be queued but not yet reclaimed.
  c.timing_pool.resize(2 * n);
  for (std::size_t i = 0; i < c.timing_pool.size(); ++i) {
    FEEDSCOPE_CUDA_CALL(cudaEventCreate(&c.timing_pool[i].begin));
    FEEDSCOPE_CUDA_CALL(cudaEventCreate(&c.timing_pool[i].end));
    c.free_timing.push_back(static_cast<int>(i));
  }
  FEEDSCOPE_CUDA_CALL(cudaEventCreate(&c.reference));
  c.anchor();
  held_.assign(n, false);
}

CopyEngine::~CopyEngine() {
  if (cuda_) {
    try {
      const detail::DeviceGuard guard(options_.device);
      cuda_.reset();  // synchronizes the copy stream first
    } catch (...) {
      cuda_.reset();
    }
  }
  in_flight_.clear();  // the copies are done: their slabs go back to their pools
}

DeviceCopy CopyEngine::submit(Slab slab, std::size_t bytes, std::int64_t tag) {
  if (bytes > options_.buffer_bytes)
    throw std::invalid_argument("copy engine: a copy of " + std::to_string(bytes) +
                                " bytes exceeds the device buffer of " +
                                std::to_string(options_.buffer_bytes));
  if (bytes > slab.size())
    throw std::invalid_argument("copy engine: a copy of " + std::to_string(bytes) +
                                " bytes exceeds its slab of " + std::to_string(slab.size()));
  int buffer = -1;
  for (int i = 0; i < options_.buffers && buffer < 0; ++i) {
    const int candidate = (next_buffer_ + i) % options_.buffers;
    if (!held_[static_cast<std::size_t>(candidate)]) buffer = candidate;
  }
  if (buffer < 0)
    throw CopyEngineExhausted("all " + std::to_string(options_.buffers) +
                              " device buffers are held by batches still alive in the training "
                              "loop; release a batch before taking the next");
  next_buffer_ = (buffer + 1) % options_.buffers;

  const detail::DeviceGuard guard(options_.device);
  Cuda& c = *cuda_;
  reclaim();
  if (c.free_timing.empty()) {  // more copies queued than reclaimed: wait for the oldest
    FEEDSCOPE_CUDA_CALL(cudaEventSynchronize(c.timing_pool[static_cast<std::size_t>(
        c.timing_of_in_flight.front())].end));
    reclaim();
  }
  // Re-anchor the clock while the stream is idle, so that float milliseconds from the anchor
  // stay precise in a long run.
  if (in_flight_.empty() && steady_now_ns() - c.reference_ns > 10'000'000'000) c.anchor();

  const auto b = static_cast<std::size_t>(buffer);
  const int timing = c.free_timing.back();
  c.free_timing.pop_back();
  const Cuda::TimingPair& t = c.timing_pool[static_cast<std::size_t>(timing)];
  // The step that read this buffer last must be done before the copy overwrites it. An event
  // never recorded (the buffer's first use) makes the wait a no-op.
  FEEDSCOPE_CUDA_CALL(cudaStreamWaitEvent(c.stream, c.consumed[b], 0));
  FEEDSCOPE_CUDA_CALL(cudaEventRecord(t.begin, c.stream));
  FEEDSCOPE_CUDA_CALL(cudaMemcpyAsync(c.buffers[b], slab.data(), bytes, cudaMemcpyHostToDevice,
                                      c.stream));
  FEEDSCOPE_CUDA_CALL(cudaEventRecord(t.end, c.stream));
  FEEDSCOPE_CUDA_CALL(cudaEventRecord(c.ready[b], c.stream));

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

void CopyEngine::reclaim(std::vector<CopyTiming>* timings) {
  Cuda& c = *cuda_;
  while (!in_flight_.empty()) {
    const int timing = c.timing_of_in_flight.front();
    const Cuda::TimingPair& t = c.timing_pool[static_cast<std::size_t>(timing)];
    const cudaError_t status = cudaEventQuery(t.end);
    if (status == cudaErrorNotReady) return;
    FEEDSCOPE_CUDA_CALL(status);
    InFlight& done = in_flight_.front();
    if (timings != nullptr) {
      float from_reference_ms = 0, duration_ms = 0;
      FEEDSCOPE_CUDA_CALL(cudaEventElapsedTime(&from_reference_ms, c.reference, t.begin));
      FEEDSCOPE_CUDA_CALL(cudaEventElapsedTime(&duration_ms, t.begin, t.end));
      CopyTiming timing_out;
      timing_out.tag = done.tag;
      timing_out.begin_ns = c.reference_ns + static_cast<std::int64_t>(from_reference_ms * 1e6);
      timing_out.end_ns = timing_out.begin_ns + static_cast<std::int64_t>(duration_ms * 1e6);
      timing_out.bytes = done.bytes;
      timing_out.pinned = done.slab.pinned();
      timings->push_back(timing_out);
    }
    c.free_timing.push_back(timing);
    c.timing_of_in_flight.pop_front();
    in_flight_.pop_front();  // the slab returns to its pool
  }
}

void CopyEngine::wait_idle() {
  const detail::DeviceGuard guard(options_.device);
  FEEDSCOPE_CUDA_CALL(cudaStreamSynchronize(cuda_->stream));
}

int CopyEngine::buffers_in_use() const noexcept {
  int n = 0;
  for (const bool h : held_) n += h ? 1 : 0;
  return n;
}

void CopyEngine::order_before(int buffer, void* stream) const {
  const detail::DeviceGuard guard(options_.device);
  FEEDSCOPE_CUDA_CALL(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                          cuda_->ready[static_cast<std::size_t>(buffer)], 0));
}

void CopyEngine::release(int buffer, void* stream) noexcept {
  const auto b = static_cast<std::size_t>(buffer);
  int previous = 0;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != options_.device &&
                        cudaSetDevice(options_.device) == cudaSuccess;
  FEEDSCOPE_CUDA_CALL_NOEXCEPT(
      cudaEventRecord(cuda_->consumed[b], static_cast<cudaStream_t>(stream)));
  if (switched) FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaSetDevice(previous));
  held_[b] = false;
}

bool copy_engine_available(std::string* why_not) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    if (why_not != nullptr)
      *why_not = status != cudaSuccess
                     ? std::string("no CUDA device: ") + cudaGetErrorString(status)
                     : std::string("no CUDA device: none found");
    return false;
  }
  return true;
}

struct StepFence::Events {
  std::vector<cudaEvent_t> ring;
  std::size_t marks = 0;
};

StepFence::StepFence(int depth) : events_(std::make_unique<Events>()) {
  if (depth < 1) throw std::invalid_argument("step fence: depth must be 1 or more");
  events_->ring.resize(static_cast<std::size_t>(depth), nullptr);
  for (cudaEvent_t& e : events_->ring)
    FEEDSCOPE_CUDA_CALL(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

StepFence::~StepFence() {
  for (cudaEvent_t e : events_->ring)
    if (e != nullptr) FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaEventDestroy(e));
}

void StepFence::mark(void* stream) {
  Events& ev = *events_;
  FEEDSCOPE_CUDA_CALL(
      cudaEventRecord(ev.ring[ev.marks % ev.ring.size()], static_cast<cudaStream_t>(stream)));
  ++ev.marks;
}

void StepFence::wait_for_previous() {
  Events& ev = *events_;
  // The slot the next mark() overwrites holds the oldest step still allowed in flight.
  if (ev.marks >= ev.ring.size())
    FEEDSCOPE_CUDA_CALL(cudaEventSynchronize(ev.ring[ev.marks % ev.ring.size()]));
}

#else  // no CUDA in this build: the engine cannot be made; the fence does nothing

struct CopyEngine::Cuda {};

CopyEngine::CopyEngine(Options options) : options_(options) {
  throw DeviceError("copy engine: this feedscope was built without CUDA");
}
CopyEngine::~CopyEngine() = default;
DeviceCopy CopyEngine::submit(Slab, std::size_t, std::int64_t) { return {}; }
void CopyEngine::reclaim(std::vector<CopyTiming>*) {}
void CopyEngine::wait_idle() {}
int CopyEngine::buffers_in_use() const noexcept { return 0; }
void CopyEngine::order_before(int, void*) const {}
void CopyEngine::release(int, void*) noexcept {}

bool copy_engine_available(std::string* why_not) {
  if (why_not != nullptr) *why_not = "this feedscope was built without CUDA";
  return false;
}

struct StepFence::Events {};
StepFence::StepFence(int) {}
StepFence::~StepFence() = default;
void StepFence::mark(void*) {}
void StepFence::wait_for_previous() {}

#endif

}  // namespace feedscope
