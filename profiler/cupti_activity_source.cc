#include "profiler/cupti_activity_source.h"

#include <string>

#if FEEDSCOPE_WITH_CUDA
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>

#include "loader/span_recorder.h"
#include "pinned_memory/device_probe.h"
#include "profiler/detail/cupti_api.h"
#include "profiler/detail/cupti_records.h"
#include "profiler/detail/trace_timer.h"
#endif

namespace feedscope {

#if FEEDSCOPE_WITH_CUDA

namespace {

// A source owns CUPTI's callbacks (detail/cupti_records.h) while it records.
std::atomic<bool>& claimed() {
  static std::atomic<bool> claimed{false};
  return claimed;
}

// Under sampled tracing, a timer of the source's own opens and closes the device's records at the
// schedule's edges, as the injection's flush thread does under watch, and has CUPTI hand its
// buffers over every kFlushEvery: the lead counts from the first kernel record the recorder saw.
constexpr auto kFlushEvery = std::chrono::milliseconds(250);

// Timer thread only: says the first failure on stderr, once.
void follow_sampling(bool& said) {
  std::string why = detail::follow_trace_sampling(now_ns());
  if (why.empty()) why = detail::flush_cupti_records(false);
  if (why.empty() || said) return;
  said = true;
  std::fprintf(stderr, "feedscope: GPU activity trace: sampled tracing: %s\n", why.c_str());
}

// Owner thread only (start/stop/collect); CUPTI's buffer thread fills the shared records.
class CuptiActivitySource final : public GpuActivitySource {
 public:
  explicit CuptiActivitySource(const TraceSampling& sampling) : sampling_(sampling) {}
  ~CuptiActivitySource() override {
    stop();
    if (owner_) {
      detail::take_cupti_records();  // the next source starts empty
      claimed().store(false);
    }
  }

  bool start() override {
    if (running_) return true;
    if (!reason_.empty()) return false;
    if (!detail::cupti().loaded) {
      reason_ = "CUPTI: " + detail::cupti().reason;
      log_once(reason_);
      return false;
    }
    // Without a driver CUPTI's activity calls fail with CUPTI_ERROR_UNKNOWN at best; ask the
    // runtime first, which says why, and leave CUPTI alone where there is nothing to trace.
    if (const DeviceProbe probe = probe_cuda(); !probe.available()) {
      reason_ = "CUPTI: no CUDA device to trace: " + probe.unavailable_reason;
      log_once(reason_);
      return false;
    }
    if (!owner_) {
      bool expected = false;
      if (!claimed().compare_exchange_strong(expected, true)) {
        reason_ = "CUPTI: another activity source is recording in this process";
        return false;
      }
      owner_ = true;
    }
    detail::TracingRequest request = detail::tracing_request(true);
    request.sampling = sampling_;
    if (std::string why = detail::start_cupti_recording(request); !why.empty()) {
      // Let a later source try; this one keeps its reason.
      reason_ = std::move(why);
      log_once(reason_);
      owner_ = false;
      claimed().store(false);
      return false;
    }
    running_ = true;
    if (sampling_.sampled())
      timer_.emplace(kFlushEvery, detail::next_trace_sampling_change,
                     [said = false]() mutable { follow_sampling(said); });
    return true;
  }

  void stop() override {
    if (!running_) return;
    running_ = false;
    timer_.reset();  // no switch after the recording stopped
    if (const std::string why = detail::stop_cupti_recording(); !why.empty()) log_once(why);
  }

  GpuActivity collect() override {
    if (!owner_) return {};
    if (running_) {
      if (const std::string why = detail::flush_cupti_records(false); !why.empty()) log_once(why);
    }
    GpuActivity out = detail::take_cupti_records();
    out.tracing = detail::cupti_tracing();
    return out;
  }

  std::string unavailable_reason() const override { return reason_; }

 private:
  // Tracing degrades quietly after the first word: a failing call may repeat every collect().
  void log_once(const std::string& text) {
    if (logged_) return;
    logged_ = true;
    std::fprintf(stderr, "feedscope: GPU activity trace: %s\n", text.c_str());
  }

  const TraceSampling sampling_;
  bool owner_ = false;    // holds claimed()
  bool running_ = false;
  std::optional<detail::TraceTimer> timer_;  // while running under sampled tracing
  bool logged_ = false;
  std::string reason_;
};

}  // namespace

std::unique_ptr<GpuActivitySource> make_cupti_source(const TraceSampling& sampling) {
  return std::make_unique<CuptiActivitySource>(sampling);
}

#else  // !FEEDSCOPE_WITH_CUDA

namespace {

// Stateless; any thread.
class NoCuptiSource final : public GpuActivitySource {
 public:
  bool start() override { return false; }
  void stop() override {}
  GpuActivity collect() override { return {}; }
  std::string unavailable_reason() const override {
    return "built without CUDA (FEEDSCOPE_WITH_CUDA=OFF)";
  }
};

}  // namespace

std::unique_ptr<GpuActivitySource> make_cupti_source(const TraceSampling&) {
  return std::make_unique<NoCuptiSource>();
}

#endif

}  // namespace feedscope
