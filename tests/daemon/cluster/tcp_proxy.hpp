// tcp_proxy.hpp — a TCP relay on 127.0.0.1 for the cluster tests, that can lose the client side
// of its connections while the server side lives on: what a node sees when the network between
// it and PostgreSQL breaks, while the server's process of each session goes on (and may still
// commit) until it next writes to its client.
//
//   TcpProxy proxy{pg.port()};
//   ... a node connects to proxy.port() ...
//   proxy.cut();   // the node's connections drop; PostgreSQL's sides stay open, read and discarded
//
// Connections made after cut() are relayed as usual. hold_new(true) leaves new connections
// waiting in the listen backlog (a client's connect succeeds, its first answer does not come)
// until hold_new(false).
//
// Thread safety: cut() and port() from any thread; the relay runs on a thread of its own.
#pragma once

#include "loopback_address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace sandglass::testing {

class TcpProxy {
 public:
  // Listens on 127.0.0.1 on a free port and relays to 127.0.0.1:`target`. Throws
  // std::runtime_error when it cannot listen.
  explicit TcpProxy(std::uint16_t target) : target_{target} {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = sandglass::testing::loopback_address(0);
    socklen_t len = sizeof a;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 64) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error{"TcpProxy: cannot listen"};
    }
    port_ = ntohs(a.sin_port);
    relay_ = std::jthread{[this](std::stop_token st) { run(st); }};
  }
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;
  ~TcpProxy() {
    relay_.request_stop();
    relay_.join();
    for (const Pair& p : pairs_) {
      if (p.client >= 0) ::close(p.client);
      ::close(p.server);
    }
    ::close(listen_fd_);
  }

  std::uint16_t port() const noexcept { return port_; }

  void hold_new(bool hold) noexcept { hold_.store(hold, std::memory_order_relaxed); }

  // Closes the client side of every connection relayed so far; their server sides stay open
  // and whatever the server sends on them is read and dropped.
  void cut() {
    std::lock_guard lock{mu_};
    for (Pair& p : pairs_) {
      if (p.client < 0) continue;
      ::shutdown(p.client, SHUT_RDWR);
      ::close(p.client);
      p.client = -1;
    }
  }

 private:
  struct Pair {
    int client;  // -1 once cut
    int server;
    bool server_open = true;  // false once the server closed its side
  };


  static bool send_all(int fd, const char* data, ssize_t n) {
    while (n > 0) {
      const ssize_t w = ::send(fd, data, static_cast<std::size_t>(n), MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      data += w;
      n -= w;
    }
    return true;
  }

  void accept_one() {
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    if (client < 0) return;
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    const sockaddr_in a = sandglass::testing::loopback_address(target_);
    if (server < 0 || ::connect(server, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      ::close(client);
      if (server >= 0) ::close(server);
      return;
    }
    std::lock_guard lock{mu_};
    pairs_.push_back({client, server, true});
  }

  void run(std::stop_token st) {
    char buf[65536];
    while (!st.stop_requested()) {
      std::vector<pollfd> fds{{hold_.load(std::memory_order_relaxed) ? -1 : listen_fd_, POLLIN, 0}};
      {
        std::lock_guard lock{mu_};
        for (const Pair& p : pairs_) {
          fds.push_back({p.client, POLLIN, 0});  // -1 once cut: poll ignores it
          fds.push_back({p.server_open ? p.server : -1, POLLIN, 0});
        }
      }
      if (::poll(fds.data(), fds.size(), 10) <= 0) continue;
      if (fds[0].revents != 0) accept_one();
      std::lock_guard lock{mu_};
      for (std::size_t i = 1; i + 1 < fds.size(); i += 2) {
        Pair& p = pairs_[(i - 1) / 2];
        if (fds[i].revents != 0 && p.client >= 0 && p.client == fds[i].fd) {
          const ssize_t n = ::recv(p.client, buf, sizeof buf, 0);
          if (n <= 0 || !send_all(p.server, buf, n)) {  // the client left: so does the server side
            ::shutdown(p.server, SHUT_WR);
            ::close(p.client);
            p.client = -1;
          }
        }
        if (fds[i + 1].revents != 0 && p.server_open) {
          const ssize_t n = ::recv(p.server, buf, sizeof buf, 0);
          if (n > 0 && p.client >= 0) send_all(p.client, buf, n);  // after cut: dropped
          if (n <= 0) {  // the server closed: so does the client side
            p.server_open = false;
            if (p.client >= 0) {
              ::close(p.client);
              p.client = -1;
            }
          }
        }
      }
    }
  }

  const std::uint16_t target_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> hold_{false};  // relaxed: the relay looks at it every 10 ms
  std::mutex mu_;
  std::vector<Pair> pairs_;  // guarded by mu_; only the relay adds, only the destructor closes servers
  std::jthread relay_;
};

}  // namespace sandglass::testing
