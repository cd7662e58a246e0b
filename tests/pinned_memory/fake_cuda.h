#pragma once
// A simulated CUDA device behind detail::CudaOps, so that the copy engine's and the step fence's
// bookkeeping run in tests without a GPU. Streams are queues of operations that run only when the
// test says so (run_all(), run_one()) or while the host idles in a wait (idle() runs one operation
// of each stream), so a test decides what the device has finished at every point. It checks what
// the CUDA runtime would reject: an event recorded on a stream of another device, a handle used
// after it was destroyed. Each call is logged with its CUDA runtime name and the current device.
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "pinned_memory/detail/cuda_ops.h"
#include "pinned_memory/errors.h"
#include "pinned_memory/host_allocator.h"

namespace feedscope::testing {

// The simulated device's page-locked memory: ordinary pages that say they are pinned, so a copy
// engine on FakeCuda takes the path a cudaHostAlloc'd slab takes (its copy never blocks the host).
class FakePinnedAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override { return page_->allocate(bytes); }
  void deallocate(void* ptr, std::size_t bytes) noexcept override { page_->deallocate(ptr, bytes); }
  bool pinned() const noexcept override { return true; }
  std::string_view name() const noexcept override { return "fake-pinned"; }

 private:
  std::unique_ptr<HostAllocator> page_ = make_page_allocator();
};

class FakeCuda final : public detail::CudaOps {
 public:
  struct Call {
    std::string name;  // "cudaEventRecord", as CUPTI names the runtime call
    int device = 0;    // current when it was made
  };

  explicit FakeCuda(int devices = 1, double bytes_per_ms = 1e6) : bytes_per_ms_(bytes_per_ms) {
    for (int d = 0; d < devices; ++d) {
      auto legacy = std::make_unique<Stream>();
      legacy->device = d;
      legacy_.push_back(legacy.get());
      streams_.push_back(std::move(legacy));
      clock_ms_.push_back(0);
    }
  }

  // --- the test's side -----------------------------------------------------------------------
  // Runs every queued operation that can run; a wait on an event not yet done blocks its stream.
  void run_all() {
    while (run_each_once()) {
    }
  }
  // Runs `stream`'s operations until it is empty or blocked; how many ran.
  int run_stream(void* stream) {
    int n = 0;
    while (run_one(stream_of(stream))) ++n;
    return n;
  }
  // Runs at most one operation of each stream not held; false when none ran.
  bool run_each_once() {
    bool ran = false;
    for (auto& s : streams_)
      if (!s->destroyed && !s->held) ran = run_one(*s) || ran;
    return ran;
  }
  // A held stream runs nothing until released: a long kernel, say.
  void hold(void* stream, bool held) { stream_of(stream).held = held; }
  // Device time spent so far, milliseconds: copies take bytes / bytes_per_ms.
  double clock_ms(int device) const { return clock_ms_.at(static_cast<std::size_t>(device)); }
  void advance_ms(int device, double ms) { clock_ms_.at(static_cast<std::size_t>(device)) += ms; }
  // The legacy default stream of `device` as a handle (what null means there).
  void* legacy_stream(int device) { return legacy_.at(static_cast<std::size_t>(device)); }
  std::size_t queued(void* stream) { return stream_of(stream).ops.size(); }
  const std::vector<Call>& calls() const { return calls_; }
  void clear_calls() { calls_.clear(); }
  int idles() const { return idles_; }
  int live_events() const { return live(events_); }
  int live_streams() const { return live(streams_) - static_cast<int>(legacy_.size()); }
  // The test's own allocate() calls count too.
  int live_allocations() const { return static_cast<int>(allocations_.size()); }
  // Every host->device copy that ran, in order: (bytes, first byte).
  struct Copy {
    std::size_t bytes = 0;
    std::byte first{};
  };
  const std::vector<Copy>& copies() const { return copies_; }
  // When false, idle() leaves the device alone: a wait then polls until it gives up.
  bool device_runs_while_host_idles = true;
  // Called with the attempt at each idle(), before the device runs: a test lets its own clock
  // advance there, or finishes a held step once the host has waited on it.
  std::function<void(int attempt)> on_idle;

  // --- detail::CudaOps -----------------------------------------------------------------------
  int device_count(const char** why_not) override {
    log("cudaGetDeviceCount");
    if (legacy_.empty() && why_not != nullptr) *why_not = "none found (fake)";
    return static_cast<int>(legacy_.size());
  }
  int current_device() override {
    log("cudaGetDevice");
    return current_;
  }
  void set_device(int device) override {
    log("cudaSetDevice");
    if (device < 0 || device >= static_cast<int>(legacy_.size()))
      throw DeviceError("cudaSetDevice: invalid device " + std::to_string(device));
    current_ = device;
  }
  void set_device_noexcept(int device) noexcept override {
    log("cudaSetDevice");
    current_ = device;
  }
  void* create_stream() override {
    log("cudaStreamCreateWithFlags");
    auto s = std::make_unique<Stream>();
    s->device = current_;
    streams_.push_back(std::move(s));
    return streams_.back().get();
  }
  void destroy_stream(void* stream) noexcept override {
    log("cudaStreamDestroy");
    stream_of(stream).destroyed = true;
  }
  void* allocate(std::size_t bytes) override {
    log("cudaMalloc");
    auto block = std::make_unique<std::vector<std::byte>>(bytes);
    void* p = block->data();
    allocations_[p] = std::move(block);
    return p;
  }
  void release(void* device_memory) noexcept override {
    log("cudaFree");
    allocations_.erase(device_memory);
  }
  void* create_event(bool timing) override {
    log("cudaEventCreateWithFlags");
    auto e = std::make_unique<Event>();
    e->device = current_;
    e->timing = timing;
    events_.push_back(std::move(e));
    return events_.back().get();
  }
  void destroy_event(void* event) noexcept override {
    log("cudaEventDestroy");
    static_cast<Event*>(event)->destroyed = true;
  }
  void record(void* event, void* stream) override {
    log("cudaEventRecord");
    Event& e = event_of(event);
    Stream& s = stream_of(stream);
    if (e.device != s.device)
      throw DeviceError("cudaEventRecord: event of device " + std::to_string(e.device) +
                        " on a stream of device " + std::to_string(s.device));
    e.done = false;
    ++e.pending;
    s.ops.push_back(Op{Op::record, &e, nullptr, nullptr, 0});
  }
  void record_noexcept(void* event, void* stream) noexcept override {
    try {
      record(event, stream);
    } catch (...) {
      ++errors_;
    }
  }
  bool query(void* event) override {
    log("cudaEventQuery");
    return event_of(event).done;
  }
  float elapsed_ms(void* begin, void* end) override {
    log("cudaEventElapsedTime");
    const Event& b = event_of(begin);
    const Event& e = event_of(end);
    if (!b.timing || !e.timing || !b.done || !e.done || b.recorded_at < 0)
      throw DeviceError("cudaEventElapsedTime: an event without timing or not done");
    return static_cast<float>(e.at_ms - b.at_ms);
  }
  void stream_wait(void* stream, void* event) override {
    log("cudaStreamWaitEvent");
    Stream& s = stream_of(stream);
    Event& e = event_of(event);
    // Waits for the event's latest record as of now, as CUDA does; none pending: no wait.
    if (e.pending > 0)
      s.ops.push_back(Op{Op::wait, &e, nullptr, nullptr, 0, e.records + e.pending});
  }
  void copy_to_device_async(void* dst, const void* src, std::size_t bytes, void* stream) override {
    log("cudaMemcpyAsync");
    stream_of(stream).ops.push_back(Op{Op::copy, nullptr, dst, src, bytes});
  }
  void idle(int attempt) override {
    ++idles_;
    if (attempt > 100000) throw std::runtime_error("FakeCuda: a wait that never ends");
    if (on_idle) on_idle(attempt);
    if (device_runs_while_host_idles) run_each_once();
  }

  int errors() const { return errors_; }

 private:
  struct Event {
    int device = 0;
    bool timing = false;
    bool done = true;  // CUDA: an event never recorded queries as done
    bool destroyed = false;
    int pending = 0;   // records queued, not yet run
    int records = 0;   // records run
    double recorded_at = -1;
    double at_ms = 0;
  };
  struct Op {
    enum Kind { record, wait, copy } kind;
    Event* event;
    void* dst;
    const void* src;
    std::size_t bytes;
    int wait_for_records = 0;  // wait: the event's record count that satisfies it
  };
  struct Stream {
    int device = 0;
    bool destroyed = false;
    bool held = false;
    std::deque<Op> ops;
  };

  void log(const char* name) { calls_.push_back({name, current_}); }

  Stream& stream_of(void* stream) {
    Stream* s = stream == nullptr ? legacy_.at(static_cast<std::size_t>(current_))
                                  : static_cast<Stream*>(stream);
    if (s->destroyed) throw DeviceError("fake CUDA: a destroyed stream was used");
    return *s;
  }
  Event& event_of(void* event) {
    auto* e = static_cast<Event*>(event);
    if (e == nullptr || e->destroyed) throw DeviceError("fake CUDA: a destroyed event was used");
    return *e;
  }

  bool run_one(Stream& s) {
    if (s.ops.empty()) return false;
    Op& op = s.ops.front();
    double& clock = clock_ms_[static_cast<std::size_t>(s.device)];
    switch (op.kind) {
      case Op::record:
        --op.event->pending;
        ++op.event->records;
        op.event->done = op.event->pending == 0;
        op.event->recorded_at = clock;
        op.event->at_ms = clock;
        break;
      case Op::wait:
        if (op.event->records < op.wait_for_records) return false;  // blocked
        break;
      case Op::copy:
        std::memcpy(op.dst, op.src, op.bytes);
        copies_.push_back({op.bytes, op.bytes > 0 ? *static_cast<const std::byte*>(op.src)
                                                  : std::byte{}});
        clock += static_cast<double>(op.bytes) / bytes_per_ms_;
        break;
    }
    s.ops.pop_front();
    return true;
  }

  template <typename T>
  static int live(const std::vector<std::unique_ptr<T>>& v) {
    int n = 0;
    for (const auto& x : v) n += x->destroyed ? 0 : 1;
    return n;
  }

  double bytes_per_ms_;
  int current_ = 0;
  int idles_ = 0;
  int errors_ = 0;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<Stream*> legacy_;
  std::vector<std::unique_ptr<Event>> events_;
  std::map<void*, std::unique_ptr<std::vector<std::byte>>> allocations_;
  std::vector<double> clock_ms_;
  std::vector<Call> calls_;
  std::vector<Copy> copies_;
};

}  // namespace feedscope::testing
