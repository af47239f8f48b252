// GET /v1/jobs/{id}?wait=true against the real sandglassd: the answer comes when the job has
// ended, or at its deadline plus the reserve with the record as it stands; a reader that goes
// away never cancels the job; the query takes `wait` and nothing else.
#include "daemon_test_support.hpp"
#include "fail_and_slow_commands.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace sandglass::testing;
using boost::json::object;

namespace {

std::uint64_t submit_without_waiting(std::uint16_t port, const std::string& body) {
  const HttpAnswer a = post_job(port, body, {}, "?wait=false");
  REQUIRE(a.status == 202);
  return id_of(a);
}

object waited_record(std::uint16_t port, std::uint64_t id) {
  const HttpAnswer a = http(port, "GET", "/v1/jobs/" + std::to_string(id) + "?wait=true");
  REQUIRE(a.status == 200);
  return json_of(a);
}

}  // namespace

TEST_SUITE("sandglassd GET that waits") {
  TEST_CASE("a GET that waits answers each job's record once the job has ended" *
            doctest::timeout(60)) {
    // A reserve large beside the time an exec job takes to end once its deadline cancelled it
    // (SIGTERM, then its exit): that job's answer is its outcome, not the limit's record.
    DaemonProcess d{
        {"--config", fail_and_slow_commands_config(), "--workers", "3", "--reserve-ms", "1000"}};
    const std::uint64_t slept =
        submit_without_waiting(d.port(), R"({"kind":"sleep","args":{"ms":300},"timeout_ms":5000})");
    const std::uint64_t cut = submit_without_waiting(
        d.port(),
        R"({"kind":"exec","args":{"command":"slow"},"priority":"high","timeout_ms":1500})");
    const std::uint64_t failed = submit_without_waiting(
        d.port(),
        R"({"kind":"exec","args":{"command":"fail"},"priority":"sheddable","timeout_ms":20000})");

    const object s = waited_record(d.port(), slept);
    CHECK(s.at("state").as_string() == "completed");
    CHECK(s.at("reason").as_string() == "ok");
    CHECK(s.at("result").as_object().at("slept_ms").as_int64() == 300);

    const object c = waited_record(d.port(), cut);
    CHECK(c.at("state").as_string() == "cancelled");
    CHECK(c.at("reason").as_string() == "cancelled_while_running");
    CHECK(c.at("cause").as_string() == "deadline");

    const object f = waited_record(d.port(), failed);
    CHECK(f.at("state").as_string() == "failed");
    CHECK(f.at("reason").as_string() == "handler_error");
    CHECK(f.at("result").as_object().at("exit_code").as_int64() == 3);

    // A job that ended long ago is answered at once, the same as without wait.
    CHECK(waited_record(d.port(), slept) == s);
  }

  TEST_CASE(
      "a GET that waits for a job past its commit point answers at its deadline plus the "
      "reserve with the record as it stands" *
      doctest::timeout(60)) {
    DaemonProcess d{{"--reserve-ms", "20"}};
    // Committed after 10 ms, it sleeps on past its 300 ms budget: no cancellation stops it.
    // (It says it takes 100 ms, so that admission takes it.)
    const std::uint64_t id = submit_without_waiting(
        d.port(), R"({"kind":"sleep","args":{"ms":4000,"commit_at_ms":10},"timeout_ms":300,"expected_ms":100})");
    const object r = waited_record(d.port(), id);
    CHECK(r.at("state").as_string() == "running");
    // remaining_ms is the job's deadline (arrival + budget - reserve) minus now: the answer came
    // no earlier than the reserve after it.
    CHECK(timing(r, "remaining_ms") <= -20);
    CHECK(timing(r, "budget_ms") == 300);
  }

  TEST_CASE("a reader that stops waiting leaves the job running" * doctest::timeout(60)) {
    DaemonProcess d;
    const std::uint64_t id =
        submit_without_waiting(d.port(), R"({"kind":"sleep","args":{"ms":1500}})");
    {
      Connection reader{d.port()};
      reader.send(request_bytes("GET", "/v1/jobs/" + std::to_string(id) + "?wait=true"));
      // Still waiting while the job sleeps: no answer yet.
      CHECK_FALSE(reader.read_answer(std::chrono::milliseconds{200}).has_value());
    }  // the reader goes away
    const object r = waited_record(d.port(), id);
    CHECK(r.at("state").as_string() == "completed");
    CHECK(r.at("reason").as_string() == "ok");
  }

  TEST_CASE("a GET names an unknown query parameter or a bad wait value in a 400" *
            doctest::timeout(60)) {
    DaemonProcess d;
    const std::uint64_t id = id_of(post_job(d.port(), R"({"kind":"sleep","args":{"ms":1}})"));
    const std::string path = "/v1/jobs/" + std::to_string(id);
    SUBCASE("an unknown parameter") {
      const HttpAnswer a = http(d.port(), "GET", path + "?wiat=true");
      CHECK(a.status == 400);
      CHECK(json_of(a).at("field").as_string() == "wiat");
      CHECK(json_of(a).at("error").as_string() == "is not a known query parameter");
    }
    SUBCASE("an unknown parameter after wait") {
      const HttpAnswer a = http(d.port(), "GET", path + "?wait=true&timeout=5");
      CHECK(a.status == 400);
      CHECK(json_of(a).at("field").as_string() == "timeout");
    }
    SUBCASE("a wait that is neither true nor false") {
      const HttpAnswer a = http(d.port(), "GET", path + "?wait=soon");
      CHECK(a.status == 400);
      CHECK(json_of(a).at("field").as_string() == "wait");
    }
    SUBCASE("an unknown job, waiting") {
      const HttpAnswer a = http(d.port(), "GET", "/v1/jobs/999999?wait=true");
      CHECK(a.status == 404);
      CHECK(json_of(a).at("field").as_string() == "id");
    }
  }
}
