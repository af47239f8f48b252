// Idempotency keys at the wire: one key, one job.
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

using namespace sandglass::testing;
using boost::json::object;

TEST_SUITE("sandglassd idempotency") {
  TEST_CASE("a second submit with the key of a running job attaches to it and both get its outcome" *
            doctest::timeout(60)) {
    DaemonProcess d;
    const std::string body = R"({"kind":"sleep","args":{"ms":300},"idempotency_key":"order-7"})";
    Connection first{d.port()};
    first.send(request_bytes("POST", "/v1/jobs", body));
    REQUIRE(eventually([&] { return state_of(d.port(), 1) == "running"; }));
    Connection second{d.port()};
    second.send(request_bytes("POST", "/v1/jobs", body, {{"x-request-timeout-ms", "5000"}}));
    const auto a = first.read_answer();
    const auto b = second.read_answer();
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    CHECK(a->status == 200);
    CHECK(b->status == 200);
    CHECK(id_of(*a) == 1);
    CHECK(id_of(*b) == 1);
    CHECK(metric(d.port(), R"(sandglass_jobs_submitted_total{kind="sleep",priority="normal"})") == 1);
  }

  TEST_CASE("after the job finished the same key returns the stored outcome without running again" *
            doctest::timeout(60)) {
    DaemonProcess d;
    const std::string body = R"({"kind":"spin","args":{"ms":1},"idempotency_key":"k"})";
    const HttpAnswer a = post_job(d.port(), body);
    const HttpAnswer b = post_job(d.port(), body);
    const HttpAnswer c = post_job(d.port(), body, {}, "?wait=false");
    CHECK(a.status == 200);
    CHECK(b.status == 200);
    CHECK(c.status == 200);  // already over: the stored outcome, not 202
    CHECK(b.body == a.body);
    CHECK(c.body == a.body);
    CHECK(metric(d.port(), R"(sandglass_jobs_submitted_total{kind="spin",priority="normal"})") == 1);
  }

  TEST_CASE("the same key with a different request is answered 409" * doctest::timeout(60)) {
    DaemonProcess d;
    CHECK(post_job(d.port(), R"({"kind":"sleep","args":{"ms":1},"idempotency_key":"k"})").status == 200);
    const HttpAnswer other = post_job(d.port(), R"({"kind":"sleep","args":{"ms":2},"idempotency_key":"k"})");
    CHECK(other.status == 409);
    CHECK(json_of(other).at("field").as_string() == "idempotency_key");
  }

  TEST_CASE("a key whose job was rejected runs anew on the next submit" * doctest::timeout(60)) {
    DaemonProcess d{{"--min-budget-ms", "10"}};
    const std::string body = R"({"kind":"sleep","args":{"ms":1},"idempotency_key":"again"})";
    const HttpAnswer rejected = post_job(d.port(), body, {{"x-request-timeout-ms", "5"}});
    CHECK(rejected.status == 504);
    const HttpAnswer ran = post_job(d.port(), body);
    CHECK(ran.status == 200);
    CHECK(id_of(ran) != id_of(rejected));
  }

  TEST_CASE("the job goes on while an attached client still waits after the first one left" *
            doctest::timeout(60)) {
    DaemonProcess d;
    const std::string body = R"({"kind":"sleep","args":{"ms":400},"idempotency_key":"shared"})";
    Connection stays{d.port()};
    {
      Connection leaves{d.port()};
      leaves.send(request_bytes("POST", "/v1/jobs", body));
      REQUIRE(eventually([&] { return state_of(d.port(), 1) == "running"; }));
      stays.send(request_bytes("POST", "/v1/jobs", body));
      REQUIRE(eventually([&] {
        const HttpAnswer r = http(d.port(), "GET", "/v1/jobs/1");
        return json_of(r).at("waiters").to_number<int>() == 2;
      }));
    }
    const auto a = stays.read_answer();
    REQUIRE(a.has_value());
    CHECK(a->status == 200);
    CHECK(json_of(*a).at("state").as_string() == "completed");
    CHECK(id_of(*a) == 1);
  }
}

TEST_SUITE("sandglassd commit points") {
  TEST_CASE("a job cancelled after its commit point completes after cancel and its key returns the committed result" *
            doctest::timeout(60)) {
    DaemonProcess d;
    const std::string body =
        R"({"kind":"sleep","args":{"ms":3000,"commit_at_ms":50},"idempotency_key":"transfer-9"})";
    Connection c{d.port()};
    c.send(request_bytes("POST", "/v1/jobs", body));
    REQUIRE(eventually([&] { return state_of(d.port(), 1) == "running"; }));
    REQUIRE(eventually([&] {
      // Past the commit point (50 ms into its run) once a second of its run has gone: margin
      // for a worker that a loaded machine does not schedule at once.
      const object r = json_of(http(d.port(), "GET", "/v1/jobs/1"));
      return r.at("timings").as_object().at("run_ms").as_int64() > 1000;
    }));
    // Past its commit point it runs on for 2 s more: the DELETE answers 202 cancelling after
    // its 100 ms wait.
    CHECK(http(d.port(), "DELETE", "/v1/jobs/1").status == 202);
    const auto a = c.read_answer();
    completed_after_caller_cancel(a);
    // Reconciliation: asking again with the key returns the durable result.
    const HttpAnswer again = post_job(d.port(), body);
    CHECK(again.status == 200);
    CHECK(again.body == a->body);
    CHECK(metric(d.port(), R"(sandglass_completed_after_cancel_total{kind="sleep"})") == 1);
  }
}
