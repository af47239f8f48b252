#include "daemon/http/http_parse.hpp"

#include <doctest/doctest.h>

#include <string>

using sandglass::daemon::HttpParse;
using sandglass::daemon::parse_http_request;
using sandglass::daemon::ServerLimits;

namespace {

const ServerLimits kLimits{.max_body_bytes = 64, .max_header_bytes = 256};

}  // namespace

TEST_SUITE("parse_http_request") {
  TEST_CASE("a whole request becomes plain values with lower-case header names") {
    const std::string bytes =
        "POST http://127.0.0.1:8080/v1/jobs?wait=false HTTP/1.1\r\nHost: a\r\n"
        "X-Request-Timeout-MS: 250\r\nContent-Length: 2\r\n\r\n{}";
    const HttpParse p = parse_http_request(bytes, kLimits);
    REQUIRE(p.status == HttpParse::Status::request);
    CHECK(p.request.method == "POST");
    CHECK(p.request.target == "http://127.0.0.1:8080/v1/jobs?wait=false");
    CHECK(p.request.header("x-request-timeout-ms") == "250");
    CHECK(p.request.body == "{}");
    CHECK(p.keep_alive);
    CHECK_FALSE(p.expect_continue);
    CHECK(p.consumed == bytes.size());
  }

  TEST_CASE("a pipelined request is left for the next parse") {
    const std::string first = "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n";
    const std::string second = "GET /readyz HTTP/1.0\r\n\r\n";
    const HttpParse p = parse_http_request(first + second, kLimits);
    REQUIRE(p.status == HttpParse::Status::request);
    CHECK(p.request.target == "/healthz");
    REQUIRE(p.consumed == first.size());
    const HttpParse next = parse_http_request(second, kLimits);
    REQUIRE(next.status == HttpParse::Status::request);
    CHECK(next.request.target == "/readyz");
    CHECK_FALSE(next.keep_alive);
  }

  TEST_CASE("a chunked body with Expect 100-continue is read whole") {
    const HttpParse p = parse_http_request(
        "POST /v1/jobs HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n"
        "3\r\n{\"k\r\n2\r\n\"}\r\n0\r\n\r\n",
        kLimits);
    REQUIRE(p.status == HttpParse::Status::request);
    CHECK(p.expect_continue);
    CHECK(p.request.body == "{\"k\"}");
  }

  TEST_CASE("bad input gets the server's answer") {
    SUBCASE("a Transfer-Encoding that does not end in chunked") {
      const HttpParse p = parse_http_request(
          "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", kLimits);
      REQUIRE(p.status == HttpParse::Status::answer_and_close);
      CHECK(p.answer.status == 400);
    }
    SUBCASE("a body over the limit") {
      const HttpParse p = parse_http_request(
          "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 65\r\n\r\n" + std::string(65, 'x'), kLimits);
      REQUIRE(p.status == HttpParse::Status::answer_and_close);
      CHECK(p.answer.status == 413);
    }
    SUBCASE("a header section over the limit") {
      const HttpParse p = parse_http_request(
          "GET / HTTP/1.1\r\nX: " + std::string(300, 'x') + "\r\n\r\n", kLimits);
      REQUIRE(p.status == HttpParse::Status::answer_and_close);
      CHECK(p.answer.status == 431);
    }
    SUBCASE("garbage") {
      const HttpParse p = parse_http_request("GARBAGE\r\n\r\n", kLimits);
      REQUIRE(p.status == HttpParse::Status::answer_and_close);
      CHECK(p.answer.status == 400);
    }
  }

  TEST_CASE("bytes that end before the request does are incomplete and get no answer") {
    CHECK(parse_http_request("", kLimits).status == HttpParse::Status::incomplete);
    CHECK(parse_http_request("GET / HTTP/1.1\r\nHost:", kLimits).status == HttpParse::Status::incomplete);
    CHECK(parse_http_request("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n{}", kLimits).status ==
          HttpParse::Status::incomplete);
  }
}
