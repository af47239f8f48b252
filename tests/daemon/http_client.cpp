#include "http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cctype>
#include <cstring>
#include <stdexcept>

namespace sandglass::testing {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Parses a whole response at the start of `buf`; nullopt while incomplete.
std::optional<std::pair<HttpAnswer, std::size_t>> parse_answer(const std::string& buf) {
  const auto head_end = buf.find("\r\n\r\n");
  if (head_end == std::string::npos) return std::nullopt;
  HttpAnswer a;
  std::size_t line_end = buf.find("\r\n");
  const std::string status_line = buf.substr(0, line_end);  // HTTP/1.1 200 OK
  a.status = std::stoi(status_line.substr(9, 3));
  std::size_t pos = line_end + 2;
  while (pos < head_end) {
    line_end = buf.find("\r\n", pos);
    const std::string line = buf.substr(pos, line_end - pos);
    const auto colon = line.find(':');
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    a.headers[lower(line.substr(0, colon))] = value;
    pos = line_end + 2;
  }
  const std::size_t length = a.headers.count("content-length") ? std::stoul(a.headers["content-length"]) : 0;
  const std::size_t body_start = head_end + 4;
  if (buf.size() < body_start + length) return std::nullopt;
  a.body = buf.substr(body_start, length);
  return std::pair{std::move(a), body_start + length};
}

}  // namespace

Connection::Connection(std::uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error{std::string{"socket: "} + std::strerror(errno)};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error{std::string{"connect: "} + std::strerror(e)};
  }
}

Connection::~Connection() { close(); }

void Connection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Connection::send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) throw std::runtime_error{std::string{"send: "} + std::strerror(errno)};
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::optional<HttpAnswer> Connection::read_answer(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto parsed = parse_answer(pending_)) {
      pending_.erase(0, parsed->second);
      return std::move(parsed->first);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[8192];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return std::nullopt;
    pending_.append(buf, static_cast<std::size_t>(n));
  }
}

bool Connection::closed_by_server(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[8192];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
}

std::string request_bytes(std::string_view method, std::string_view target, std::string_view body,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string r;
  r.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  for (const auto& [name, value] : headers) r.append(name).append(": ").append(value).append("\r\n");
  if (!body.empty() || method == "POST") {
    r.append("Content-Type: application/json\r\nContent-Length: ")
        .append(std::to_string(body.size()))
        .append("\r\n");
  }
  r.append("\r\n").append(body);
  return r;
}

HttpAnswer http(std::uint16_t port, std::string_view method, std::string_view target,
                std::string_view body, const std::vector<std::pair<std::string, std::string>>& headers) {
  Connection c{port};
  c.send(request_bytes(method, target, body, headers));
  auto a = c.read_answer();
  if (!a) throw std::runtime_error{"no answer to " + std::string{method} + " " + std::string{target}};
  return std::move(*a);
}

}  // namespace sandglass::testing
