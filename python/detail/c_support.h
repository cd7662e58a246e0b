#pragma once
// What the C ABI's two files (c_api.cc: the Session; loader_api.cc: the loader) share: the session
// handle, and how an entry point turns an exception into the thread's last error.
#include <unistd.h>

#include <exception>
#include <memory>
#include <optional>
#include <string>

#include <feedscope/session.h>
#include "api/handed_loader.h"

struct feedscope_session {
  // The process that made it: a forked child (a DataLoader worker) has a copy of the session but
  // none of its threads, and must never finish it or join them.
  pid_t owner = ::getpid();
  std::unique_ptr<feedscope::Session> session;
  std::optional<std::string> report_json;  // set by the first successful finish
  std::string metrics_address;
  // Where the loaders attached to it (feedscope_loader_attach) send their spans; closed when the
  // session is freed, so that a loader outliving it forwards nothing.
  std::shared_ptr<feedscope::SpanSink> sink;
};

namespace feedscope::c_api {

// The calling thread's last error: what feedscope_last_error() returns.
std::string& last_error();

inline int fail(const std::string& why) {
  last_error() = why;
  return -1;
}

// Runs `fn`, turning an exception into the thread's last error.
template <typename Fn>
int guarded(Fn&& fn) {
  try {
    fn();
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  } catch (...) {
    return fail("unknown error");
  }
}

}  // namespace feedscope::c_api
