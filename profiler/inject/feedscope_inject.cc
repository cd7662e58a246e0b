// libfeedscope_inject.so: CUPTI tracing of a program feedscope did not write. `feedscope watch`
// names it in CUDA_INJECTION64_PATH; the CUDA driver loads it and calls InitializeInjection once
// per process, inside cuInit. It records the same activity as the in-process source
// (detail/cupti_records.h), the device's records in sampled windows where watch asks
// (FEEDSCOPE_GPU_TRACE_SAMPLE), and appends it every 200 ms to $FEEDSCOPE_WATCH_DIR/gpu-<pid>.fsgpu
// in the format of profiler/gpu_activity_wire.h, first a status frame: "recording: <which CUPTI,
// which clock>" and a tracing frame (which calls CUPTI records), or "unavailable: <why>". Later
// trouble adds "interrupted: <why>" (and "recording" again should the records come back). Nothing
// here may crash or block the program: failures become statuses.
//
// It runs inside cuInit, so it calls neither the CUDA runtime nor any driver call that would
// initialize CUDA again (cuDriverGetVersion needs no initialization).
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "loader/span_recorder.h"
#include "profiler/detail/cupti_api.h"
#include "profiler/detail/cupti_records.h"
#include "profiler/detail/takeover_probe.h"
#include "profiler/detail/trace_timer.h"
#include "profiler/gpu_activity_wire.h"

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void);

namespace feedscope::inject {

namespace {

using namespace std::chrono_literals;

constexpr auto kFlushEvery = 200ms;
// A probe asks CUPTI for one device record; the buffer it lands in comes back with a later flush
// while our callbacks hold the activity API (detail/takeover_probe.h). 30 s without any buffer
// after one is said: not sooner, since the default flush holds back a buffer with a kernel still
// running (a long one). FEEDSCOPE_INJECT_PROBE_TIMEOUT_MS shortens the wait for tests.
constexpr int kTicksBetweenProbes = 10;
constexpr std::int64_t kProbeTimeoutNs = 30'000'000'000;

// One watched process's recording. Shared by the thread that initialized CUDA, the flush thread
// and the atexit handler: the file is written under `mutex`, the flags are atomics.
struct Recording {
  pid_t pid = 0;
  int fd = -1;
  std::mutex mutex;  // one frame at a time in the file
  // Flushes every kFlushEvery, and switches sampled windows on time (flush_once).
  std::optional<detail::TraceTimer> flusher;
  std::uint64_t ticks = 0;  // the flush thread's
  bool force_next_flush = false;  // the flush thread's: a window closed at the last tick
  std::atomic<bool> flush_failed{false};
  // The takeover probe, the flush thread's own but used by the exit handler after the join; its
  // timeout set before the flush thread starts.
  detail::TakeoverProbe probe{kProbeTimeoutNs};
  bool foreign_said = false;  // likewise
  bool switch_failure_said = false;  // likewise
};

// The recording of the process that holds it; a fork()ed child sees its parent's and leaves it
// alone (pid), and gets its own should it initialize CUDA itself. Leaked: the atexit handler and
// CUPTI's threads may use it while static destructors run.
std::atomic<Recording*> current{nullptr};

bool write_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// One frame, whole: O_APPEND places it at the end in one write, so a reader meets at most one torn
// frame, the last, and only while it is being written or after a kill.
void write_frame(Recording& r, const std::string& frame) {
  if (r.pid != ::getpid()) return;
  std::lock_guard lock(r.mutex);
  if (!write_all(r.fd, frame))
    std::fprintf(stderr, "feedscope inject: cannot write the GPU activity file: %s\n",
                 std::strerror(errno));
}

void write_status(Recording& r, const std::string& status) {
  write_frame(r, encode_gpu_status(status));
}

void write_records(Recording& r) {
  GpuActivity activity = detail::take_cupti_records();
  if (!activity.empty() || activity.dropped != 0 || activity.not_kept != 0 ||
      activity.bad_timestamps != 0 || activity.incomplete_buffers != 0 ||
      !activity.traced_windows.empty() || activity.outside_windows != 0)
    write_frame(r, encode_gpu_activity(activity));
}

// "CUDA 13.0" from CUPTI's xxyyzz API version or the driver's 1000 * major + 10 * minor.
std::string cuda_text(int major, int minor) {
  return "CUDA " + std::to_string(major) + "." + std::to_string(minor);
}

// Empty when the driver of this process can host the loaded CUPTI; otherwise why not. The driver
// is the libcuda.so that called us, found among the loaded objects as detail/cupti_api finds a
// loaded CUPTI.
std::string driver_refusal(std::uint32_t cupti_version) {
  std::string driver_path;
  for (const std::string& path : detail::loaded_object_paths()) {
    const std::size_t slash = path.rfind('/');  // npos + 1: the whole path
    if (std::string_view(path).substr(slash + 1).starts_with("libcuda.so")) {
      driver_path = path;
      break;
    }
  }
  if (driver_path.empty())
    return "no CUDA driver (libcuda.so.1) is loaded in this process; the driver calls "
           "InitializeInjection from cuInit";
  void* lib = ::dlopen(driver_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  using GetVersion = int (*)(int*);
  const auto get = lib ? reinterpret_cast<GetVersion>(::dlsym(lib, "cuDriverGetVersion")) : nullptr;
  int driver = 0;
  if (get == nullptr || get(&driver) != 0 || driver <= 0)
    return "the CUDA driver (" + driver_path + ") does not say its version (cuDriverGetVersion)";
  const int cupti_major = static_cast<int>(cupti_version / 10000);
  const int cupti_minor = static_cast<int>(cupti_version / 100 % 100);
  const int driver_major = driver / 1000, driver_minor = driver % 1000 / 10;
  // CUPTI needs a driver of its CUDA major at least; within a major, CUPTI's own calls decide
  // (CUPTI_ERROR_NOT_INITIALIZED where it cannot attach).
  if (driver_major < cupti_major)
    return "CUPTI is newer than the CUDA driver: CUPTI of " + cuda_text(cupti_major, cupti_minor) +
           " (API version " + std::to_string(cupti_version) + ", " + detail::cupti().name +
           ") needs a driver for " + cuda_text(cupti_major, 0) + " or later; this driver (" +
           driver_path + ") supports " + cuda_text(driver_major, driver_minor);
  return "";
}

// Why CUPTI cannot record in this process, or empty once it records.
std::string start_cupti() {
  const detail::CuptiLibrary& cupti = detail::cupti();
  if (!cupti.loaded) return "CUPTI: " + cupti.reason;
  if (std::string why = driver_refusal(cupti.version); !why.empty()) return why;
  return detail::start_cupti_recording(detail::tracing_request(false));
}

// The first status of a start that records: which libcupti the program traced with, and on what
// clock, since a CUDA torch brings a CUPTI of its own that need not be the toolkit's.
std::string recording_status() {
  const detail::CuptiLibrary& cupti = detail::cupti();
  const int major = static_cast<int>(cupti.version / 10000);
  const int minor = static_cast<int>(cupti.version / 100 % 100);
  return "recording: CUPTI of " + cuda_text(major, minor) + " (API version " +
         std::to_string(cupti.version) + ") from " + cupti.path +
         "; timestamps: " + detail::cupti_clock();
}

// FEEDSCOPE_INJECT_PROBE_TIMEOUT_MS where it names 1 ms to 1 h, else the 30 s.
std::int64_t probe_timeout_ns() {
  const char* text = std::getenv("FEEDSCOPE_INJECT_PROBE_TIMEOUT_MS");
  if (text == nullptr || *text == '\0') return kProbeTimeoutNs;
  char* end = nullptr;
  const long long ms = std::strtoll(text, &end, 10);
  if (*end != '\0' || ms < 1 || ms > 3'600'000) return kProbeTimeoutNs;
  return ms * 1'000'000;
}

// Flush thread only (the exit handler after the join). Says "interrupted" once when no buffer has
// reached our callbacks for a probe's timeout, and that they came back should one reach them later.
// Never forces a flush for it: that would cut the buffer of a kernel still running short.
void check_probe(Recording& r, std::int64_t now, bool at_exit) {
  switch (r.probe.check(now, detail::cupti_callback_counts().buffers_completed, at_exit)) {
    case detail::TakeoverProbe::Change::none:
      return;
    case detail::TakeoverProbe::Change::went_silent:
      write_status(r, "interrupted: another CUPTI client (torch.profiler?) took the activity API, "
                      "or CUPTI holds back the buffer of a GPU activity still running: no record "
                      "has reached feedscope since " +
                          std::to_string(r.probe.silent_since()) + " ns (CLOCK_MONOTONIC)");
      return;
    case detail::TakeoverProbe::Change::came_back:
      write_status(r, "recording: records reach feedscope again, so no other client took the "
                      "activity API: CUPTI held back a buffer while an activity in it ran");
      return;
  }
}

void ask_probe(Recording& r, std::int64_t now) {
  const std::uint64_t buffers = detail::cupti_callback_counts().buffers_completed;
  if (detail::probe_cupti_callbacks().empty()) r.probe.probed(now, buffers);
}

// Flush thread only (the exit handler after the join). Says once that CUPTI completed another
// client's buffer to our callbacks: that client registered its own before ours and loses them.
void check_foreign(Recording& r) {
  if (r.foreign_said || detail::cupti_callback_counts().foreign_buffers == 0) return;
  r.foreign_said = true;
  write_status(r, "recording; CUPTI handed feedscope the buffers of another CUPTI client "
                  "(torch.profiler?) that registered its callbacks first: feedscope leaves them "
                  "alone, and that client misses the records in them");
}

// Flush thread only. Opens or closes the sampled window the schedule says for now; says once
// when CUPTI refused a switch.
void follow_sampling(Recording& r) {
  const std::string why = detail::follow_trace_sampling(now_ns());
  if (why.empty() || r.switch_failure_said) return;
  r.switch_failure_said = true;
  write_status(r, "recording; sampled tracing could not switch the device's records: " + why);
}

void flush_once(Recording& r, std::uint64_t tick) {
  const bool was_open = detail::trace_window_open();
  follow_sampling(r);
  // A process that leaves by os._exit (a fork-started rank) runs no atexit handler, and a default
  // flush holds back a buffer with an incomplete record: a tick after a window closed, when its
  // kernels have ended and no new record is being made, the flush is forced.
  const bool forced = std::exchange(r.force_next_flush, was_open && !detail::trace_window_open());
  if (std::string why = detail::flush_cupti_records(forced); !why.empty()) {
    // After a client's cuptiFinalize, say (kineto's teardown), every flush fails alike.
    if (!r.flush_failed.exchange(true))
      write_status(r, "interrupted: " + why + " at " + std::to_string(now_ns()) +
                          " ns (CLOCK_MONOTONIC)");
    return;
  }
  write_records(r);
  check_foreign(r);
  const std::int64_t now = now_ns();
  check_probe(r, now, false);
  if (!r.probe.pending() && tick % kTicksBetweenProbes == 1) ask_probe(r, now);
}

// At exit: the flush thread stops, CUPTI hands over every buffer (forced), the rest is written.
void finish() {
  Recording* r = current.load();
  if (r == nullptr || r->pid != ::getpid()) return;
  r->flusher.reset();
  if (r->flush_failed.load()) {
    write_records(*r);
    return;
  }
  detail::stop_cupti_recording();
  write_records(*r);
  check_foreign(*r);
  check_probe(*r, now_ns(), true);
}

int initialize() {
  const char* dir = std::getenv("FEEDSCOPE_WATCH_DIR");
  if (dir == nullptr || *dir == '\0') return 1;
  const pid_t pid = ::getpid();
  Recording* previous = current.load();
  if (previous != nullptr && previous->pid == pid) return 1;  // once per process
  auto* r = new Recording;
  r->pid = pid;
  const std::string path = gpu_activity_file(dir, pid).string();
  r->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (r->fd < 0) {
    std::fprintf(stderr, "feedscope inject: cannot open %s: %s\n", path.c_str(),
                 std::strerror(errno));
    delete r;
    return 1;
  }
  current.store(r);
  if (const std::string why = start_cupti(); !why.empty()) {
    write_status(*r, "unavailable: " + why);
    return 1;
  }
  write_status(*r, recording_status());
  if (const std::optional<TracingMode> tracing = detail::cupti_tracing())
    write_frame(*r, encode_gpu_tracing(*tracing));
  r->probe = detail::TakeoverProbe(probe_timeout_ns());
  r->flusher.emplace(kFlushEvery, detail::next_trace_sampling_change,
                     [r] { flush_once(*r, ++r->ticks); });
  std::atexit(finish);
  return 1;
}

}  // namespace

}  // namespace feedscope::inject

extern "C" int InitializeInjection(void) {
  // Nothing may unwind into the driver's cuInit.
  try {
    return feedscope::inject::initialize();
  } catch (...) {
    return 1;
  }
}
