// server.max_pending_body_bytes against the real sandglassd: the bodies being read at once, all
// connections together, are bounded; a request whose body would pass the bound is answered
// 503 before its body is read, and the bound is given back as each body is read.
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace sandglass::testing;

TEST_SUITE("sandglassd pending bodies") {
  TEST_CASE("bodies being read at once are bounded in total and a request past the bound is answered 503" *
            doctest::timeout(60)) {
    const std::string config = write_temp_file(
        "pending.toml", "[server]\nmax_body_bytes = 4096\nmax_pending_body_bytes = 1000\n");
    DaemonProcess d{{"--config", config}};
    const std::string body(800, 'x');  // not JSON: a full request is answered 400, runs nothing

    // One client sends its header section and half its body, then stalls.
    Connection slow{d.port()};
    const std::string slow_request = request_bytes("POST", "/v1/jobs", body);
    slow.send(slow_request.substr(0, slow_request.size() - 400));

    // Another request's body does not fit beside it: 503, once the slow one's header is read.
    std::optional<HttpAnswer> refused;
    REQUIRE(eventually([&] {
      refused = http(d.port(), "POST", "/v1/jobs", body);
      return refused->status == 503;
    }));
    CHECK(refused->header("retry-after") == "1");
    CHECK(json_of(*refused).at("field").as_string() == "body");
    // A request without a body is not held up.
    CHECK(http(d.port(), "GET", "/healthz").status == 200);
    // A small body still fits beside the slow one.
    CHECK(http(d.port(), "POST", "/v1/jobs", std::string(100, 'x')).status == 400);

    // The slow body arrives: its bytes are given back, and the other request fits again.
    slow.send(slow_request.substr(slow_request.size() - 400));
    const auto answer = slow.read_answer();
    REQUIRE(answer.has_value());
    CHECK(answer->status == 400);
    CHECK(http(d.port(), "POST", "/v1/jobs", body).status == 400);

    // A client that goes away with its body half sent gives its bytes back too.
    {
      Connection gone{d.port()};
      gone.send(slow_request.substr(0, slow_request.size() - 400));
      REQUIRE(eventually([&] { return http(d.port(), "POST", "/v1/jobs", body).status == 503; }));
    }
    CHECK(eventually([&] { return http(d.port(), "POST", "/v1/jobs", body).status == 400; }));
  }
}
