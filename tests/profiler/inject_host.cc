// A fresh process for feedscope_inject_test.cc to load libfeedscope_inject.so into, as a program
// started by `feedscope watch` would: nothing of the test runner (a CUPTI it loaded) is in it.
//   inject_host LIBRARY WATCH_DIR|- THEN [PRELOAD...]
// dlopens each PRELOAD (stand-ins for the driver and CUPTI), sets FEEDSCOPE_WATCH_DIR (unsets it
// for "-", keeps the environment's for "env": a program under `feedscope watch`), calls InitializeInjection, then THEN: "exit", "sleep:<ms>" or "fork" (a child that
// exits at once), and leaves through exit() so atexit handlers run; or "_exit:<ms>": sleeps, then
// leaves through _exit() as Python's os._exit does, no atexit handler run. Exit codes name a failure.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#if defined(__SANITIZE_ADDRESS__)
// LeakSanitizer's check at exit stops the world through a helper task, which deadlocks in the fork
// of a threaded process (a lock the injection's flush thread held at fork time stays held in the
// child); the forked child's memory is its parent's, checked when the parent exits.
namespace {
bool forked_child = false;
}
extern "C" int __lsan_is_turned_off() { return forked_child ? 1 : 0; }
#endif

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  ::alarm(30);  // a hang ends with SIGALRM
  const std::string library = argv[1], watch_dir = argv[2], then = argv[3];
  if (watch_dir == "-")
    ::unsetenv("FEEDSCOPE_WATCH_DIR");
  else if (watch_dir != "env")
    ::setenv("FEEDSCOPE_WATCH_DIR", watch_dir.c_str(), 1);
  for (int i = 4; i < argc; ++i)
    if (::dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL) == nullptr) return 14;
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return 10;
  const auto init = reinterpret_cast<int (*)()>(::dlsym(lib, "InitializeInjection"));
  if (init == nullptr) return 11;
  const auto begin = std::chrono::steady_clock::now();
  const int result = init();
  if (std::chrono::steady_clock::now() - begin > std::chrono::seconds(5)) return 13;
  if (result != 1) return 12;
  if (then.starts_with("sleep:")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(then.substr(6))));
  } else if (then.starts_with("_exit:")) {  // os._exit: no atexit handler runs
    std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(then.substr(6))));
    std::fflush(nullptr);
    ::_exit(0);
  } else if (then == "fork") {
    std::fflush(nullptr);
    const pid_t child = ::fork();
    if (child == 0) {
#if defined(__SANITIZE_ADDRESS__)
      forked_child = true;
#endif
      std::exit(0);  // runs the atexit handler it inherited
    }
    ::waitpid(child, nullptr, 0);
  }
  std::exit(0);
}
