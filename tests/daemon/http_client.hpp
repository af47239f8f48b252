// http_client.hpp — a small blocking HTTP/1.1 client over a raw loopback socket, for tests that
// need full control of the connection (send half a request, disconnect early, never read).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sandglass::testing {

struct HttpAnswer {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;

  std::string header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? std::string{} : it->second;
  }
};

// One TCP connection to 127.0.0.1:port. Closed by the destructor.
class Connection {
 public:
  explicit Connection(std::uint16_t port);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  void send(std::string_view bytes);
  // Reads one response. nullopt if the server closed the connection (or `timeout` passed)
  // before a whole response arrived.
  std::optional<HttpAnswer> read_answer(std::chrono::milliseconds timeout = std::chrono::seconds{30});
  // True if the server closed the connection within `timeout` (reads and drops any bytes).
  bool closed_by_server(std::chrono::milliseconds timeout);
  void close();
  int fd() const noexcept { return fd_; }

 private:
  int fd_ = -1;
  std::string pending_;  // bytes read past the last response
};

// The bytes of a request with a Content-Length (when there is a body).
std::string request_bytes(std::string_view method, std::string_view target, std::string_view body = {},
                          const std::vector<std::pair<std::string, std::string>>& headers = {});

// One request on a fresh connection. Throws std::runtime_error when no answer arrives.
HttpAnswer http(std::uint16_t port, std::string_view method, std::string_view target,
                std::string_view body = {},
                const std::vector<std::pair<std::string, std::string>>& headers = {});

}  // namespace sandglass::testing
