// Idempotency keys that could not be stored as text (NUL, invalid UTF-8) are refused at parse
// time, naming the field, in the body and in the header.
#include "daemon/api/job_request.hpp"

#include <doctest/doctest.h>

#include <string>
#include <variant>

using sandglass::daemon::HttpRequest;
using sandglass::daemon::JobRequest;
using sandglass::daemon::parse_job_request;
using sandglass::daemon::RequestError;

namespace {

HttpRequest with_key_header(std::string key) {
  return {.method = "POST", .target = "/v1/jobs", .headers = {{"idempotency-key", std::move(key)}},
          .body = R"({"kind":"sleep"})"};
}

std::string refused_field(const HttpRequest& request) {
  const auto r = parse_job_request(request, 32);
  return std::holds_alternative<RequestError>(r) ? std::get<RequestError>(r).field : std::string{};
}

}  // namespace

TEST_SUITE("job request") {
  TEST_CASE("an idempotency key with NUL in the body is refused naming idempotency_key") {
    const HttpRequest r{.method = "POST", .target = "/v1/jobs",
                        .body = R"({"kind":"sleep","idempotency_key":"a\u0000b"})"};
    CHECK(refused_field(r) == "idempotency_key");
  }

  TEST_CASE("an idempotency key header with NUL or invalid UTF-8 is refused naming the header") {
    for (const std::string& bad : {std::string{"a\0b", 3}, std::string{"\xff"}, std::string{"\xc0\xaf"},
                                  std::string{"\xed\xa0\x80"}, std::string{"ab\xe2\x82"}}) {
      CAPTURE(bad);
      CHECK(refused_field(with_key_header(bad)) == "idempotency-key");
    }
  }

  TEST_CASE("an idempotency key of any well-formed UTF-8 is kept as sent") {
    const std::string key = "k\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80";
    const auto r = parse_job_request(with_key_header(key), 32);
    REQUIRE(std::holds_alternative<JobRequest>(r));
    CHECK(std::get<JobRequest>(r).idempotency_key == key);
  }
}
