#pragma once
// A program feedscope runs but did not write (`feedscope watch`, a sweep point with a COMMAND):
// started from an argv with execvp, never through a shell; its output passes through (or, when a
// line callback is given, through a pipe that also hands each line over); signals sent to
// feedscope are forwarded to it; it is waited for without being reaped, so its /proc entry stays
// readable for a last sample.
#include <signal.h>

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace feedscope {

// The program could not be started: the message names it and says why; exit_code is the shell's
// (127 not found, 126 not executable).
class ChildStartError : public std::runtime_error {
 public:
  ChildStartError(const std::string& what, int exit_code)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

struct ChildExit {
  int code = 0;    // exit status, or 0 when killed by a signal
  int signal = 0;  // the signal that ended it, or 0
  bool core_dumped = false;
  // The shell's convention: the exit status, or 128 + the signal.
  int shell_code() const noexcept { return signal != 0 ? 128 + signal : code; }
  std::string describe() const;  // "exited with 0", "killed by SIGSEGV (core dumped)"
};

class ChildProcess {
 public:
  struct Options {
    std::vector<std::string> argv;
    std::map<std::string, std::string> env;  // set (or replaced) in its environment
    // Each line the program prints on stdout or stderr, after it has passed through to ours; a
    // carriage return ends a line too, and empty lines are not handed over.
    std::function<void(std::string_view line)> on_line;
    // Where its stdout and stderr go instead of ours (a sweep point's output.log); empty: ours.
    std::string output_path;
  };
  // Starts it. Throws ChildStartError when it cannot be started (checked before returning).
  explicit ChildProcess(Options options);
  // Kills it (SIGKILL) and reaps it if it is still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  int pid() const noexcept { return pid_; }
  // True once it has exited, waiting at most until `deadline` (none: as long as it takes). It is
  // not reaped: its /proc/<pid> stays readable until reap().
  bool wait_exited(std::optional<std::chrono::steady_clock::time_point> deadline);
  void signal(int sig) noexcept;
  // Reaps it (waiting if needed) and joins the output pipes. Idempotent.
  ChildExit reap();

 private:
  int pid_ = -1;
  std::optional<ChildExit> exit_;
  std::vector<std::thread> pumps_;
  int output_fd_ = -1;  // the output_path file, closed once the pumps are done
};

// While alive, SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to feedscope are passed on to the running
// child (a Ctrl-C from the terminal reaches the child on its own, as one process group; a kill(1)
// of feedscope does not), and the first is remembered. Main thread only; one may live inside
// another (the runs of `watch --try` inside the watch): the inner one forwards while it lives.
class SignalForwarder {
 public:
  explicit SignalForwarder(int child_pid);
  ~SignalForwarder();
  SignalForwarder(const SignalForwarder&) = delete;
  SignalForwarder& operator=(const SignalForwarder&) = delete;
  // The first signal received, or 0.
  int received() const noexcept;
  // The child was reaped: a signal from now on is remembered, not sent (its pid may be another's).
  void child_ended() noexcept;

 private:
  int outer_child_ = 0;
  int outer_received_ = 0;
  std::array<struct sigaction, 4> previous_{};  // the handlers before it, by kForwarded's order
};

// The first signal a living SignalForwarder (or one inside it) received, or 0.
int forwarded_signal() noexcept;

}  // namespace feedscope
