#include "daemon/api/job_request.hpp"

#include <doctest/doctest.h>

#include <chrono>

using namespace std::chrono_literals;
using sandglass::daemon::HttpRequest;
using sandglass::daemon::JobRequest;
using sandglass::daemon::parse_job_request;
using sandglass::daemon::RequestError;

namespace {
HttpRequest post(std::string body, std::string target = "/v1/jobs",
                 std::vector<std::pair<std::string, std::string>> headers = {}) {
  return {.method = "POST", .target = std::move(target), .headers = std::move(headers), .body = std::move(body)};
}
}  // namespace

TEST_SUITE("job request") {
  TEST_CASE("a full request is parsed field by field") {
    const auto r = parse_job_request(
        post(R"({"kind":"sleep","args":{"ms":5},"priority":"high","timeout_ms":250,"idempotency_key":"k-1"})",
             "/v1/jobs?wait=false"),
        32);
    REQUIRE(std::holds_alternative<JobRequest>(r));
    const JobRequest& j = std::get<JobRequest>(r);
    CHECK(j.kind == "sleep");
    CHECK(j.args.at("ms").as_int64() == 5);
    CHECK(j.priority == sandglass::Priority::high);
    CHECK(j.budget == sandglass::Duration{250ms});
    CHECK(j.idempotency_key == "k-1");
    CHECK_FALSE(j.wait);
  }

  TEST_CASE("retry and delay_ms are read, bounded, and a bad value names its field") {
    const auto r = parse_job_request(
        post(R"({"kind":"exec","retry":{"max_attempts":3,"backoff_ms":20},"delay_ms":1500})"), 32,
        2000ms);
    REQUIRE(std::holds_alternative<JobRequest>(r));
    const JobRequest& j = std::get<JobRequest>(r);
    REQUIRE(j.retry.has_value());
    CHECK(j.retry->max_attempts == 3);
    CHECK(j.retry->backoff == sandglass::Duration{20ms});
    CHECK(j.delay == sandglass::Duration{1500ms});

    const auto defaulted = parse_job_request(post(R"({"kind":"exec","retry":{"max_attempts":2}})"), 32);
    REQUIRE(std::holds_alternative<JobRequest>(defaulted));
    CHECK(std::get<JobRequest>(defaulted).retry->backoff == sandglass::Duration{100ms});
    CHECK(std::get<JobRequest>(defaulted).delay == sandglass::Duration::zero());

    const auto field = [](const std::string& body) {
      const auto e = parse_job_request(post(body), 32, 2000ms);
      REQUIRE(std::holds_alternative<RequestError>(e));
      return std::get<RequestError>(e).field;
    };
    CHECK(field(R"({"kind":"exec","delay_ms":2001})") == "delay_ms");
    CHECK(field(R"({"kind":"exec","delay_ms":-5})") == "delay_ms");
    CHECK(field(R"({"kind":"exec","retry":{"max_attempts":0}})") == "retry.max_attempts");
    CHECK(field(R"({"kind":"exec","retry":{"max_attempts":2,"backoff_ms":"1s"}})") == "retry.backoff_ms");
    CHECK(field(R"({"kind":"exec","retry":[]})") == "retry");
  }

  TEST_CASE("no budget anywhere leaves the budget empty and the request waits") {
    const auto r = parse_job_request(post(R"({"kind":"sleep"})"), 32);
    REQUIRE(std::holds_alternative<JobRequest>(r));
    CHECK_FALSE(std::get<JobRequest>(r).budget.has_value());
    CHECK(std::get<JobRequest>(r).wait);
    CHECK(std::get<JobRequest>(r).args.empty());
  }

  TEST_CASE("expected_ms is the job's own expected run time, anything but a positive integer "
            "is refused naming it") {
    const auto r = parse_job_request(post(R"({"kind":"sleep","expected_ms":40})"), 32);
    REQUIRE(std::holds_alternative<JobRequest>(r));
    CHECK(std::get<JobRequest>(r).expected == sandglass::Duration{40ms});
    CHECK(std::get<JobRequest>(parse_job_request(post(R"({"kind":"sleep"})"), 32)).expected ==
          sandglass::Duration::zero());
    for (const char* bad : {R"(0)", R"(-5)", R"(1.5)", R"("40")", R"(null)", R"(18446744073709551615)"}) {
      CAPTURE(bad);
      const auto e = parse_job_request(post(std::string{R"({"kind":"sleep","expected_ms":)"} + bad + "}"), 32);
      REQUIRE(std::holds_alternative<RequestError>(e));
      CHECK(std::get<RequestError>(e).field == "expected_ms");
    }
  }

  TEST_CASE("a huge timeout_ms saturates instead of overflowing") {
    const auto r = parse_job_request(post(R"({"kind":"sleep","timeout_ms":18446744073709551615})"), 32);
    REQUIRE(std::holds_alternative<JobRequest>(r));
    CHECK(std::get<JobRequest>(r).budget == sandglass::Duration::max());
    const auto big = parse_job_request(post(R"({"kind":"sleep","timeout_ms":9223372036854775807})"), 32);
    REQUIRE(std::holds_alternative<JobRequest>(big));
    CHECK(std::get<JobRequest>(big).budget == sandglass::Duration::max());
  }

  TEST_CASE("the smallest budget of headers and body wins") {
    const auto r = parse_job_request(
        post(R"({"kind":"sleep","timeout_ms":300})", "/v1/jobs",
             {{"x-request-timeout-ms", "200"}, {"grpc-timeout", "1S"}}),
        32);
    REQUIRE(std::holds_alternative<JobRequest>(r));
    CHECK(std::get<JobRequest>(r).budget == sandglass::Duration{200ms});
  }

  TEST_CASE("bad query parameters name themselves") {
    const auto bad_value = parse_job_request(post(R"({"kind":"sleep"})", "/v1/jobs?wait=maybe"), 32);
    REQUIRE(std::holds_alternative<RequestError>(bad_value));
    CHECK(std::get<RequestError>(bad_value).field == "wait");
    const auto unknown = parse_job_request(post(R"({"kind":"sleep"})", "/v1/jobs?colour=red"), 32);
    REQUIRE(std::holds_alternative<RequestError>(unknown));
    CHECK(std::get<RequestError>(unknown).field == "colour");
  }

  TEST_CASE("a query parameter whose name is not printable ASCII is named query") {
    for (const char* target : {"/v1/jobs?\xff\xfe=1", "/v1/jobs?=1", "/v1/jobs?a\x7f=1"}) {
      CAPTURE(target);
      const auto r = parse_job_request(post(R"({"kind":"sleep"})", target), 32);
      REQUIRE(std::holds_alternative<RequestError>(r));
      CHECK(std::get<RequestError>(r).field == "query");
    }
  }

  TEST_CASE("a key that appears twice in one object is refused naming its path") {
    const std::pair<const char*, const char*> cases[] = {
        {R"({"kind":"sleep","kind":"spin"})", "kind"},
        {R"({"kind":"sleep","args":{"ms":1},"args":{"ms":2}})", "args"},
        {R"({"kind":"exec","args":{"command":"cat","command":"rm"}})", "args.command"},
        {R"({"kind":"forward","args":{"upstream":"a","body":{"args":{"x":1,"x":2}}}})", "args.body.args.x"},
        {R"({"kind":"forward","args":{"upstream":"a","body":[{"k":1,"k":2}]}})", "args.body.k"},
        // The second element's path does not pick up a key of the first.
        {R"({"kind":"forward","args":{"upstream":"a","body":[{"j":1},{"k":1,"k":2}]}})", "args.body.k"},
        {R"({"kind":"forward","args":{"upstream":"a","body":{"x":{"y":1},"k":1,"k":2}}})", "args.body.k"},
        {R"({"kind":"sl\u0065ep","k\u0069nd":"spin"})", "kind"},  // the same key, escaped
    };
    for (const auto& [body, field] : cases) {
      CAPTURE(body);
      const auto r = parse_job_request(post(body), 32);
      REQUIRE(std::holds_alternative<RequestError>(r));
      CHECK(std::get<RequestError>(r).field == field);
      CHECK(std::get<RequestError>(r).message == "appears more than once in its object");
    }
    // The same key in different objects is fine.
    const auto ok = parse_job_request(
        post(R"({"kind":"forward","args":{"upstream":"a","body":{"kind":"sleep","args":{"ms":1}}}})"), 32);
    CHECK(std::holds_alternative<JobRequest>(ok));
  }

  TEST_CASE("an empty query parameter name or body field name is named by its place") {
    // Found by fuzz_job_request: both errors named the empty string as their field.
    const auto query = parse_job_request(post(R"({"kind":"sleep"})", "/v1/jobs?=1"), 32);
    REQUIRE(std::holds_alternative<RequestError>(query));
    CHECK(std::get<RequestError>(query).field == "query");
    const auto body = parse_job_request(post(R"({"kind":"sleep","":1})"), 32);
    REQUIRE(std::holds_alternative<RequestError>(body));
    CHECK(std::get<RequestError>(body).field == "body");
  }

  TEST_CASE("nesting deeper than the limit is rejected as a bad body") {
    const auto r = parse_job_request(post(R"({"kind":"sleep","args":{"a":{"b":{"c":1}}}})"), 3);
    REQUIRE(std::holds_alternative<RequestError>(r));
    CHECK(std::get<RequestError>(r).field == "body");
    const auto ok = parse_job_request(post(R"({"kind":"sleep","args":{"a":{"b":{"c":1}}}})"), 4);
    CHECK(std::holds_alternative<JobRequest>(ok));
  }

  TEST_CASE("an absolute target is reduced to its path and query") {
    const auto t = sandglass::daemon::split_target("http://127.0.0.1:8080/v1/jobs?wait=false");
    CHECK(t.path == "/v1/jobs");
    CHECK(t.query == "wait=false");
    CHECK(sandglass::daemon::split_target("http://127.0.0.1:8080").path == "/");
  }

  TEST_CASE("an idempotency key in the header and a different one in the body is a 400 naming both") {
    const auto r = parse_job_request(post(R"({"kind":"sleep","idempotency_key":"k3"})", "/v1/jobs",
                                          {{"idempotency-key", "k2"}}),
                                     32);
    REQUIRE(std::holds_alternative<RequestError>(r));
    const RequestError& e = std::get<RequestError>(r);
    CHECK(e.field == "idempotency_key");
    CHECK(e.message ==
          "differs from the idempotency-key header; send one key, or the same key in both");
  }

  TEST_CASE("the same idempotency key in the header and the body is that key") {
    const auto r = parse_job_request(post(R"({"kind":"sleep","idempotency_key":"k2"})", "/v1/jobs",
                                          {{"idempotency-key", "k2"}}),
                                     32);
    REQUIRE(std::holds_alternative<JobRequest>(r));
    CHECK(std::get<JobRequest>(r).idempotency_key == "k2");
  }

  TEST_CASE("the header's idempotency key alone is the job's key") {
    const auto r =
        parse_job_request(post(R"({"kind":"sleep"})", "/v1/jobs", {{"idempotency-key", "k9"}}), 32);
    REQUIRE(std::holds_alternative<JobRequest>(r));
    CHECK(std::get<JobRequest>(r).idempotency_key == "k9");
  }
}
