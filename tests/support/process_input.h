#pragma once
// Runs a program with an argument vector (never through a shell), feeds `input` to its stdin and
// captures its output. The sibling of process.h's run_process for tools that read stdin
// (`promtool check metrics`).
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/process.h"

namespace feedscope::testing {

// Writes all of `text` to `fd` and closes it. A child that exits without reading everything
// makes write() fail with EPIPE instead of killing the test with SIGPIPE: the signal is blocked
// in this thread and the pending one is taken back before returning.
inline void write_all_and_close(int fd, const std::string& text) {
  sigset_t pipe_set, old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  std::size_t done = 0;
  bool broken = false;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      broken = errno == EPIPE;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (broken) {
    const timespec zero{};
    sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
}

inline ProcessResult run_process_with_input(const std::vector<std::string>& args,
                                            const std::string& input) {
  // O_CLOEXEC: the child keeps only the dup2'ed ends, so it sees EOF on stdin once we close ours.
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) return {};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    return {};
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    for (const int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) ::close(fd);
    return {};
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ProcessResult result;
  if (rc != 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    result.err = "posix_spawn " + args.front() + ": error " + std::to_string(rc);
    return result;
  }
  std::thread writer([&] { write_all_and_close(in_pipe[1], input); });
  std::thread err_reader([&] { result.err = read_all(err_pipe[0]); });
  result.out = read_all(out_pipe[0]);
  err_reader.join();
  writer.join();
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace feedscope::testing
