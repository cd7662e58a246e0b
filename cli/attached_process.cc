#include "cli/attached_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/config.h"
#include "cli/interrupt.h"
#include "sampler/proc_fs.h"

namespace feedscope {

namespace {

std::string proc(int pid, const char* file) { return "/proc/" + std::to_string(pid) + "/" + file; }

std::optional<std::string> read_file(const std::string& path, int* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = errno;
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Polled five times a second for hours: read with plain system calls, not a stream.
char state_of(int pid) {
  const auto stat = ProcFs().read(proc(pid, "stat"));
  if (!stat) return 0;
  const auto parsed = parse_task_stat(*stat);
  return parsed ? parsed->state : '?';
}

std::vector<std::string> command_of(const std::string& cmdline) {
  std::vector<std::string> out;
  std::string word;
  for (const char c : cmdline) {
    if (c != '\0') {
      word += c;
    } else {
      out.push_back(word);
      word.clear();
    }
  }
  if (!word.empty()) out.push_back(word);
  return out;
}

// "Python, libtorch" from the files mapped into it; empty where neither is.
std::string runtimes_in(const std::string& maps) {
  const bool python = maps.find("/libpython3") != std::string::npos ||
                      maps.find("/python3") != std::string::npos;
  const bool torch = maps.find("/libtorch") != std::string::npos ||
                     maps.find("/libc10") != std::string::npos;
  if (python && torch) return "Python, libtorch";
  if (python) return "Python";
  return torch ? "libtorch" : "";
}

}  // namespace

std::string ptrace_right_missing() {
  int error = 0;
  std::string scope = "no Yama ptrace_scope on this kernel";
  if (const auto text = read_file("/proc/sys/kernel/yama/ptrace_scope", &error))
    scope = "kernel.yama.ptrace_scope is " + text->substr(0, text->find('\n')) +
            " (0 lets a user read their own processes; 1 only a parent its children; 2 and 3 only "
            "CAP_SYS_PTRACE)";
  return "reading another process's /proc/PID/environ, io and syscall needs ptrace access: run as "
         "the program's user with ptrace_scope 0, or with CAP_SYS_PTRACE (sudo, or docker "
         "--cap-add SYS_PTRACE); " + scope;
}

AttachedProcess::AttachedProcess(int pid) : pid_(pid) {
  if (pid <= 0)
    throw ConfigError("pid", "attach: '" + std::to_string(pid) + "' is no process id; allowed: a "
                             "running process's PID (ps, pgrep -f train.py)");
  if (pid == ::getpid())
    throw ConfigError("pid", "attach: " + std::to_string(pid) + " is feedscope itself");
  int error = 0;
  const auto cmdline = read_file(proc(pid, "cmdline"), &error);
  if (!cmdline || state_of(pid) == 0)
    throw ConfigError("pid", "attach: no process " + std::to_string(pid) + " (/proc/" +
                                 std::to_string(pid) + " does not exist: it ended, or never ran)");
  if (state_of(pid) == 'Z')
    throw ConfigError("pid", "attach: process " + std::to_string(pid) +
                                 " has ended (a zombie its parent has not reaped): nothing to read");
  command_ = command_of(*cmdline);
  const std::string name = command_.empty() ? "pid " + std::to_string(pid) : command_[0];
  if (!read_file(proc(pid, "environ"), &error) && (error == EACCES || error == EPERM))
    throw ConfigError("pid", "attach: no right to read process " + std::to_string(pid) + " (" + name +
                                 "): " + ptrace_right_missing());
  const auto maps = read_file(proc(pid, "maps"), &error);
  if (!maps)
    throw ConfigError("pid", "attach: cannot read " + proc(pid, "maps") + ": " + std::strerror(error) +
                                 "; " + ptrace_right_missing());
  const std::string runtimes = runtimes_in(*maps);
  // A launcher (torchrun's agent is Python too; a shell script is not) is attached to for its
  // children: the program is whichever of them is Python or libtorch.
  if (runtimes.empty() && state_of(pid) != 0) {
    const std::string tasks = "task/" + std::to_string(pid) + "/children";
    std::ifstream children(proc(pid, tasks.c_str()));
    bool any = false;
    for (int child; children >> child;)
      if (const auto m = read_file(proc(child, "maps"), &error); m && !runtimes_in(*m).empty()) any = true;
    if (!any)
      throw ConfigError("pid", "attach: process " + std::to_string(pid) + " (" + name +
                                   ") is not a Python or libtorch program, nor runs one (no "
                                   "libpython, python3 or libtorch mapped in it or its children): "
                                   "attach to the training process or its launcher");
    what_ = name + " (a launcher of a Python or libtorch program)";
    return;
  }
  what_ = name + " (" + runtimes + ")";
}

OutputFollower::OutputFollower(int pid, std::function<void(std::string_view line)> on_line)
    : on_line_(std::move(on_line)) {
  std::vector<std::pair<dev_t, ino_t>> seen;  // 2>&1 into one file: followed once
  for (const int fd : {1, 2}) {
    const std::string link = proc(pid, ("fd/" + std::to_string(fd)).c_str());
    struct stat st {};
    if (::stat(link.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (std::find(seen.begin(), seen.end(), std::make_pair(st.st_dev, st.st_ino)) != seen.end()) continue;
    const int own = ::open(link.c_str(), O_RDONLY | O_CLOEXEC);
    if (own < 0) continue;
    ::lseek(own, 0, SEEK_END);  // from now on: what it printed before is another window's
    seen.emplace_back(st.st_dev, st.st_ino);
    fds_.push_back(own);
    char target[4096];
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    files_.push_back(n > 0 ? std::string(target, static_cast<std::size_t>(n)) : link);
  }
  partial_.resize(fds_.size());
  if (!fds_.empty()) thread_ = std::thread([this] { run(); });
}

OutputFollower::~OutputFollower() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  for (const int fd : fds_) ::close(fd);
}

void OutputFollower::run() {
  char buf[65536];
  bool last_round = false;
  while (true) {
    for (std::size_t i = 0; i < fds_.size(); ++i) {
      ssize_t n;
      while ((n = ::read(fds_[i], buf, sizeof buf)) > 0) {
        std::string& pending = partial_[i];
        pending.append(buf, static_cast<std::size_t>(n));
        std::size_t start = 0;
        for (std::size_t end; (end = pending.find_first_of("\r\n", start)) != std::string::npos; start = end + 1)
          if (end > start) on_line_(std::string_view(pending).substr(start, end - start));
        pending.erase(0, start);
      }
    }
    if (last_round) return;
    for (int i = 0; i < 5 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    last_round = stop_;  // one more read of what came before the stop
  }
}

bool AttachedProcess::ended() const {
  const char state = state_of(pid_);
  return state == 0 || state == 'Z' || state == 'X';
}

// Waits in poll on a descriptor of the process (pidfd_open, Linux 5.3: readable once it has
// exited), which a Ctrl-C also ends; without one, reads its state five times a second.
AttachEnd AttachedProcess::wait(double duration_s) const {
  const auto start = std::chrono::steady_clock::now();
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  AttachEnd end = AttachEnd::duration;
  while (true) {
    if (pidfd < 0 && ended()) {
      end = AttachEnd::program_ended;
      break;
    }
    if (interrupt_signal() != 0) {
      end = AttachEnd::interrupted;
      break;
    }
    if (duration_s > 0 && std::chrono::steady_clock::now() - start >= std::chrono::duration<double>(duration_s))
      break;
    if (pidfd < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    pollfd exit{pidfd, POLLIN, 0};
    if (::poll(&exit, 1, 200) > 0) {
      end = AttachEnd::program_ended;
      break;
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  return end;
}

}  // namespace feedscope
