#include "exporters/detail/http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <system_error>
#include <thread>

namespace feedscope::detail {
namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string errno_text(int error) { return std::generic_category().message(error); }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool has_token(std::string_view value, std::string_view token) {  // "keep-alive, Upgrade"
  while (!value.empty()) {
    const auto comma = value.find(',');
    if (iequals(trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

struct HttpServer::Impl {
  struct Connection {
    int fd = -1;
    std::string in;
    std::string out;
    std::size_t out_done = 0;
    std::int64_t last_activity_ms = 0;
    std::int64_t request_start_ms = -1;  // first byte of a request not yet complete
    bool close_after_write = false;
    bool peer_closed = false;  // the client shut down its side; answer what it sent, then close
    bool dead = false;
  };

  std::vector<Route> routes;
  Limits limits;
  int listen_fd = -1;
  int stop_fd = -1;
  // Held open for the moment the process runs out of descriptors: closing it lets accept take one
  // more connection, only to close it at once (see accept_all).
  int spare_fd = -1;
  std::int64_t listen_paused_until_ms = 0;
  int port = 0;
  bool ipv6 = false;
  std::vector<Connection> connections;
  std::atomic<std::uint64_t> served{0};
  std::thread thread;

  ~Impl() {
    for (Connection& c : connections) close_fd(c.fd);
    close_fd(listen_fd);
    close_fd(stop_fd);
    close_fd(spare_fd);
  }

  void bind_and_listen(const std::string& host, int wanted_port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* results = nullptr;
    const std::string service = std::to_string(wanted_port);
    if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &results); rc != 0)
      throw HttpServerError(std::string("cannot resolve the host: ") + ::gai_strerror(rc));
    int error = 0;
    for (const addrinfo* ai = results; ai != nullptr && listen_fd < 0; ai = ai->ai_next) {
      const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                              ai->ai_protocol);
      if (fd < 0) {
        error = errno;
        continue;
      }
      const int one = 1;  // a restarted run rebinds at once instead of waiting out TIME_WAIT
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      // 511, as nginx: a burst of scrapers (or wrk's 200 connections) waits instead of failing.
      if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 511) != 0) {
        error = errno;
        ::close(fd);
        continue;
      }
      listen_fd = fd;
      ipv6 = ai->ai_family == AF_INET6;
    }
    ::freeaddrinfo(results);
    if (listen_fd < 0) {
      if (error == EADDRINUSE)
        throw HttpServerError(errno_text(error) + " (is another process using the port?)");
      if (error == EADDRNOTAVAIL)
        throw HttpServerError(errno_text(error) + " (not an address of this machine)");
      throw HttpServerError(errno_text(error));
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &length);
    port = bound.ss_family == AF_INET6
               ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
               : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  }

  void accept_all(std::int64_t now) {
    for (;;) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        // Out of descriptors (EMFILE, ENFILE) or memory: the connection stays queued, so the
        // listening socket stays readable and poll() would return at once, again and again, a
        // busy loop taking a core from training while the client hangs. Accept it with the spare
        // descriptor and close it: the client learns now, the queue drains.
        if ((errno == EMFILE || errno == ENFILE) && spare_fd >= 0) {
          close_fd(spare_fd);
          const int doomed = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
          if (doomed >= 0) ::close(doomed);
          spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
          if (doomed >= 0) continue;
        }
        // No spare (another thread took the descriptor) or another error: stop listening a while.
        listen_paused_until_ms = now + 100;
        return;
      }
      if (static_cast<int>(connections.size()) >= limits.max_connections) {
        ::close(fd);
        continue;
      }
      Connection c;
      c.fd = fd;
      c.last_activity_ms = now;
      connections.push_back(std::move(c));
    }
  }

  void respond(Connection& c, int status, const HttpResponse& response, bool head, bool keep_alive,
               std::string_view extra_headers = {}) {
    c.out += "HTTP/1.1 ";
    c.out += std::to_string(status);
    c.out += ' ';
    c.out += reason_phrase(status);
    c.out += "\r\nContent-Type: ";
    c.out += response.content_type;
    c.out += "\r\nContent-Length: ";
    c.out += std::to_string(response.body.size());
    c.out += "\r\n";
    c.out += extra_headers;
    if (!keep_alive) c.out += "Connection: close\r\n";
    c.out += "\r\n";
    if (!head) c.out += response.body;
    c.close_after_write = !keep_alive;
    served.fetch_add(1, std::memory_order_relaxed);
  }

  void reject(Connection& c, int status, std::string_view why) {
    respond(c, status, HttpResponse{status, "text/plain; charset=utf-8", std::string(why) + "\n"},
            false, false);
    c.in.clear();
  }

  // Answers every complete request in `c.in`, one at a time: a pipelined second request waits
  // until the first response is written, so responses never interleave.
  void handle_requests(Connection& c, std::int64_t now) {
    while (c.out.empty() && !c.close_after_write) {
      const auto end = c.in.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (c.in.size() > limits.max_request_bytes)
          reject(c, 431, "request line and headers exceed " +
                             std::to_string(limits.max_request_bytes) + " bytes");
        c.request_start_ms = c.in.empty() ? -1 : (c.request_start_ms < 0 ? now : c.request_start_ms);
        return;
      }
      const std::string_view request(c.in.data(), end);
      handle_one(c, request);
      c.in.erase(0, end + 4);
      c.request_start_ms = c.in.empty() ? -1 : now;
    }
  }

  void handle_one(Connection& c, std::string_view request) {
    const auto line_end = request.find("\r\n");
    const std::string_view line = request.substr(0, line_end);
    const auto sp1 = line.find(' ');
    const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
      return reject(c, 400, "malformed request line");
    const std::string_view method = line.substr(0, sp1);
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = line.substr(sp2 + 1);
    if (version.substr(0, 7) != "HTTP/1.") return reject(c, 505, "only HTTP/1.x is served");

    bool close = version == "HTTP/1.0";
    bool has_body = false;
    std::string_view headers =
        line_end == std::string_view::npos ? std::string_view{} : request.substr(line_end + 2);
    while (!headers.empty()) {
      const auto eol = headers.find("\r\n");
      const std::string_view header = headers.substr(0, eol);
      headers = eol == std::string_view::npos ? std::string_view{} : headers.substr(eol + 2);
      const auto colon = header.find(':');
      if (colon == std::string_view::npos) return reject(c, 400, "malformed header line");
      const std::string_view name = header.substr(0, colon);
      const std::string_view value = trim(header.substr(colon + 1));
      if (iequals(name, "Connection")) {
        if (has_token(value, "close")) close = true;
        if (has_token(value, "keep-alive")) close = false;
      } else if (iequals(name, "Content-Length")) {
        has_body = value != "0";
      } else if (iequals(name, "Transfer-Encoding")) {
        has_body = true;
      }
    }
    // No route takes a body; reading one to skip it is not worth a code path.
    if (has_body) return reject(c, 413, "request bodies are not accepted");

    const bool head = method == "HEAD";
    if (method != "GET" && !head) {
      respond(c, 405, HttpResponse{405, "text/plain; charset=utf-8", "only GET and HEAD\n"}, false,
              !close, "Allow: GET, HEAD\r\n");
      return;
    }
    const std::string_view path = target.substr(0, target.find('?'));
    const auto route = std::find_if(routes.begin(), routes.end(),
                                    [&](const Route& r) { return r.path == path; });
    if (route == routes.end()) {
      respond(c, 404, HttpResponse{404, "text/plain; charset=utf-8", "not found\n"}, head, !close);
      return;
    }
    HttpResponse response;
    try {
      response = route->handler();
    } catch (const std::exception& e) {
      response = HttpResponse{500, "text/plain; charset=utf-8", std::string(e.what()) + "\n"};
    }
    respond(c, response.status, response, head, !close);
  }

  void read_from(Connection& c, std::int64_t now) {
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, 0);
      if (n > 0) {
        // Bytes after a request we will close on are of no use; past the limit, stop buffering.
        if (!c.close_after_write && c.in.size() <= limits.max_request_bytes)
          c.in.append(buffer, static_cast<std::size_t>(n));
        c.last_activity_ms = now;
        continue;
      }
      if (n == 0) {
        c.peer_closed = true;
        return;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
      return;
    }
  }

  void write_to(Connection& c, std::int64_t now) {
    while (c.out_done < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.out_done, c.out.size() - c.out_done,
                               MSG_NOSIGNAL);
      if (n > 0) {
        c.out_done += static_cast<std::size_t>(n);
        c.last_activity_ms = now;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.dead = true;
      return;
    }
    c.out.clear();
    c.out_done = 0;
    if (c.close_after_write) c.dead = true;
  }

  void loop() {
    std::vector<pollfd> fds;
    for (;;) {
      const std::int64_t now = now_ms();
      int timeout = 1000;
      fds.clear();
      fds.push_back({stop_fd, POLLIN, 0});
      const bool listening = now >= listen_paused_until_ms;
      fds.push_back({listen_fd, static_cast<short>(listening ? POLLIN : 0), 0});
      if (!listening)
        timeout = static_cast<int>(std::min<std::int64_t>(timeout, listen_paused_until_ms - now));
      for (const Connection& c : connections) {
        const short events = !c.out.empty() ? POLLOUT : c.peer_closed ? 0 : POLLIN;
        fds.push_back({c.fd, events, 0});
        std::int64_t deadline = c.last_activity_ms + limits.idle_timeout_ms;
        if (c.request_start_ms >= 0)
          deadline = std::min(deadline, c.request_start_ms + limits.request_timeout_ms);
        timeout = static_cast<int>(std::clamp<std::int64_t>(deadline - now, 0, timeout));
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) return;
      if (fds[0].revents != 0) return;
      const std::int64_t after = now_ms();
      if (fds[1].revents & POLLIN) accept_all(after);

      // fds[2 + i] belongs to connections[i]: accept_all only appended after them.
      for (std::size_t i = 0; i + 2 < fds.size(); ++i) {
        Connection& c = connections[i];
        const short revents = fds[i + 2].revents;
        if (revents & (POLLIN | POLLHUP | POLLERR)) read_from(c, after);
        if (!c.dead) handle_requests(c, after);
        // Write at once rather than on the next POLLOUT: a response usually fits one send.
        if (!c.dead && !c.out.empty()) write_to(c, after);
        if (!c.dead && c.out.empty()) handle_requests(c, after);  // pipelined next request
        if (c.peer_closed && c.out.empty()) c.dead = true;
        const bool idle = after - c.last_activity_ms > limits.idle_timeout_ms;
        const bool slow = c.request_start_ms >= 0 &&
                          after - c.request_start_ms > limits.request_timeout_ms;
        if (idle || slow) c.dead = true;
      }
      std::erase_if(connections, [](Connection& c) {
        if (c.dead) close_fd(c.fd);
        return c.dead;
      });
    }
  }
};

HttpServer::HttpServer(const std::string& host, int port, std::vector<Route> routes, Limits limits)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.routes = std::move(routes);
  s.limits = limits;
  s.bind_and_listen(host, port);
  s.stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s.stop_fd < 0) throw HttpServerError("eventfd: " + errno_text(errno));
  s.spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  try {
    s.thread = std::thread([&s] {
      ::pthread_setname_np(::pthread_self(), "feedscope-http");  // what `top -H` shows
      s.loop();
    });
  } catch (const std::system_error& e) {
    throw HttpServerError(std::string("cannot start the server thread: ") + e.what());
  }
}

HttpServer::~HttpServer() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(impl_->stop_fd, &one, sizeof one);
  if (impl_->thread.joinable()) impl_->thread.join();
}

int HttpServer::port() const noexcept { return impl_->port; }
bool HttpServer::ipv6() const noexcept { return impl_->ipv6; }
std::uint64_t HttpServer::requests_served() const noexcept {
  return impl_->served.load(std::memory_order_relaxed);
}

}  // namespace feedscope::detail
