// The sleep and spin kinds state their own `ms` as their size (JobKind::expected): a long job
// of the kind does not make a short one implausible, and a job longer than its budget is
// refused before it runs.
#include "../daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace sandglass::testing;
using boost::json::object;

namespace {

// Runs one `long_ms` job of `kind` to its end on a fresh daemon, then one of `short_ms` with a
// budget of `budget_ms`: admitted (by its own size) and completed.
void short_after_long(const std::string& kind, int long_ms, int short_ms, int budget_ms) {
  DaemonProcess d{{}};
  const auto body = [&](int ms) {
    return R"({"kind":")" + kind + R"(","args":{"ms":)" + std::to_string(ms) + "}}";
  };
  const HttpAnswer long_one = post_job(d.port(), body(long_ms), {{"x-request-timeout-ms", "10000"}});
  REQUIRE(long_one.status == 200);
  REQUIRE(json_of(long_one).at("state").as_string() == "completed");
  for (int i = 0; i < 3; ++i) {
    const HttpAnswer short_one =
        post_job(d.port(), body(short_ms), {{"x-request-timeout-ms", std::to_string(budget_ms)}});
    CHECK(short_one.status == 200);
    CHECK(json_of(short_one).at("state").as_string() == "completed");
  }
}

}  // namespace

TEST_SUITE("sandglassd sleep and spin size hints") {
  TEST_CASE("after one 3 s sleep a 10 ms sleep with a 1 s budget is admitted and completes" *
            doctest::timeout(60)) {
    short_after_long("sleep", 3000, 10, 1000);
  }

  TEST_CASE("after one 500 ms spin a 5 ms spin with a 300 ms budget is admitted and completes" *
            doctest::timeout(60)) {
    short_after_long("spin", 500, 5, 300);
  }

  TEST_CASE("a sleep longer than its budget is refused as implausible before any ran, naming "
            "its own size" *
            doctest::timeout(60)) {
    DaemonProcess d{{}};
    const HttpAnswer a = post_job(d.port(), R"({"kind":"sleep","args":{"ms":5000}})",
                                  {{"x-request-timeout-ms", "1000"}});
    CHECK(a.status == 503);
    const object r = json_of(a);
    CHECK(r.at("reason").as_string() == "deadline_implausible");
    CHECK(std::string{r.at("error").as_string()}.find("from its expected 5s") != std::string::npos);
  }

  TEST_CASE("an explicit expected_ms wins over the sleep's own ms" * doctest::timeout(60)) {
    DaemonProcess d{{}};
    // Says it takes 1 ms: admitted with a 1 s budget, though it sleeps 2 s (and is cut at its
    // deadline).
    const HttpAnswer a = post_job(d.port(), R"({"kind":"sleep","args":{"ms":2000},"expected_ms":1})",
                                  {{"x-request-timeout-ms", "1000"}});
    CHECK(a.status != 503);
    CHECK(json_of(a).at("reason").as_string() != "deadline_implausible");
  }
}
