#pragma once
// A running program `feedscope attach PID` reads without stopping, restarting or slowing it: it
// is no child of feedscope, so it is never waited for, reaped or sent a signal; its end is seen in
// /proc (gone, or a zombie its parent has not reaped). Reading it needs what the kernel asks of a
// reader of /proc/PID/{environ,io,syscall,mem}: ptrace access (the same user with Yama's
// ptrace_scope 0, CAP_SYS_PTRACE otherwise); nothing is traced or stopped with it.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace feedscope {

// How the window on an attached program ended.
enum class AttachEnd { duration, interrupted, program_ended };

class AttachedProcess {
 public:
  // Checks that `pid` can be attached to; throws ConfigError (cli/config.h), key "pid", naming
  // what is missing: no such process, a zombie, no right to read it (which right), a program that
  // is neither Python nor libtorch (nothing of its training loop could be read).
  explicit AttachedProcess(int pid);

  int pid() const noexcept { return pid_; }
  const std::vector<std::string>& command() const noexcept { return command_; }
  // "python3 (Python, libtorch)": what was found mapped in it.
  const std::string& what() const noexcept { return what_; }
  // Whether it has ended (gone from /proc, or a zombie).
  bool ended() const;
  // Waits until it ends, `duration_s` has passed (0: no limit), or feedscope is asked to stop
  // (SIGINT or SIGTERM while an InterruptGuard lives, cli/interrupt.h).
  AttachEnd wait(double duration_s) const;

 private:
  int pid_;
  std::vector<std::string> command_;
  std::string what_;
};

// The right a reader lacks to read another user's /proc/PID files: Yama's ptrace_scope where the
// kernel has it, and CAP_SYS_PTRACE. For the error message.
std::string ptrace_right_missing();

}  // namespace feedscope
