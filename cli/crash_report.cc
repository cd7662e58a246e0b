#include "cli/crash_report.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace feedscope {
namespace {

// Only write(2) and fixed buffers from here on: the handler may run with the heap corrupted.
void put(const char* s) {
  const std::size_t n = std::strlen(s);
  [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, s, n);
}

void put_hex(std::uintptr_t v) {
  char buf[2 + 16 + 1];
  char* p = buf + sizeof buf - 1;
  *p = '\0';
  do {
    *--p = "0123456789abcdef"[v & 0xf];
    v >>= 4;
  } while (v != 0);
  *--p = 'x';
  *--p = '0';
  put(p);
}

// "  #N 0xADDR MODULE+0xOFFSET (SYMBOL+0xOFF)"
void put_frame(int n, std::uintptr_t pc) {
  char num[8];
  int len = 0;
  for (int v = n; len == 0 || v > 0; v /= 10) num[len++] = static_cast<char>('0' + v % 10);
  put("  #");
  while (len > 0) {
    const char c[2] = {num[--len], '\0'};
    put(c);
  }
  put(" ");
  put_hex(pc);
  Dl_info info{};
  // A return address points after the call: look up the call itself.
  if (pc != 0 && ::dladdr(reinterpret_cast<void*>(pc - (n > 0 ? 1 : 0)), &info) != 0 && info.dli_fname) {
    put(" ");
    put(info.dli_fname);
    put("+");
    put_hex(pc - reinterpret_cast<std::uintptr_t>(info.dli_fbase));
    if (info.dli_sname) {
      put(" (");
      put(info.dli_sname);
      put("+");
      put_hex(pc - reinterpret_cast<std::uintptr_t>(info.dli_saddr));
      put(")");
    }
  } else if (pc == 0) {
    put(" (a call through a null function pointer)");
  }
  put("\n");
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "a fatal signal";
  }
}

void on_crash(int signal, siginfo_t* info, void* context) {
  put("\nfeedscope: crashed with ");
  put(signal_name(signal));
  if (signal != SIGABRT) {
    put(" at address ");
    put_hex(reinterpret_cast<std::uintptr_t>(info->si_addr));
  }
  put(". This is a bug in feedscope; please report it with these lines:\n");
  int frame = 0;
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  const auto pc = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  const auto sp = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
  put_frame(frame++, pc);
  // A jump to a bad address leaves no frame to unwind from, but the call pushed where it came from.
  Dl_info where{};
  if (pc == 0 || ::dladdr(reinterpret_cast<void*>(pc), &where) == 0)
    put_frame(frame++, *reinterpret_cast<const std::uintptr_t*>(sp));
#else
  (void)context;
#endif
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  put("  unwound from the handler:\n");
  for (int i = 0; i < n; ++i) put_frame(frame++, reinterpret_cast<std::uintptr_t>(frames[i]));
  // Die of the same signal, as without the report.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  ::sigaction(signal, &fallback, nullptr);
  ::raise(signal);
}

}  // namespace

void install_crash_report() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return;  // the sanitizers' own report says more
#endif
  // backtrace() loads libgcc's unwinder on its first call (a malloc): do it now, not in a crash.
  void* warm[1];
  ::backtrace(warm, 1);
  static char alt_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  ::sigaltstack(&ss, nullptr);
  struct sigaction action {};
  action.sa_sigaction = on_crash;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(signal, &action, nullptr);
}

}  // namespace feedscope
