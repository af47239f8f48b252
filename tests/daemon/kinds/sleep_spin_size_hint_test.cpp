// The sleep and spin kinds state their own `ms` as their size (JobKind::expected): a long job
// of the kind does not make a short one implausible, and a job longer than its budget is
// refused before it runs.
#include "../daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace sandglass::testing;
using boost::json::object;

TEST_SUITE("sandglassd sleep and spin size hints") {
  TEST_CASE("after one 3 s sleep a 10 ms sleep with a 1 s budget is admitted and completes" *
            doctest::timeout(60)) {
    DaemonProcess d{{}};
    const HttpAnswer long_one = post_job(d.port(), R"({"kind":"sleep","args":{"ms":3000}})",
                                         {{"x-request-timeout-ms", "10000"}});
    REQUIRE(long_one.status == 200);
    REQUIRE(json_of(long_one).at("state").as_string() == "completed");

    for (int i = 0; i < 3; ++i) {
      const HttpAnswer short_one = post_job(d.port(), R"({"kind":"sleep","args":{"ms":10}})",
                                            {{"x-request-timeout-ms", "1000"}});
      CHECK(short_one.status == 200);
      CHECK(json_of(short_one).at("state").as_string() == "completed");
    }
  }

  TEST_CASE("after one 500 ms spin a 5 ms spin with a 300 ms budget is admitted and completes" *
            doctest::timeout(60)) {
    DaemonProcess d{{}};
    const HttpAnswer long_one = post_job(d.port(), R"({"kind":"spin","args":{"ms":500}})",
                                         {{"x-request-timeout-ms", "10000"}});
    REQUIRE(long_one.status == 200);
    REQUIRE(json_of(long_one).at("state").as_string() == "completed");

    const HttpAnswer short_one = post_job(d.port(), R"({"kind":"spin","args":{"ms":5}})",
                                          {{"x-request-timeout-ms", "300"}});
    CHECK(short_one.status == 200);
    CHECK(json_of(short_one).at("state").as_string() == "completed");
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
