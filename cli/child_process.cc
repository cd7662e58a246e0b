#include "cli/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace feedscope {

namespace {

const char* signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return abbrev;
  return "?";
}

// Copies everything from `fd` to `out_fd`, handing complete lines to `on_line`; the last partial
// line too, at the end. A `\r` ends a line as a `\n` does: tqdm redraws its bar with one, and
// prints no `\n` until the bar is done.
void pump(int fd, int out_fd, const std::function<void(std::string_view)>& on_line) {
  std::string pending;
  std::array<char, 65536> buf{};
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out_fd, buf.data() + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;  // our output is gone: keep reading, so the program never blocks
      done += w;
    }
    pending.append(buf.data(), static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; (nl = pending.find_first_of("\r\n", start)) != std::string::npos; start = nl + 1)
      if (nl > start) on_line(std::string_view(pending).substr(start, nl - start));
    pending.erase(0, start);
  }
  if (!pending.empty()) on_line(pending);
  ::close(fd);
}

// Below state is shared with the signal handler: lock-free atomics are async-signal-safe.
std::atomic<int> g_child{0};
std::atomic<int> g_received{0};
constexpr std::array<int, 4> kForwarded = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

void forward(int sig, siginfo_t* info, void*) {
  int expected = 0;
  g_received.compare_exchange_strong(expected, sig);
  // The terminal sends Ctrl-C to the whole foreground process group, the child included
  // (si_code SI_KERNEL); a signal sent to feedscope alone (kill, a job scheduler) is passed on.
  const int child = g_child.load();
  if (child > 0 && (info == nullptr || info->si_code != SI_KERNEL)) ::kill(child, sig);
}

// The program's environment: ours, with `env` set over it.
std::vector<std::string> environment_text(const std::map<std::string, std::string>& env) {
  std::vector<std::string> text;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string key(entry.substr(0, entry.find('=')));
    if (!env.count(key)) text.emplace_back(entry);
  }
  for (const auto& [key, value] : env) text.push_back(key + "=" + value);
  return text;
}

// `strings` as exec takes them: a pointer into each, then a null.
std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The output_path file opened for the program's stdout and stderr, or -1 for none.
int open_output(const std::string& path) {
  if (path.empty()) return -1;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
  return fd;
}

ChildStartError start_error(const std::string& program, const char* call, int error) {
  return ChildStartError(std::string("cannot start '") + program + "': " + call + ": " +
                             std::strerror(error), 126);
}

// The status pipe carries exec's errno back where exec fails (it closes on exec); the output
// pipes, where the program's lines are captured, carry its stdout and stderr.
struct Pipes {
  int status[2] = {-1, -1};
  int out[2] = {-1, -1}, err[2] = {-1, -1};
};

Pipes open_pipes(bool capture, const std::string& program) {
  Pipes pipes;
  if (::pipe2(pipes.status, O_CLOEXEC) != 0) throw start_error(program, "pipe", errno);
  if (capture && (::pipe2(pipes.out, O_CLOEXEC) != 0 || ::pipe2(pipes.err, O_CLOEXEC) != 0))
    throw start_error(program, "pipe", errno);
  return pipes;
}

// In the forked child: async-signal-safe calls only, up to exec.
[[noreturn]] void exec_child(const Pipes& pipes, bool capture, int output_fd,
                             const std::vector<char*>& argv, const std::vector<char*>& envp) {
  // The child inherits feedscope's signal handlers' dispositions only as default or ignored;
  // reset the ones feedscope set to ignore so the program sees a clean slate.
  for (const int sig : kForwarded) ::signal(sig, SIG_DFL);
  if (capture) {
    ::dup2(pipes.out[1], STDOUT_FILENO);
    ::dup2(pipes.err[1], STDERR_FILENO);
  } else if (output_fd >= 0) {
    ::dup2(output_fd, STDOUT_FILENO);
    ::dup2(output_fd, STDERR_FILENO);
  }
  ::execvpe(argv[0], argv.data(), envp.data());
  const int error = errno;
  ssize_t ignored = ::write(pipes.status[1], &error, sizeof error);
  (void)ignored;
  ::_exit(127);
}

// exec's errno where the child could not run the program; none where it did.
std::optional<int> exec_error(const int (&status)[2]) {
  ::close(status[1]);
  int error = 0;
  ssize_t n;
  do n = ::read(status[0], &error, sizeof error);
  while (n < 0 && errno == EINTR);
  ::close(status[0]);
  if (n == static_cast<ssize_t>(sizeof error)) return error;
  return std::nullopt;
}

}  // namespace

std::string ChildExit::describe() const {
  if (signal == 0) return "exited with " + std::to_string(code);
  return std::string("killed by SIG") + signal_name(signal) + (core_dumped ? " (core dumped)" : "");
}

ChildProcess::ChildProcess(Options options) {
  if (options.argv.empty()) throw ChildStartError("no command given after --", 2);
  // Everything exec needs is built before fork: the child of a threaded process may only make
  // async-signal-safe calls.
  std::vector<std::string> env_text = environment_text(options.env);
  const std::vector<char*> envp = c_strings(env_text);
  const std::vector<char*> argv = c_strings(options.argv);
  output_fd_ = open_output(options.output_path);
  const int sink_out = output_fd_ >= 0 ? output_fd_ : STDOUT_FILENO;
  const int sink_err = output_fd_ >= 0 ? output_fd_ : STDERR_FILENO;
  const bool capture = static_cast<bool>(options.on_line);
  const Pipes pipes = open_pipes(capture, options.argv[0]);

  pid_ = ::fork();
  if (pid_ < 0) throw start_error(options.argv[0], "fork", errno);
  if (pid_ == 0) exec_child(pipes, capture, output_fd_, argv, envp);
  const std::optional<int> error = exec_error(pipes.status);
  if (capture) {
    ::close(pipes.out[1]);
    ::close(pipes.err[1]);
  }
  if (error) {
    ::waitpid(pid_, nullptr, 0);
    exit_ = ChildExit{127, 0, false};
    if (capture) {
      ::close(pipes.out[0]);
      ::close(pipes.err[0]);
    }
    if (output_fd_ >= 0) ::close(output_fd_);
    const int code = *error == ENOENT ? 127 : 126;
    throw ChildStartError("cannot run '" + options.argv[0] + "': " + std::strerror(*error), code);
  }
  if (capture) {
    pumps_.emplace_back(pump, pipes.out[0], sink_out, options.on_line);
    pumps_.emplace_back(pump, pipes.err[0], sink_err, options.on_line);
  }
}

ChildProcess::~ChildProcess() {
  if (!exit_) signal(SIGKILL);
  reap();
}

bool ChildProcess::wait_exited(std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (exit_) return true;
  for (;;) {
    siginfo_t info{};
    const int flags = WEXITED | WNOWAIT | (deadline ? WNOHANG : 0);
    const int r = ::waitid(P_PID, static_cast<id_t>(pid_), &info, flags);
    if (r == 0 && info.si_pid == pid_) return true;
    if (r < 0 && errno != EINTR) return true;  // nothing to wait for: gone
    if (!deadline) continue;
    if (std::chrono::steady_clock::now() >= *deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void ChildProcess::signal(int sig) noexcept {
  if (pid_ > 0 && !exit_) ::kill(pid_, sig);
}

ChildExit ChildProcess::reap() {
  if (!exit_) {
    int status = 0;
    pid_t r;
    do r = ::waitpid(pid_, &status, 0);
    while (r < 0 && errno == EINTR);
    ChildExit e;
    if (r == pid_ && WIFSIGNALED(status)) {
      e.signal = WTERMSIG(status);
      e.core_dumped = WCOREDUMP(status);
    } else if (r == pid_) {
      e.code = WEXITSTATUS(status);
    }
    exit_ = e;
  }
  for (std::thread& t : pumps_)
    if (t.joinable()) t.join();
  if (output_fd_ >= 0) {
    ::close(output_fd_);
    output_fd_ = -1;
  }
  return *exit_;
}

SignalForwarder::SignalForwarder(int child_pid)
    : outer_child_(g_child.load()), outer_received_(g_received.load()) {
  g_received.store(0);
  g_child.store(child_pid);
  struct sigaction action {};
  action.sa_sigaction = forward;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (std::size_t i = 0; i < kForwarded.size(); ++i) ::sigaction(kForwarded[i], &action, &previous_[i]);
}

// An outer forwarder (watch --try's runs inside the watch) gets its child and its handlers back,
// and what this one received counts as received by it too.
SignalForwarder::~SignalForwarder() {
  g_child.store(outer_child_);
  int expected = 0;
  g_received.compare_exchange_strong(expected, outer_received_);
  for (std::size_t i = 0; i < kForwarded.size(); ++i) ::sigaction(kForwarded[i], &previous_[i], nullptr);
}

void SignalForwarder::child_ended() noexcept { g_child.store(0); }

int forwarded_signal() noexcept { return g_received.load(); }

int SignalForwarder::received() const noexcept { return g_received.load(); }

}  // namespace feedscope
