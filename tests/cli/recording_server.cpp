#include "recording_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace sandglass::testing {

RecordingServer::RecordingServer(int status, std::string body) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 1) != 0) {
    throw std::runtime_error{"RecordingServer: cannot listen"};
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread{[this, status, body = std::move(body)] { serve(status, body); }};
}

RecordingServer::~RecordingServer() {
  ::shutdown(listen_fd_, SHUT_RDWR);  // ends an accept that is still waiting
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
}

const std::string& RecordingServer::request() {
  if (thread_.joinable()) thread_.join();
  return request_;
}

std::string RecordingServer::body() {
  const std::string& r = request();
  const auto end = r.find("\r\n\r\n");
  return end == std::string::npos ? std::string{} : r.substr(end + 4);
}

void RecordingServer::serve(int status, std::string answer_body) {
  const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  // Read the header section, then Content-Length bytes of body.
  std::string got;
  std::size_t want = std::string::npos;
  char chunk[4096];
  while (want == std::string::npos || got.size() < want) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) break;
    got.append(chunk, static_cast<std::size_t>(n));
    const auto end = got.find("\r\n\r\n");
    if (want == std::string::npos && end != std::string::npos) {
      std::size_t length = 0;
      for (const char* name : {"Content-Length: ", "content-length: "}) {
        if (const auto at = got.find(name); at != std::string::npos && at < end) {
          length = std::stoul(got.substr(at + std::string_view{name}.size()));
        }
      }
      want = end + 4 + length;
    }
  }
  request_ = got;
  const std::string answer = "HTTP/1.1 " + std::to_string(status) +
                             " Answer\r\nContent-Type: application/json\r\nContent-Length: " +
                             std::to_string(answer_body.size()) + "\r\nConnection: close\r\n\r\n" +
                             answer_body;
  [[maybe_unused]] const ssize_t written = ::write(fd, answer.data(), answer.size());
  ::close(fd);
}

}  // namespace sandglass::testing
