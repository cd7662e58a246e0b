#include "exporters/detail/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace feedscope::detail {
namespace {

// A raw loopback client: the tests need exact control of the bytes (pipelining, half-close,
// oversized headers) that a real HTTP client library would hide.
class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const timeval timeout{10, 0};  // a hung server fails the test instead of hanging it
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // Reads until `count` complete responses (by Content-Length) are in, or the server closes.
  std::vector<std::string> read_responses(int count, bool* closed = nullptr) {
    std::vector<std::string> responses;
    bool eof = false;
    while (static_cast<int>(responses.size()) < count) {
      const auto end = buffer_.find("\r\n\r\n");
      if (end != std::string::npos) {
        std::size_t length = 0;
        const auto cl = buffer_.find("Content-Length: ");
        if (cl != std::string::npos && cl < end) length = std::stoul(buffer_.substr(cl + 16));
        if (buffer_.size() >= end + 4 + length || eof) {
          const std::size_t take = std::min(buffer_.size(), end + 4 + length);
          responses.push_back(buffer_.substr(0, take));
          buffer_.erase(0, take);
          continue;
        }
      }
      if (eof) break;
      char chunk[4096];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) {
        eof = true;
        continue;
      }
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
    if (closed != nullptr) {
      char byte;
      *closed = eof || ::recv(fd_, &byte, 1, 0) == 0;
    }
    return responses;
  }
  std::string read_all() {
    std::string all = buffer_;
    char chunk[4096];
    ssize_t n;
    while ((n = ::recv(fd_, chunk, sizeof chunk, 0)) > 0) all.append(chunk, static_cast<std::size_t>(n));
    return all;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

int status_of(const std::string& response) {
  return response.size() >= 12 ? std::stoi(response.substr(9, 3)) : 0;
}
std::string body_of(const std::string& response) {
  const auto end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

std::vector<HttpServer::Route> counting_routes(std::atomic<int>& calls) {
  return {{"/metrics", [&calls] {
             const int n = ++calls;
             return HttpResponse{200, "text/plain", "call " + std::to_string(n) + "\n"};
           }},
          {"/boom", []() -> HttpResponse { throw std::runtime_error("handler failed"); }}};
}

TEST(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  std::atomic<int> calls{0};
  HttpServer server("127.0.0.1", 0, counting_routes(calls));
  Client client(server.port());
  ASSERT_TRUE(client.connected());
  for (int i = 1; i <= 3; ++i) {
    client.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    const auto responses = client.read_responses(1);
    ASSERT_EQ(responses.size(), 1u);
    EXPECT_EQ(status_of(responses[0]), 200);
    EXPECT_EQ(body_of(responses[0]), "call " + std::to_string(i) + "\n");
    EXPECT_EQ(responses[0].find("Connection: close"), std::string::npos);
  }
  EXPECT_EQ(server.requests_served(), 3u);
}

TEST(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  std::atomic<int> calls{0};
  HttpServer server("127.0.0.1", 0, counting_routes(calls));
  Client client(server.port());
  client.send(
      "GET /metrics HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\nGET /metrics?x=1 HTTP/1.1\r\n\r\n");
  const auto responses = client.read_responses(3);
  ASSERT_EQ(responses.size(), 3u);
  EXPECT_EQ(body_of(responses[0]), "call 1\n");
  EXPECT_EQ(status_of(responses[1]), 404);
  EXPECT_EQ(body_of(responses[2]), "call 2\n");  // the query string does not change the route
}

TEST(HttpServerTest, Http10AndConnectionCloseCloseAfterTheResponse) {
  std::atomic<int> calls{0};
  HttpServer server("127.0.0.1", 0, counting_routes(calls));
  for (const std::string request :
       {"GET /metrics HTTP/1.0\r\n\r\n", "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n"}) {
    Client client(server.port());
    client.send(request);
    bool closed = false;
    const auto responses = client.read_responses(1, &closed);
    ASSERT_EQ(responses.size(), 1u) << request;
    EXPECT_EQ(status_of(responses[0]), 200);
    EXPECT_NE(responses[0].find("Connection: close"), std::string::npos);
    EXPECT_TRUE(closed) << request;
  }
}

TEST(HttpServerTest, HeadHasHeadersButNoBody) {
  std::atomic<int> calls{0};
  HttpServer server("127.0.0.1", 0, counting_routes(calls));
  Client client(server.port());
  client.send("HEAD /metrics HTTP/1.0\r\n\r\n");
  const std::string all = client.read_all();
  EXPECT_EQ(status_of(all), 200);
  EXPECT_NE(all.find("Content-Length: 7\r\n"), std::string::npos) << all;
  EXPECT_EQ(body_of(all), "");
}

TEST(HttpServerTest, BadRequestsGetTheirStatusAndTheServerGoesOn) {
  std::atomic<int> calls{0};
  HttpServer server("127.0.0.1", 0, counting_routes(calls));
  const std::vector<std::pair<std::string, int>> cases = {
      {"POST /metrics HTTP/1.1\r\n\r\n", 405},
      {"GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 413},
      {"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 413},
      {"GET /metrics\r\n\r\n", 400},
      {"GET  /metrics HTTP/1.1\r\n\r\n", 400},
      {"GET /metrics HTTP/2.0\r\n\r\n", 505},
      {"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", 400},
      {"GET /boom HTTP/1.1\r\n\r\n", 500},
  };
  for (const auto& [request, status] : cases) {
    Client client(server.port());
    client.send(request);
    const auto responses = client.read_responses(1);
    ASSERT_EQ(responses.size(), 1u) << request;
    EXPECT_EQ(status_of(responses[0]), status) << request;
  }
  Client client(server.port());
  client.send("POST / HTTP/1.0\r\n\r\n");
  EXPECT_NE(client.read_all().find("Allow: GET, HEAD\r\n"), std::string::npos);
  EXPECT_EQ(calls.load(), 0);
}

TEST(HttpServerTest, OversizedHeadersGet431AndAClose) {
  std::atomic<int> calls{0};
  HttpServer::Limits limits;
  limits.max_request_bytes = 1024;
  HttpServer server("127.0.0.1", 0, counting_routes(calls), limits);
  Client client(server.port());
  client.send("GET /metrics HTTP/1.1\r\nX-Big: " + std::string(4000, 'a'));
  bool closed = false;
  const auto responses = client.read_responses(1, &closed);
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_EQ(status_of(responses[0]), 431);
  EXPECT_TRUE(closed);
}

TEST(HttpServerTest, HalfClosedClientStillGetsItsAnswer) {
  std::atomic<int> calls{0};
  HttpServer server("127.0.0.1", 0, counting_routes(calls));
  Client client(server.port());
  client.send("GET /metrics HTTP/1.1\r\n\r\n");
  client.shutdown_write();
  const std::string all = client.read_all();
  EXPECT_EQ(status_of(all), 200);
  EXPECT_EQ(body_of(all), "call 1\n");
}

TEST(HttpServerTest, ConnectionsBeyondTheLimitAreClosedAndTheOthersServed) {
  std::atomic<int> calls{0};
  HttpServer::Limits limits;
  limits.max_connections = 4;
  HttpServer server("127.0.0.1", 0, counting_routes(calls), limits);
  std::vector<std::unique_ptr<Client>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<Client>(server.port()));
    held.back()->send("GET /metrics HTTP/1.1\r\n\r\n");
    ASSERT_EQ(held.back()->read_responses(1).size(), 1u);  // accepted and open
  }
  Client extra(server.port());  // the kernel accepts it; the server closes it unanswered
  extra.send("GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(extra.read_all(), "");
  held.pop_back();  // a slot frees up
  for (int attempt = 0; attempt < 100; ++attempt) {  // until the server has seen the close
    Client again(server.port());
    again.send("GET /metrics HTTP/1.0\r\n\r\n");
    if (status_of(again.read_all()) == 200) return;
  }
  FAIL() << "no connection was served after one of the held ones closed";
}

TEST(HttpServerTest, ManyConcurrentClientsAreAllServed) {
  std::atomic<int> calls{0};
  HttpServer server("127.0.0.1", 0, counting_routes(calls));
  constexpr int kClients = 64, kRequests = 20;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t)
    threads.emplace_back([&] {
      Client client(server.port());
      for (int i = 0; i < kRequests; ++i) {
        client.send("GET /metrics HTTP/1.1\r\n\r\n");
        const auto responses = client.read_responses(1);
        if (responses.size() == 1 && status_of(responses[0]) == 200) ++ok;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kClients * kRequests);
  EXPECT_EQ(calls.load(), kClients * kRequests);
}

TEST(HttpServerTest, DestructionWithOpenConnectionsReleasesThePort) {
  std::atomic<int> calls{0};
  int port = 0;
  auto idle = std::make_unique<HttpServer>("127.0.0.1", 0, counting_routes(calls));
  port = idle->port();
  Client lingering(port);  // an idle keep-alive client must not hold the server up
  ASSERT_TRUE(lingering.connected());
  idle.reset();
  EXPECT_EQ(lingering.read_all(), "");  // closed by the server
  HttpServer again("127.0.0.1", port, counting_routes(calls));
  EXPECT_EQ(again.port(), port);
}

TEST(HttpServerTest, BindErrorsSayWhy) {
  std::atomic<int> calls{0};
  HttpServer first("127.0.0.1", 0, counting_routes(calls));
  try {
    HttpServer second("127.0.0.1", first.port(), counting_routes(calls));
    FAIL() << "bound the same port twice";
  } catch (const HttpServerError& e) {
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
  try {
    HttpServer foreign("192.0.2.1", 0, counting_routes(calls));  // TEST-NET-1: not ours
    FAIL() << "bound an address of no interface";
  } catch (const HttpServerError& e) {
    EXPECT_NE(std::string(e.what()).find("not an address of this machine"), std::string::npos)
        << e.what();
  }
}

// Takes every free descriptor of the process below a lowered soft limit; gives them all back,
// and the limit, on destruction.
class DescriptorExhaustion {
 public:
  DescriptorExhaustion() {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    int open_now = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) open_now += !e.is_directory();
    rlimit low = saved_;
    low.rlim_cur = static_cast<rlim_t>(open_now + 32);
    ::setrlimit(RLIMIT_NOFILE, &low);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) taken_.push_back(fd);
    exhausted_ = errno == EMFILE;
  }
  ~DescriptorExhaustion() {
    release(taken_.size());
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  bool exhausted() const { return exhausted_; }
  void release(std::size_t count) {
    for (; count > 0 && !taken_.empty(); --count) {
      ::close(taken_.back());
      taken_.pop_back();
    }
  }

 private:
  rlimit saved_{};
  std::vector<int> taken_;
  bool exhausted_ = false;
};

// Out of descriptors, accept() fails and the connection stays queued: the listening socket stays
// readable, so a server that only retries on the next poll() spins on a core while the client
// waits for nothing. The client must instead be closed at once, and once descriptors are free
// again the server serves as before.
TEST(HttpServerTest, OutOfDescriptorsNewClientsAreClosedAtOnceAndServedOnceTheyAreBack) {
  std::atomic<int> calls{0};
  HttpServer server("127.0.0.1", 0, counting_routes(calls));
  {
    DescriptorExhaustion exhaustion;
    ASSERT_TRUE(exhaustion.exhausted());
    exhaustion.release(1);  // room for the client's own socket, none for the server's side
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    const timeval timeout{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(server.port()));
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    const std::string request = "GET /metrics HTTP/1.1\r\n\r\n";
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    char byte = 0;
    const ssize_t n = ::recv(fd, &byte, 1, 0);
    const int error = errno;
    ::close(fd);
    EXPECT_TRUE(n == 0 || (n < 0 && error == ECONNRESET))
        << "the queued client was not closed: recv gave " << n << " ("
        << (n < 0 ? std::strerror(error) : "data") << ")";
  }
  Client client(server.port());
  client.send("GET /metrics HTTP/1.1\r\n\r\n");
  const auto responses = client.read_responses(1);
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_EQ(status_of(responses[0]), 200);
  EXPECT_EQ(calls.load(), 1) << "the closed client's request was not answered";
}

}  // namespace
}  // namespace feedscope::detail
