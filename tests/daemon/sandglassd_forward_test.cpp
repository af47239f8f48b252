// The budget across hops: chains of real sandglassd processes joined by the forward kind.
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <memory>
#include <string>

using namespace sandglass::testing;
using boost::json::object;

namespace {

// A daemon whose upstream "next" is the daemon on `port`.
std::unique_ptr<DaemonProcess> forwarding_to(std::uint16_t port, const std::string& extra = {},
                                            std::vector<std::string> args = {}) {
  const std::string config = write_temp_file(
      "forward.toml", "[upstreams.next]\nurl = \"http://127.0.0.1:" + std::to_string(port) +
                          "/v1/jobs\"\nreserve_ms = 20\n" + extra);
  args.insert(args.begin(), {"--config", config});
  return std::make_unique<DaemonProcess>(args);
}

std::string forward_body(const std::string& inner) {
  return R"({"kind":"forward","args":{"upstream":"next","body":)" + inner + "}}";
}

const object& inner_record(const object& record) {
  return record.at("result").as_object().at("body").as_object();
}

}  // namespace

TEST_SUITE("sandglassd forward") {
  TEST_CASE("each hop of a three-daemon chain receives a budget smaller than the one before by at least the reserve" *
            doctest::timeout(60)) {
    DaemonProcess c;
    const auto b = forwarding_to(c.port());
    const auto a = forwarding_to(b->port());
    const std::string body = forward_body(forward_body(R"({"kind":"sleep","args":{"ms":1}})"));
    const HttpAnswer answer = post_job(a->port(), body, {{"x-request-timeout-ms", "2000"}});
    REQUIRE(answer.status == 200);
    const object at_a = json_of(answer);
    const object& at_b = inner_record(at_a);
    const object& at_c = inner_record(at_b);
    CHECK(at_c.at("state").as_string() == "completed");
    CHECK(at_a.at("result").as_object().at("status").as_int64() == 200);
    CHECK(at_a.at("result").as_object().at("attempts").as_int64() == 1);
    const auto budget = [](const object& r) { return r.at("timings").as_object().at("budget_ms").as_int64(); };
    CHECK(budget(at_a) == 2000);
    CHECK(budget(at_b) <= budget(at_a) - 20);
    CHECK(budget(at_c) <= budget(at_b) - 20);
    CHECK(budget(at_c) > 0);
  }

  TEST_CASE("when the budget runs out during the downstream call the caller gives up and the downstream job is cancelled" *
            doctest::timeout(60)) {
    DaemonProcess down;
    const auto up = forwarding_to(down.port());
    const HttpAnswer answer = post_job(up->port(), forward_body(R"({"kind":"spin","args":{"ms":20000}})"),
                                       {{"x-request-timeout-ms", "400"}});
    CHECK(answer.status == 504);
    const object r = json_of(answer);
    CHECK(r.at("state").as_string() == "cancelled");
    CHECK(r.at("cause").as_string() == "deadline");
    // Downstream: its job got less than 400 ms and ended, cancelled, long before 20 s.
    REQUIRE(eventually([&] { return state_of(down.port(), 1) == "cancelled"; }));
    const object d = json_of(http(down.port(), "GET", "/v1/jobs/1"));
    CHECK(d.at("timings").as_object().at("budget_ms").as_int64() < 400);
    CHECK(d.at("timings").as_object().at("run_ms").as_int64() < 1000);
    CHECK(metric(down.port(), R"(sandglass_jobs_total{kind="spin",priority="normal",reason="cancelled_while_running",state="cancelled"})") == 1);
  }

  TEST_CASE("a caller that disconnects at the top of a chain stops the work of every hop" *
            doctest::timeout(60)) {
    DaemonProcess c;
    const auto b = forwarding_to(c.port());
    const auto a = forwarding_to(b->port());
    {
      Connection client{a->port()};
      client.send(request_bytes("POST", "/v1/jobs", forward_body(forward_body(R"({"kind":"sleep","args":{"ms":30000}})"))));
      REQUIRE(eventually([&] { return state_of(c.port(), 1) == "running"; }));
    }
    REQUIRE(eventually([&] { return state_of(c.port(), 1) == "cancelled"; }));
    REQUIRE(eventually([&] { return state_of(b->port(), 1) == "cancelled"; }));
    REQUIRE(eventually([&] { return state_of(a->port(), 1) == "cancelled"; }));
    const object at_c = json_of(http(c.port(), "GET", "/v1/jobs/1"));
    CHECK(at_c.at("cause").as_string() == "caller");
    CHECK(at_c.at("timings").as_object().at("run_ms").as_int64() < 10000);
  }

  TEST_CASE("too little budget to call the upstream fails before dispatch and sends nothing" *
            doctest::timeout(60)) {
    DaemonProcess down;
    const auto up = forwarding_to(down.port(), {}, {"--min-budget-ms", "10"});
    // 25 ms of budget minus a 20 ms reserve leaves less than the 10 ms minimum.
    const HttpAnswer answer = post_job(up->port(), forward_body(R"({"kind":"sleep","args":{"ms":1}})"),
                                       {{"x-request-timeout-ms", "25"}});
    CHECK(answer.status == 504);
    CHECK(json_of(answer).at("reason").as_string() == "deadline_exceeded_before_dispatch");
    CHECK(metric(down.port(), R"(sandglass_jobs_submitted_total{kind="sleep",priority="normal"})") <= 0);
  }

  TEST_CASE("the breaker opens against a dead upstream and closes when it returns" * doctest::timeout(60)) {
    const std::uint16_t port = free_port();
    const auto up = forwarding_to(port, "max_attempts = 1\nfailure_threshold = 2\ncooldown_ms = 300\n");
    const std::string body = forward_body(R"({"kind":"sleep","args":{"ms":1}})");
    CHECK(post_job(up->port(), body).status == 500);  // connection refused
    CHECK(post_job(up->port(), body).status == 500);
    const HttpAnswer open = post_job(up->port(), body);
    CHECK(open.status == 503);
    CHECK(json_of(open).at("reason").as_string() == "breaker_open");
    CHECK(json_of(open).at("result").as_object().at("attempts").as_int64() == 0);
    CHECK(metric(up->port(), R"(sandglass_upstream_breaker_state{upstream="next"})") == 2);
    CHECK(metric(up->port(), R"(sandglass_upstream_attempts_total{result="connect_error",upstream="next"})") == 2);
    CHECK(metric(up->port(), R"(sandglass_upstream_calls_total{reason="breaker_open",upstream="next"})") == 1);
    DaemonProcess back{{"--listen", "127.0.0.1:" + std::to_string(port)}};
    CHECK(eventually([&] { return post_job(up->port(), body).status == 200; }));
    CHECK(post_job(up->port(), body).status == 200);
    CHECK(metric(up->port(), R"(sandglass_upstream_breaker_state{upstream="next"})") == 0);
  }

  TEST_CASE("the job's idempotency key travels upstream so a repeated request attaches there" *
            doctest::timeout(60)) {
    DaemonProcess down;
    const auto up = forwarding_to(down.port());
    const std::string inner = R"({"kind":"sleep","args":{"ms":1}})";
    const HttpAnswer answer = post_job(
        up->port(), R"({"kind":"forward","idempotency_key":"pay-42","args":{"upstream":"next","body":)" + inner + "}}");
    REQUIRE(answer.status == 200);
    CHECK(inner_record(json_of(answer)).at("id").to_number<int>() == 1);
    // The same request straight to the upstream, with the key as a header: the stored outcome.
    const HttpAnswer again = post_job(down.port(), inner, {{"idempotency-key", "pay-42"}});
    CHECK(again.status == 200);
    CHECK(json_of(again).at("id").to_number<int>() == 1);
    CHECK(metric(down.port(), R"(sandglass_jobs_submitted_total{kind="sleep",priority="normal"})") == 1);
  }
}
