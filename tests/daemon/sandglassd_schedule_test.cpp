// Retries inside the budget and delayed starts against the real sandglassd: "retry" and
// "delay_ms" on a job, the attempts in its record, "scheduled" in the record and the listing,
// the metrics, and the 400s that name the field.
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

using namespace sandglass::testing;
using boost::json::object;

namespace {

// A config with exec commands: `flaky` fails until it has run three times (a counter in a file
// of its own), `fail` always exits 3. Only shell builtins: the commands get no PATH.
std::string flaky_config() {
  const std::string counter = write_temp_file("flaky_counter", "");
  std::filesystem::remove(counter);
  return write_temp_file(
      "flaky.toml",
      "[server]\nmax_delay_ms = 60000\n"
      "[runtime]\ncapacity = 4\n"
      "[commands.flaky]\nargv = [\"/bin/sh\", \"-c\", \"n=0; [ -f " + counter + " ] && read n < " +
          counter + "; n=$((n+1)); echo $n > " + counter + "; [ $n -ge 3 ]\"]\n"
      "[commands.fail]\nargv = [\"/bin/sh\", \"-c\", \"exit 3\"]\n");
}

std::string error_field(const HttpAnswer& a) {
  return std::string{json_of(a).at("field").as_string()};
}

}  // namespace

TEST_SUITE("sandglassd retries and delayed starts") {
  TEST_CASE("a job that fails twice then succeeds answers with three attempts" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--config", flaky_config(), "--workers", "2"}};
    const HttpAnswer a = post_job(
        d.port(),
        R"({"kind":"exec","args":{"command":"flaky"},"priority":"high","timeout_ms":20000,)"
        R"("retry":{"max_attempts":5,"backoff_ms":1}})");
    REQUIRE(a.status == 200);
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "completed");
    CHECK(r.at("reason").as_string() == "ok");
    const auto& attempts = r.at("attempts").as_array();
    REQUIRE(attempts.size() == 3);
    CHECK(attempts[0].as_object().at("reason").as_string() == "handler_error");
    CHECK(attempts[1].as_object().at("reason").as_string() == "handler_error");
    CHECK(attempts[2].as_object().at("reason").as_string() == "ok");
    CHECK_FALSE(r.contains("retry_stopped"));
    CHECK(metric(d.port(), R"(sandglass_retries_total{kind="exec"})") == 2);
    // A job without a retry lists no attempts.
    const object plain = json_of(post_job(d.port(), R"({"kind":"sleep","args":{"ms":1}})"));
    CHECK(plain.at("state").as_string() == "completed");
    CHECK_FALSE(plain.contains("attempts"));
  }

  TEST_CASE("retries stop when the budget left cannot cover another attempt" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--config", flaky_config(), "--workers", "2"}};
    // A backoff of days: whatever its jitter draws, the wait does not fit a 2 s budget.
    const HttpAnswer a = post_job(
        d.port(),
        R"({"kind":"exec","args":{"command":"fail"},"timeout_ms":2000,)"
        R"("retry":{"max_attempts":4,"backoff_ms":1000000000}})");
    REQUIRE(a.status == 504);  // failed for want of time, as the status table says
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "failed");
    CHECK(r.at("reason").as_string() == "retry_skipped_budget");
    CHECK(r.at("retry_stopped").as_string() == "retry_skipped_budget");
    REQUIRE(r.at("attempts").as_array().size() == 1);
    CHECK(metric(d.port(),
                 R"(sandglass_retry_stops_total{kind="exec",reason="retry_skipped_budget"})") == 1);
    // max_attempts reached: the last failure is the answer.
    const object spent = json_of(post_job(
        d.port(), R"({"kind":"exec","args":{"command":"fail"},"priority":"sheddable",)"
                  R"("timeout_ms":20000,"retry":{"max_attempts":2,"backoff_ms":0}})"));
    CHECK(spent.at("reason").as_string() == "handler_error");
    CHECK(spent.at("retry_stopped").as_string() == "attempts_exhausted");
    CHECK(spent.at("attempts").as_array().size() == 2);
  }

  TEST_CASE("a delayed job is scheduled in its record and the listing until its start" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--config", flaky_config(), "--workers", "1"}};
    const HttpAnswer a = post_job(
        d.port(), R"({"kind":"sleep","args":{"ms":1},"timeout_ms":1000,"delay_ms":50000})", {},
        "?wait=false");
    REQUIRE(a.status == 202);
    CHECK(json_of(a).at("state").as_string() == "scheduled");
    const std::uint64_t id = id_of(a);
    CHECK(state_of(d.port(), id) == "scheduled");
    const object listing = json_of(http(d.port(), "GET", "/v1/jobs?state=scheduled"));
    REQUIRE(listing.at("jobs").as_array().size() == 1);
    CHECK(listing.at("jobs").as_array()[0].as_object().at("id").to_number<std::uint64_t>() == id);

    const object cancelled = cancel_job(d.port(), id);
    CHECK(cancelled.at("state").as_string() == "cancelled");
    CHECK(cancelled.at("reason").as_string() == "cancelled_in_queue");
    CHECK(cancelled.at("cause").as_string() == "caller");
  }

  TEST_CASE("delayed jobs are no work ahead until their start: a full queue's worth of them "
            "leaves room" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--config", flaky_config(), "--workers", "1"}};  // capacity 4
    for (int i = 0; i < 12; ++i) {
      const std::string body = R"({"kind":"sleep","args":{"ms":5},"priority":")" +
                               std::string{i % 2 == 0 ? "high" : "normal"} +
                               R"(","timeout_ms":2000,"delay_ms":40000})";
      REQUIRE(post_job(d.port(), body, {}, "?wait=false").status == 202);
    }
    const object r = json_of(post_job(
        d.port(), R"({"kind":"sleep","args":{"ms":5},"priority":"sheddable","timeout_ms":2000})"));
    CHECK(r.at("state").as_string() == "completed");
    // A short delay: it runs after its start, its budget counted from there.
    const object later = json_of(post_job(
        d.port(), R"({"kind":"sleep","args":{"ms":5},"timeout_ms":500,"delay_ms":30})"));
    CHECK(later.at("state").as_string() == "completed");
    CHECK(later.at("attempts").as_array().size() == 1);
    CHECK(timing(later, "intake_ms") < 30);
  }

  TEST_CASE("a bad retry or delay is a 400 naming the field" * doctest::timeout(60)) {
    DaemonProcess d{{"--config", flaky_config()}};
    const auto field_of = [&](const std::string& extra) {
      const HttpAnswer a = post_job(d.port(), R"({"kind":"sleep","args":{"ms":1},)" + extra + "}");
      CHECK(a.status == 400);
      return error_field(a);
    };
    CHECK(field_of(R"("retry":{"max_attempts":0})") == "retry.max_attempts");
    CHECK(field_of(R"("retry":{"max_attempts":101})") == "retry.max_attempts");
    CHECK(field_of(R"("retry":{"max_attempts":"3"})") == "retry.max_attempts");
    CHECK(field_of(R"("retry":{"backoff_ms":5})") == "retry.max_attempts");
    CHECK(field_of(R"("retry":{"max_attempts":2,"backoff_ms":-1})") == "retry.backoff_ms");
    CHECK(field_of(R"("retry":{"max_attempts":2,"jitter":1})") == "retry.jitter");
    CHECK(field_of(R"("retry":3)") == "retry");
    CHECK(field_of(R"("delay_ms":-1)") == "delay_ms");
    CHECK(field_of(R"("delay_ms":60001)") == "delay_ms");  // server.max_delay_ms = 60000
    CHECK(field_of(R"("delay_ms":1.5)") == "delay_ms");
  }
}
