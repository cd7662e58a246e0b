#pragma once
// Ctrl-C and SIGTERM end a run early but cleanly: the run loop polls for the request, stops
// loading, joins every thread and writes the partial report.
#include <string>

namespace feedscope {

// While alive, the first SIGINT or SIGTERM becomes a request that interrupt_signal() returns;
// the handler then restores the default action, so a second signal ends the process at once (the
// user means it). One guard at a time; construct and destroy on the main thread.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// The signal that asked the run to stop, or 0. Async-signal-safe to set; cheap to poll per step.
int interrupt_signal() noexcept;
// "SIGINT", "SIGTERM", or "" for 0.
const char* interrupt_signal_name(int signal) noexcept;
// The shell's exit code for a run stopped by the signal so named (130, 143), so scripts see it
// was not complete; 0 otherwise (not interrupted).
int interrupted_exit_code(const std::string& signal_name) noexcept;

}  // namespace feedscope
