#pragma once
// A running program `feedscope attach PID` reads without stopping, restarting or slowing it: it
// is no child of feedscope, so it is never waited for, reaped or sent a signal; its end is seen in
// /proc (gone, or a zombie its parent has not reaped). Reading it needs what the kernel asks of a
// reader of /proc/PID/{environ,io,syscall,mem}: ptrace access (the same user with Yama's
// ptrace_scope 0, CAP_SYS_PTRACE otherwise); nothing is traced or stopped with it.
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string_view>
#include <thread>
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

// What the program prints, where its stdout or stderr is a regular file (`> train.log`, nohup's
// nohup.out): the lines appended from now on, handed to `on_line` from a thread of its own about
// four times a second, until destroyed. A pipe or a terminal is never read: what is read from one
// is taken from its reader. `files()` names the files followed (none: nothing to read).
class OutputFollower {
 public:
  OutputFollower(int pid, std::function<void(std::string_view line)> on_line);
  ~OutputFollower();
  OutputFollower(const OutputFollower&) = delete;
  OutputFollower& operator=(const OutputFollower&) = delete;
  const std::vector<std::string>& files() const noexcept { return files_; }

 private:
  void run();
  std::function<void(std::string_view)> on_line_;
  std::vector<int> fds_;
  std::vector<std::string> files_;
  std::vector<std::string> partial_;  // each file's line not yet ended
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The right a reader lacks to read another user's /proc/PID files: Yama's ptrace_scope where the
// kernel has it, and CAP_SYS_PTRACE. For the error message.
std::string ptrace_right_missing();

}  // namespace feedscope
