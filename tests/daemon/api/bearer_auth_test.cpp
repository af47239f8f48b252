#include "daemon/api/bearer_auth.hpp"

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

using sandglass::daemon::BearerAuth;
using sandglass::daemon::constant_time_equals;
using sandglass::daemon::HttpRequest;
using sandglass::daemon::is_open_path;
using sandglass::daemon::kMaxAuthTokenBytes;
using Verdict = sandglass::daemon::BearerAuth::Verdict;

namespace {

HttpRequest request_with(std::vector<std::pair<std::string, std::string>> headers) {
  return {.method = "POST", .target = "/v1/jobs", .headers = std::move(headers), .body = "{}"};
}

}  // namespace

TEST_SUITE("constant_time_equals") {
  TEST_CASE("equal strings are equal") {
    CHECK(constant_time_equals("s3cret-token", "s3cret-token"));
    CHECK(constant_time_equals("", ""));
    const std::string longest(kMaxAuthTokenBytes, 'x');
    CHECK(constant_time_equals(longest, longest));
  }

  TEST_CASE("a difference in any position makes them unequal") {
    const std::string token = "abcdefgh";
    for (std::size_t i = 0; i < token.size(); ++i) {
      std::string other = token;
      other[i] = static_cast<char>(other[i] ^ 0x01);
      CAPTURE(i);
      CHECK_FALSE(constant_time_equals(token, other));
    }
  }

  TEST_CASE("a prefix or an extension is unequal even when the rest is NUL bytes") {
    CHECK_FALSE(constant_time_equals("abcdef", "abc"));
    CHECK_FALSE(constant_time_equals("abc", "abcdef"));
    CHECK_FALSE(constant_time_equals("abc", ""));
    CHECK_FALSE(constant_time_equals("", "abc"));
    // Positions past the end read as 0: only the length tells these apart.
    CHECK_FALSE(constant_time_equals("abc", std::string_view{"abc\0", 4}));
    CHECK_FALSE(constant_time_equals(std::string_view{"abc\0", 4}, "abc"));
  }

  TEST_CASE("a given string longer than the longest token is unequal") {
    const std::string longest(kMaxAuthTokenBytes, 'x');
    CHECK_FALSE(constant_time_equals(longest, longest + "x"));
    CHECK_FALSE(constant_time_equals(longest + "x", longest + "x"));
  }
}

TEST_SUITE("BearerAuth") {
  TEST_CASE("without a token every request is allowed") {
    const BearerAuth auth{""};
    CHECK_FALSE(auth.required());
    CHECK(auth.check(request_with({})) == Verdict::allowed);
    CHECK(auth.check(request_with({{"authorization", "Bearer anything"}})) == Verdict::allowed);
  }

  TEST_CASE("with a token only the right Bearer token is allowed") {
    const BearerAuth auth{"s3cret"};
    CHECK(auth.required());
    CHECK(auth.check(request_with({{"authorization", "Bearer s3cret"}})) == Verdict::allowed);
    CHECK(auth.check(request_with({{"authorization", "bearer s3cret"}})) == Verdict::allowed);
    CHECK(auth.check(request_with({{"authorization", "BEARER   s3cret"}})) == Verdict::allowed);
    CHECK(auth.check(request_with({{"x-other", "v"}, {"authorization", "Bearer s3cret"}})) ==
          Verdict::allowed);
  }

  TEST_CASE("a request without a Bearer token is missing one") {
    const BearerAuth auth{"s3cret"};
    CHECK(auth.check(request_with({})) == Verdict::missing);
    CHECK(auth.check(request_with({{"authorization", ""}})) == Verdict::missing);
    CHECK(auth.check(request_with({{"authorization", "Bearer"}})) == Verdict::missing);
    CHECK(auth.check(request_with({{"authorization", "Basic czNjcmV0"}})) == Verdict::missing);
    CHECK(auth.check(request_with({{"authorization", "Bearers3cret"}})) == Verdict::missing);
    CHECK(auth.check(request_with({{"authorization", "s3cret"}})) == Verdict::missing);
  }

  TEST_CASE("a wrong token or two Authorization headers are invalid") {
    const BearerAuth auth{"s3cret"};
    CHECK(auth.check(request_with({{"authorization", "Bearer s3cres"}})) == Verdict::invalid);
    CHECK(auth.check(request_with({{"authorization", "Bearer s3cre"}})) == Verdict::invalid);
    CHECK(auth.check(request_with({{"authorization", "Bearer s3cret2"}})) == Verdict::invalid);
    CHECK(auth.check(request_with({{"authorization", "Bearer S3CRET"}})) == Verdict::invalid);
    CHECK(auth.check(request_with({{"authorization", "Bearer s3cret x"}})) == Verdict::invalid);
    CHECK(auth.check(request_with({{"authorization", "Bearer " + std::string(5000, 'a')}})) ==
          Verdict::invalid);
    CHECK(auth.check(request_with({{"authorization", "Bearer s3cret"},
                                   {"authorization", "Bearer s3cret"}})) == Verdict::invalid);
  }

  TEST_CASE("only health readiness and metrics are open paths") {
    CHECK(is_open_path("/healthz"));
    CHECK(is_open_path("/readyz"));
    CHECK(is_open_path("/metrics"));
    CHECK(is_open_path("/"));  // the status page's static files hold no data
    CHECK(is_open_path("/ui"));
    CHECK(is_open_path("/ui/app.js"));
    CHECK_FALSE(is_open_path("/ui/other"));
    CHECK_FALSE(is_open_path("/v1/stats"));
    CHECK_FALSE(is_open_path("/v1/jobs"));
    CHECK_FALSE(is_open_path("/v1/jobs/1"));
    CHECK_FALSE(is_open_path("/metrics/"));
    CHECK_FALSE(is_open_path("/healthz/../v1/jobs"));
    CHECK_FALSE(is_open_path("/nowhere"));
    CHECK_FALSE(is_open_path(""));
  }
}
