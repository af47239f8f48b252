#include "daemon/http/http_server.hpp"

#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <sandglass/daemon/kind_registry.hpp>

#include <atomic>
#include <chrono>

using namespace sandglass::testing;
using namespace std::chrono_literals;
using sandglass::Clock;
using sandglass::daemon::Api;
using sandglass::daemon::DaemonConfig;
using sandglass::daemon::DaemonMetrics;
using sandglass::daemon::HttpServer;
using sandglass::daemon::JobRecords;
using sandglass::daemon::KindRegistry;

namespace {

// An HTTP server with the daemon's API over a runtime with no kinds, on a loopback port.
struct Served {
  Served() {
    config.listen_port = 0;
    server.start("127.0.0.1", 0);
  }
  ~Served() {
    server.stop();
    runtime.shutdown(sandglass::Duration::zero());
  }

  DaemonConfig config;
  KindRegistry kinds;
  DaemonMetrics metrics;
  JobRecords records{config.records};
  sandglass::Runtime runtime{config.runtime};
  std::atomic<bool> draining{false};
  Api api{config, kinds, runtime, records, metrics, draining};
  HttpServer server{config.limits, 1, api, metrics};
};

}  // namespace

TEST_SUITE("HttpServer") {
  TEST_CASE("waiting for the answers ends when the last connection that owes one has answered, "
            "not when lingering connections close" *
            doctest::timeout(60)) {
    Served s;
    Connection c{s.server.port()};
    c.send("GET /healthz HTTP/1.1\r\n");  // half a request: the server owes it an answer
    REQUIRE(eventually([&] { return s.server.connections() == 1; }));  // accepted
    CHECK_FALSE(s.server.wait_answered_until(Clock::now() + 20ms));

    s.server.stop_accepting();
    c.send("Host: 127.0.0.1\r\n\r\n");
    // Answered with Connection: close; the connection then lingers (the client has not closed
    // it), and the wait is woken without it.
    CHECK(s.server.wait_answered_until(Clock::now() + 30s));
    CHECK(s.server.connections() == 1);
    const auto a = c.read_answer(10s);
    REQUIRE(a.has_value());
    CHECK(a->status == 200);
    CHECK(a->header("connection") == "close");
    CHECK(c.closed_by_server(10s));
  }

  TEST_CASE("with no connections the wait for answers returns at once" * doctest::timeout(60)) {
    Served s;
    CHECK(s.server.wait_answered_until(Clock::now()));
    s.server.stop_accepting();
    CHECK(s.server.wait_answered_until(Clock::now()));
  }
}
