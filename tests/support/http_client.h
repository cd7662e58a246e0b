#pragma once
// A plain HTTP/1.0 GET on loopback (IPv4), bounded by socket timeouts. HTTP/1.0 so that every
// server (feedscope's, Prometheus' Go server) ends the body by closing: no chunked decoding.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace feedscope::testing {

struct HttpResult {
  int status = 0;  // 0: no HTTP answer; `error` says why
  std::string body;
  std::string error;
};

// A TCP connection to 127.0.0.1:port whose sends and receives time out after timeout_s. Returns
// the descriptor, the caller's to close, or -1 with `error` saying why (the descriptor closed).
inline int connect_loopback(int port, int timeout_s, std::string& error) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = "socket: " + std::string(std::strerror(errno));
    return -1;
  }
  const timeval timeout{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    error = "connect: " + std::string(std::strerror(errno));
    ::close(fd);
    return -1;
  }
  return fd;
}

inline HttpResult http_get(int port, const std::string& path) {
  std::string error;
  const int fd = connect_loopback(port, 10, error);
  if (fd < 0) return {0, "", error};
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size()))
    return {0, "", "send failed"};
  std::string raw;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) raw.append(buf, static_cast<std::size_t>(n));
  if (n < 0) return {0, "", "recv failed: " + std::string(std::strerror(errno))};
  const auto header_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || header_end == std::string::npos || raw.size() < 12)
    return {0, "", "not an HTTP response: " + raw.substr(0, 200)};
  return {std::stoi(raw.substr(9, 3)), raw.substr(header_end + 4), ""};
}

// A port that was free a moment ago, for programs that cannot report the one they bound.
inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  socklen_t length = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

}  // namespace feedscope::testing
