#include "cli/interrupt.h"

#include <signal.h>

#include <atomic>

namespace feedscope {
namespace {

// Below state is shared with the signal handler: a lock-free atomic is async-signal-safe.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

struct sigaction g_previous_int, g_previous_term;

void on_signal(int signal) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, signal);
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signal, &fallback, nullptr);  // the next one ends the process
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_signal.store(0);
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  // No SA_RESTART: a blocking read in the loop returns EINTR instead of waiting on.
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

int interrupt_signal() noexcept { return g_signal.load(std::memory_order_relaxed); }

const char* interrupt_signal_name(int signal) noexcept {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case 0: return "";
    default: return "signal";
  }
}

int interrupted_exit_code(const std::string& signal_name) noexcept {
  if (signal_name == "SIGINT") return 128 + SIGINT;
  if (signal_name == "SIGTERM") return 128 + SIGTERM;
  return 0;
}

}  // namespace feedscope
