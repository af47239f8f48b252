// Upstream faults for the forward kind, against fake upstreams on 127.0.0.1: one that accepts
// and never answers, one that resets every connection, one that answers a byte at a time. The
// job's budget bounds each call, the attempt is counted, retried and held against the breaker
// as the policy says, and the socket is closed when the attempt ends.
#include "daemon_test_support.hpp"
#include "loopback_address.hpp"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace sandglass::testing;
using namespace std::chrono_literals;
using boost::json::object;
using Clock = std::chrono::steady_clock;

namespace {

// A fake upstream: serves one connection at a time on a loopback port, in one thread. Each
// connection's request is read, then the behaviour decides what it gets.
class FakeUpstream {
 public:
  enum class Behaviour {
    hang,   // never answers; waits until the client closes
    reset,  // closes with SO_LINGER 0: the client gets a TCP RST
    slow,   // a valid answer's first bytes, one every 20 ms, until the client closes
  };

  explicit FakeUpstream(Behaviour behaviour) : behaviour_{behaviour} {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in addr = sandglass::testing::loopback_address();
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener_, 16) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread{[this] { serve(); }};
  }
  ~FakeUpstream() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  FakeUpstream(const FakeUpstream&) = delete;
  FakeUpstream& operator=(const FakeUpstream&) = delete;

  std::uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/jobs"; }

  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }
  // Connections the client closed (hang, slow) or that were reset (reset), so far.
  int closed() const { return closed_.load(); }
  // Blocks until `n` connections were closed or `timeout` passed; true if they were.
  bool wait_closed(int n, std::chrono::milliseconds timeout) {
    std::unique_lock lock{mu_};
    return changed_.wait_for(lock, timeout, [&] { return closed_.load() >= n; });
  }
  // How long the longest connection stayed open, from accept to close.
  std::chrono::milliseconds longest_open() const {
    return std::chrono::milliseconds{longest_open_ms_.load()};
  }

 private:

  // Reads until the request's blank line and its Content-Length of body have arrived.
  static bool read_request(int fd) {
    std::string got;
    char buf[4096];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10'000) <= 0) return false;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      got.append(buf, static_cast<std::size_t>(n));
      const auto end = got.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      const auto cl = got.find("Content-Length: ");
      const std::size_t length = cl == std::string::npos ? 0 : std::stoul(got.substr(cl + 16));
      if (got.size() >= end + 4 + length) return true;
    }
  }

  // True once the peer closed (or reset) the connection, waiting up to `timeout`.
  static bool peer_closed(int fd, std::chrono::milliseconds timeout) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char byte;
    return ::recv(fd, &byte, 1, MSG_DONTWAIT) <= 0;
  }

  void serve() {
    while (!stop_) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      const auto opened = Clock::now();
      ++accepted_;
      bool closed = false;
      if (read_request(fd)) {
        switch (behaviour_) {
          case Behaviour::hang:
            closed = peer_closed(fd, 30s);
            break;
          case Behaviour::reset: {
            const linger abort{.l_onoff = 1, .l_linger = 0};
            ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
            closed = true;
            break;
          }
          case Behaviour::slow: {
            const std::string answer =
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n" +
                std::string(100000, ' ');
            for (std::size_t i = 0; i < answer.size() && !closed; ++i) {
              if (::send(fd, &answer[i], 1, MSG_NOSIGNAL) != 1) {
                closed = true;
              } else {
                closed = peer_closed(fd, 20ms);
              }
            }
            break;
          }
        }
      }
      ::close(fd);
      const auto open_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - opened);
      if (open_ms.count() > longest_open_ms_.load()) longest_open_ms_ = open_ms.count();
      {
        std::lock_guard lock{mu_};
        if (closed) ++closed_;
      }
      changed_.notify_all();
    }
  }

  const Behaviour behaviour_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> closed_{0};
  std::atomic<std::int64_t> longest_open_ms_{0};
  std::mutex mu_;
  std::condition_variable changed_;
  std::thread thread_;
};

std::unique_ptr<DaemonProcess> forwarding_to(const FakeUpstream& upstream, const std::string& extra) {
  const std::string config =
      write_temp_file("upstream-faults.toml",
                      "[upstreams.next]\nurl = \"" + upstream.url() + "\"\n" + extra);
  return std::make_unique<DaemonProcess>(std::vector<std::string>{"--config", config});
}

const std::string kForward = R"({"kind":"forward","args":{"upstream":"next","body":{"kind":"sleep"}}})";

double attempts(std::uint16_t port, const std::string& result) {
  return metric(port, R"(sandglass_upstream_attempts_total{result=")" + result + R"(",upstream="next"})");
}

// A missing series counts as zero.
double count(std::uint16_t port, const std::string& series) {
  const double v = metric(port, series);
  return v < 0 ? 0 : v;
}

}  // namespace

TEST_SUITE("sandglassd upstream faults") {
  TEST_CASE("an upstream that never answers is given up at the end of the budget and its socket is "
            "closed" * doctest::timeout(60)) {
    FakeUpstream up{FakeUpstream::Behaviour::hang};
    const auto d = forwarding_to(up, "max_attempts = 1\n");
    const auto start = Clock::now();
    const HttpAnswer a = post_job(d->port(), kForward, {{"x-request-timeout-ms", "400"}});
    const auto took = Clock::now() - start;
    CHECK(a.status == 504);
    // The upstream would hold the call for 30 s; the budget ends it after 400 ms. The bound only
    // catches a call that waited for the upstream.
    CHECK(took < 20s);
    CHECK(up.wait_closed(1, 20s));
    CHECK(up.accepted() == 1);
    // The attempt's own timeout and the job's deadline fall on the same instant: either ends it.
    CHECK(count(d->port(), R"(sandglass_upstream_attempts_total{result="timeout_response",upstream="next"})") +
              count(d->port(), R"(sandglass_upstream_attempts_total{result="cancelled",upstream="next"})") ==
          1);
    CHECK(http(d->port(), "GET", "/healthz").status == 200);
  }

  TEST_CASE("an upstream that never answers costs each attempt its cap and is retried inside the "
            "budget" * doctest::timeout(60)) {
    FakeUpstream up{FakeUpstream::Behaviour::hang};
    const auto d = forwarding_to(up, "cap_ms = 200\nreserve_ms = 5\nmax_attempts = 2\n"
                                     "base_backoff_ms = 10\nmax_backoff_ms = 10\n");
    const auto start = Clock::now();
    const HttpAnswer a = post_job(d->port(), kForward, {{"x-request-timeout-ms", "5000"}});
    const auto took = Clock::now() - start;
    CHECK(a.status == 500);
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "failed");
    CHECK(r.at("result").as_object().at("attempts").as_int64() == 2);
    CHECK(r.at("result").as_object().at("phase").as_string() == "response");
    CHECK(took >= 2 * 200ms);
    // A failure after two attempts (not the budget's 504) says each attempt ended at its cap.
    // The upstream would hold a socket the daemon did not close for 30 s: the bound only
    // catches that.
    CHECK(up.wait_closed(2, 20s));
    CHECK(up.accepted() == 2);
    CHECK(up.longest_open() < 20s);
    CHECK(attempts(d->port(), "timeout_response") == 2);
    CHECK(metric(d->port(), R"(sandglass_upstream_retries_total{upstream="next"})") == 1);
    CHECK(metric(d->port(), R"(sandglass_upstream_calls_total{reason="attempts_exhausted",upstream="next"})") == 1);
  }

  TEST_CASE("connections reset by the upstream are failed attempts that are retried and open the "
            "breaker" * doctest::timeout(60)) {
    FakeUpstream up{FakeUpstream::Behaviour::reset};
    const auto d = forwarding_to(up, "max_attempts = 3\nfailure_threshold = 3\ncooldown_ms = 60000\n"
                                     "base_backoff_ms = 1\nmax_backoff_ms = 1\n");
    const HttpAnswer a = post_job(d->port(), kForward, {{"x-request-timeout-ms", "5000"}});
    CHECK(a.status == 500);
    const object r = json_of(a);
    CHECK(r.at("result").as_object().at("attempts").as_int64() == 3);
    CHECK(up.accepted() == 3);
    CHECK(attempts(d->port(), "broken") == 3);
    CHECK(metric(d->port(), R"(sandglass_upstream_retries_total{upstream="next"})") == 2);
    CHECK(metric(d->port(), R"(sandglass_upstream_breaker_state{upstream="next"})") == 2);

    // Open: the next call is refused at once and the upstream sees nothing.
    const HttpAnswer refused = post_job(d->port(), kForward, {{"x-request-timeout-ms", "5000"}});
    CHECK(refused.status == 503);
    CHECK(json_of(refused).at("reason").as_string() == "breaker_open");
    CHECK(up.accepted() == 3);
  }

  TEST_CASE("an upstream that answers one byte at a time is bounded by the budget" *
            doctest::timeout(60)) {
    FakeUpstream up{FakeUpstream::Behaviour::slow};
    const auto d = forwarding_to(up, "max_attempts = 1\n");
    const auto start = Clock::now();
    const HttpAnswer a = post_job(d->port(), kForward, {{"x-request-timeout-ms", "500"}});
    const auto took = Clock::now() - start;
    CHECK(a.status == 504);
    // The whole answer would take over half an hour, a byte every 20 ms; the budget ends it
    // after 500 ms. The bounds only catch a call or a socket that waited for the upstream.
    CHECK(took < 20s);
    CHECK(up.wait_closed(1, 20s));
    CHECK(up.longest_open() < 20s);
    CHECK(count(d->port(), R"(sandglass_upstream_attempts_total{result="timeout_response",upstream="next"})") +
              count(d->port(), R"(sandglass_upstream_attempts_total{result="cancelled",upstream="next"})") ==
          1);
  }

  TEST_CASE("an upstream that answers one byte at a time costs each attempt no more than its cap" *
            doctest::timeout(60)) {
    FakeUpstream up{FakeUpstream::Behaviour::slow};
    const auto d = forwarding_to(up, "max_attempts = 1\ncap_ms = 300\n");
    const auto start = Clock::now();
    const HttpAnswer a = post_job(d->port(), kForward, {{"x-request-timeout-ms", "10000"}});
    const auto took = Clock::now() - start;
    CHECK(a.status == 500);
    CHECK(json_of(a).at("result").as_object().at("phase").as_string() == "response");
    CHECK(took >= 300ms);
    // A failure in the response phase, not the budget's 504 after 10 s, says the cap ended it.
    CHECK(up.wait_closed(1, 20s));
    CHECK(attempts(d->port(), "timeout_response") == 1);
  }
}
