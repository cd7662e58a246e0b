#pragma once
// A small HTTP/1.1 server for the scrape endpoint: GET and HEAD of a few fixed paths, keep-alive,
// one poll() thread. Why not prometheus-cpp's pull Exposer: its civetweb starts threads with a
// fixed 100 KiB stack, and glibc refuses any stack smaller than the process's static TLS, which
// libtorch's dependencies alone (OpenBLAS, glog) push past 100 KiB. So the Exposer cannot start
// in any process that loads libtorch, feedscope's own or the user's training job.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace feedscope::detail {

class HttpServerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Thread-safe to construct and destroy from any thread; handlers run on the server's own thread,
// one request at a time, so a handler needs no lock of its own against other requests.
class HttpServer {
 public:
  struct Route {
    std::string path;  // exact match, query string ignored
    std::function<HttpResponse()> handler;
  };
  struct Limits {
    int max_connections = 1024;          // beyond this, new connections are closed at once
    std::size_t max_request_bytes = 16384;  // request line + headers
    int idle_timeout_ms = 60000;         // an open connection with nothing to do
    int request_timeout_ms = 10000;      // from the first byte of a request to its last header
  };

  // Binds `host`:`port` (IPv4, IPv6 or a name; port 0 picks one) and starts serving. Throws
  // HttpServerError with the reason (the errno text, or the resolver's) for the address.
  HttpServer(const std::string& host, int port, std::vector<Route> routes, Limits limits);
  HttpServer(const std::string& host, int port, std::vector<Route> routes)
      : HttpServer(host, port, std::move(routes), Limits{}) {}
  // Stops at once (no polling timeout to wait out) and closes every connection.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const noexcept;                // the bound port
  bool ipv6() const noexcept;               // bound to an IPv6 address
  std::uint64_t requests_served() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace feedscope::detail
