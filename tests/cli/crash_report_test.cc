// The crash report: a child process crashes on purpose and the test reads what it printed.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "cli/crash_report.h"

namespace feedscope {
namespace {

struct Crash {
  int status = 0;
  std::string stderr_text;
};

// Runs `crash` in a child with the handler installed and its stderr into a pipe.
template <typename Fn>
Crash crash_in_child(Fn crash) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], STDERR_FILENO);
    install_crash_report();
    crash();
    ::_exit(0);  // not reached
  }
  ::close(fds[1]);
  Crash out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.stderr_text.append(buf, n);
  ::close(fds[0]);
  ::waitpid(pid, &out.status, 0);
  return out;
}

using Fn = void (*)();
volatile Fn g_null = nullptr;

TEST(CrashReportTest, ANullFunctionCallNamesWhereItWasCalledFromAndDiesOfTheSignal) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer builds leave the crash to the sanitizer's own report";
#endif
  const Crash c = crash_in_child([] { g_null(); });
  ASSERT_TRUE(WIFSIGNALED(c.status)) << c.stderr_text;
  EXPECT_EQ(WTERMSIG(c.status), SIGSEGV);
  EXPECT_NE(c.stderr_text.find("feedscope: crashed with SIGSEGV at address 0x0."), std::string::npos)
      << c.stderr_text;
  EXPECT_NE(c.stderr_text.find("#0 0x0 (a call through a null function pointer)"), std::string::npos)
      << c.stderr_text;
  // The caller, from the return address the call left on the stack: this test's executable.
  EXPECT_NE(c.stderr_text.find("#1 0x"), std::string::npos) << c.stderr_text;
  EXPECT_NE(c.stderr_text.find("cli_tests+0x"), std::string::npos) << c.stderr_text;
}

TEST(CrashReportTest, AnAbortIsReportedWithoutAnAddress) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer builds leave the crash to the sanitizer's own report";
#endif
  const Crash c = crash_in_child([] { std::abort(); });
  ASSERT_TRUE(WIFSIGNALED(c.status)) << c.stderr_text;
  EXPECT_EQ(WTERMSIG(c.status), SIGABRT);
  EXPECT_NE(c.stderr_text.find("feedscope: crashed with SIGABRT. This is a bug"), std::string::npos)
      << c.stderr_text;
  EXPECT_NE(c.stderr_text.find("unwound from the handler:"), std::string::npos) << c.stderr_text;
}

}  // namespace
}  // namespace feedscope
