// How the real sandglassd takes a request in: the budget counts from its first byte, the bearer
// token and a spent budget are answered before the body, and an early answer is not lost to a
// TCP reset (lingering close). Also the open files limit it raises at start.
#include "config/config_test_support.hpp"
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

constexpr std::string_view kQuickJob = R"({"kind":"sleep","args":{"ms":0}})";

// The request line and headers of a job request with `budget_ms` and a body of `body_bytes`,
// without the blank line that ends the header section.
std::string job_head(int budget_ms, std::size_t body_bytes) {
  return "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         "x-request-timeout-ms: " + std::to_string(budget_ms) + "\r\n" +
         "Content-Length: " + std::to_string(body_bytes) + "\r\n";
}

// Lets time pass on the daemon's clock while a request is half sent (not to order events).
void let_time_pass(std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }

// Sends `bytes` on `c`, on its own thread (the daemon may answer before it is all sent).
// `sent` is true once every byte was handed to the kernel, false if the daemon reset the
// connection first.
class Sender {
 public:
  Sender(Connection& c, std::string bytes)
      : thread_{[&c, this, bytes = std::move(bytes)] {
          try {
            c.send(bytes);
            sent_ = true;
          } catch (const std::runtime_error&) {
            sent_ = false;
          }
        }} {}
  bool sent() {
    thread_.join();
    return sent_;
  }

 private:
  bool sent_ = false;
  std::thread thread_;
};

double jobs_submitted(std::uint16_t port) {
  return metric(port, R"(sandglass_jobs_submitted_total{kind="sleep",priority="normal"})");
}

}  // namespace

TEST_SUITE("sandglassd intake") {
  TEST_CASE("a request whose headers arrive slower than its budget is answered 504 without running" *
            doctest::timeout(60)) {
    DaemonProcess d;
    Connection c{d.port()};
    c.send(job_head(100, kQuickJob.size()));
    // Ten times the budget: spent however late a loaded daemon reads the first byte.
    let_time_pass(1000ms);
    c.send("\r\n" + std::string{kQuickJob});
    const auto a = c.read_answer(10s);
    REQUIRE(a.has_value());
    CHECK(a->status == 504);
    const auto body = json_of(*a);
    CHECK(body.at("state").as_string() == "rejected");
    CHECK(body.at("reason").as_string() == "budget_too_small");
    // Spent: at least the budget less the reserve (5 ms) and the minimum useful budget (1 ms).
    // (The daemon stamps the request when it reads its first byte, which may be a little after
    // the client sent it.)
    CHECK(timing(body, "intake_ms") >= 100 - 5 - 1);
    CHECK(timing(body, "budget_ms") == 100);
    CHECK(c.closed_by_server(10s));
    CHECK(jobs_submitted(d.port()) == -1);  // nothing reached admission
  }

  TEST_CASE("a request whose body dribbles in slower than its budget is answered when the budget is spent" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--reserve-ms", "20"}};
    Connection c{d.port()};
    c.send(job_head(200, kQuickJob.size()) + "\r\n" + std::string{kQuickJob.substr(0, 5)});
    // The rest never comes: the answer is the budget's 504. Had the daemon waited for the body
    // instead, its 10 s read_timeout would have closed the connection with no answer.
    const auto a = c.read_answer();
    REQUIRE(a.has_value());
    CHECK(a->status == 504);
    CHECK(json_of(*a).at("reason").as_string() == "budget_too_small");
    CHECK(timing(json_of(*a), "intake_ms") >= 200 - 20 - 1);  // budget - reserve - min_useful
    CHECK(jobs_submitted(d.port()) == -1);
    // Another request on a fresh connection is served.
    CHECK(post_job(d.port(), std::string{kQuickJob}).status == 200);
  }

  TEST_CASE("timings count the intake, and the handler's deadline is arrival + budget - reserve" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--reserve-ms", "50"}};
    Connection c{d.port()};
    const std::string job = R"({"kind":"sleep","args":{"ms":0}})";
    c.send(job_head(1000, job.size()));
    let_time_pass(300ms);
    c.send("\r\n" + job);
    const auto a = c.read_answer(10s);
    REQUIRE(a.has_value());
    REQUIRE(a->status == 200);
    const auto body = json_of(*a);
    CHECK(timing(body, "budget_ms") == 1000);
    // The 300 ms the body took to follow, less however late the daemon read the first byte.
    CHECK(timing(body, "intake_ms") >= 50);
    // From the first byte to the deadline is the budget less the reserve, to the rounding of
    // four whole-millisecond values.
    const std::int64_t until_deadline = timing(body, "intake_ms") + timing(body, "queue_ms") +
                                        timing(body, "run_ms") + timing(body, "remaining_ms");
    CHECK(until_deadline <= 1000 - 50);
    CHECK(until_deadline >= 1000 - 50 - 5);
    // The record says the same.
    const auto record = json_of(http(d.port(), "GET", "/v1/jobs/1"));
    CHECK(record.at("timings") == body.at("timings"));
  }

  TEST_CASE("a job that outlives its budget is answered 504 with the reserve still ahead" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--reserve-ms", "100"}};
    // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
    const HttpAnswer a =
        post_job(d.port(), R"({"kind":"sleep","expected_ms":1,"args":{"ms":30000}})", {{"x-request-timeout-ms", "400"}});
    CHECK(a.status == 504);
    const auto body = json_of(a);
    CHECK(body.at("cause").as_string() == "deadline");
    CHECK(timing(body, "budget_ms") == 400);
    // The deadline was arrival + 400 - 100 (to the rounding of four whole-millisecond values, the
    // last one negative when the job ended after it): 100 ms before the client's own timeout.
    const std::int64_t until_deadline = timing(body, "intake_ms") + timing(body, "queue_ms") +
                                        timing(body, "run_ms") + timing(body, "remaining_ms");
    CHECK(until_deadline <= 300 + 1);
    CHECK(until_deadline >= 300 - 5);
  }
}

TEST_SUITE("sandglassd auth before the body") {
  TEST_CASE("a request without the token is answered 401 before its body is sent, and closed" *
            doctest::timeout(60)) {
    const ScopedTempFile token{"token", "Zq8-token_4fV\n"};
    DaemonProcess d{{"--auth-token-file", token.path()}};
    Connection c{d.port()};
    c.send(job_head(5000, 100) + "\r\n");  // the 100 bytes of body never come
    const auto a = c.read_answer(8s);
    REQUIRE(a.has_value());
    CHECK(a->status == 401);
    CHECK(a->header("connection") == "close");
    CHECK(json_of(*a).at("field").as_string() == "authorization");
    CHECK(c.closed_by_server(8s));
  }
}

TEST_SUITE("sandglassd lingering close") {
  // 16 MiB: more than the loopback socket buffers of both ends hold, so the daemon's answer
  // comes while the client is still sending.
  constexpr std::size_t kLargeBody = std::size_t{16} << 20;

  TEST_CASE("a client still sending a large body reads the whole early answer, then end of file" *
            doctest::timeout(60)) {
    const ScopedTempFile token{"token", "Zq8-token_4fV\n"};
    std::vector<std::string> args;
    int expected = 0;
    SUBCASE("413: the body is over the limit") {
      args = {"--config", write_temp_file("small.toml", "[server]\nmax_body_bytes = 65536\n")};
      expected = 413;
    }
    SUBCASE("401: no bearer token") {
      // A body limit above the body: the token is what refuses it.
      args = {"--auth-token-file", token.path(), "--config",
              write_temp_file("large.toml", "[server]\nmax_body_bytes = 33554432\n")};
      expected = 401;
    }
    DaemonProcess d{args};
    Connection c{d.port()};
    Sender sender{c, job_head(5000, kLargeBody) + "\r\n" + std::string(kLargeBody, ' ')};
    const auto a = c.read_answer(20s);
    // The daemon read and dropped the rest instead of resetting the connection: the whole body
    // was sent, the answer read, and then the daemon's side ended in an orderly way.
    CHECK(sender.sent());
    REQUIRE(a.has_value());
    CHECK(a->status == expected);
    CHECK(a->header("connection") == "close");
    CHECK(c.closed_by_server(10s));
  }
}

TEST_SUITE("sandglassd open files") {
  TEST_CASE("the soft open files limit is raised to the hard limit at start" * doctest::timeout(60)) {
    DaemonProcess d{{}, {"/usr/bin/prlimit", "--nofile=256:4096"}};
    std::ifstream limits{"/proc/" + std::to_string(d.pid()) + "/limits"};
    std::string line;
    std::string open_files;
    while (std::getline(limits, line)) {
      if (line.starts_with("Max open files")) open_files = line;
    }
    std::istringstream fields{open_files.substr(std::string_view{"Max open files"}.size())};
    std::string soft;
    std::string hard;
    fields >> soft >> hard;
    CHECK(soft == "4096");
    CHECK(hard == "4096");
    CHECK(d.log().find("raised the open files limit from 256 to 4096") != std::string::npos);
  }
}
