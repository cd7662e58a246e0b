#pragma once
// Talking to a running feedscope's Prometheus endpoint: the port it announced, a keep-alive
// HTTP/1.1 connection that reads responses by Content-Length (as Prometheus and wrk do), and one
// series' value from the exposition text.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "tests/support/background_process.h"
#include "tests/support/http_client.h"

namespace feedscope::testing {

// The port of "Prometheus metrics on http://127.0.0.1:PORT/metrics" in the run's log, or 0 when
// the run ended or the deadline passed before it said so.
inline int announced_metrics_port(BackgroundProcess& run,
                                  std::chrono::steady_clock::time_point deadline) {
  static const std::regex announced(R"(metrics on http://127\.0\.0\.1:(\d+)/metrics)");
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    const std::string log = run.log();
    if (std::regex_search(log, m, announced)) return std::stoi(m[1]);
    if (!run.running()) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

// The value of the first series of `name` ("feedscope_samples_total", labels or not), if any.
inline std::optional<double> metric_value(const std::string& exposition, const std::string& name) {
  std::size_t at = 0;
  while ((at = exposition.find(name, at)) != std::string::npos) {
    const bool line_start = at == 0 || exposition[at - 1] == '\n';
    const std::size_t after = at + name.size();
    if (line_start && after < exposition.size() &&
        (exposition[after] == ' ' || exposition[after] == '{')) {
      const std::size_t end = exposition.find('\n', after);
      const std::string line = exposition.substr(at, end - at);
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    at = after;
  }
  return std::nullopt;
}

// One keep-alive connection to 127.0.0.1:port; requests go one at a time. Socket timeouts bound
// every wait. Not thread-safe: one thread per connection.
class HttpConnection {
 public:
  using Response = HttpResult;

  explicit HttpConnection(int port, int timeout_s = 30)
      : fd_(connect_loopback(port, timeout_s, error_)) {}
  ~HttpConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Empty when connected.
  const std::string& error() const { return error_; }

  Response get(const std::string& path) {
    if (!error_.empty()) return fail(error_);
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size()))
      return fail("send: " + std::string(std::strerror(errno)));
    std::size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos)
      if (!receive()) return fail("connection ended in the headers: " + error_);
    const std::string headers = buffer_.substr(0, header_end);
    if (headers.rfind("HTTP/1.1 ", 0) != 0) return fail("not an HTTP/1.1 answer: " + headers);
    static const std::regex length_header(R"(\r\n[Cc]ontent-[Ll]ength: *(\d+))");
    std::smatch m;
    if (!std::regex_search(headers, m, length_header)) return fail("no Content-Length: " + headers);
    const std::size_t length = std::stoul(m[1]);
    const std::size_t body_begin = header_end + 4;
    while (buffer_.size() < body_begin + length)
      if (!receive())
        return fail("connection ended after " + std::to_string(buffer_.size() - body_begin) +
                    " of " + std::to_string(length) + " body bytes: " + error_);
    Response r;
    r.status = std::stoi(headers.substr(9, 3));
    r.body = buffer_.substr(body_begin, length);
    buffer_.erase(0, body_begin + length);
    return r;
  }

 private:
  bool receive() {
    char chunk[16384];
    for (;;) {
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n > 0) {
        buffer_.append(chunk, static_cast<std::size_t>(n));
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      error_ = n == 0 ? "closed by the server" : "recv: " + std::string(std::strerror(errno));
      return false;
    }
  }
  Response fail(std::string why) {
    error_ = why;
    return Response{0, "", std::move(why)};
  }

  std::string error_;  // before fd_: connecting fills it
  int fd_ = -1;
  std::string buffer_;
};

}  // namespace feedscope::testing
