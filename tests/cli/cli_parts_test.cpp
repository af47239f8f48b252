// The command-line client's parts on their own: durations, the daemon's URL, the exit codes,
// the rendering of records.
#include "cli/daemon_url.hpp"
#include "cli/duration_arg.hpp"
#include "cli/exit_codes.hpp"
#include "cli/render.hpp"

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>

using namespace sandglass::cli;
using namespace std::chrono_literals;

TEST_SUITE("sandglass CLI parts") {
  TEST_CASE("durations are a whole number and a unit") {
    CHECK(parse_duration("500ms") == 500ms);
    CHECK(parse_duration("0ms") == 0ms);
    CHECK(parse_duration("1s") == 1000ms);
    CHECK(parse_duration("2m") == 120'000ms);
    CHECK(parse_duration("1h") == 3'600'000ms);
    for (const char* bad :
         {"", "500", "ms", "1.5s", "-1s", "5x", "1 s", "s1", "1sm", "99999999999h"}) {
      CAPTURE(bad);
      CHECK_FALSE(parse_duration(bad).has_value());
    }
  }

  TEST_CASE("a duration's error names its flag and the value") {
    CHECK(duration_error("--budget", "5x") ==
          "--budget: \"5x\" is not a duration (a whole number and a unit: e.g. 500ms, 1s, 2m, 1h)");
  }

  TEST_CASE("the daemon's URL is http with a host and an optional port") {
    const auto plain = std::get<DaemonUrl>(parse_daemon_url("http://127.0.0.1:8080"));
    CHECK(plain.host == "127.0.0.1");
    CHECK(plain.port == "8080");
    const auto slash = std::get<DaemonUrl>(parse_daemon_url("http://localhost/"));
    CHECK(slash.host == "localhost");
    CHECK(slash.port == "80");
    const auto v6 = std::get<DaemonUrl>(parse_daemon_url("http://[::1]:9000"));
    CHECK(v6.host == "::1");
    CHECK(v6.port == "9000");
    for (const char* bad :
         {"127.0.0.1:8080", "https://h:1", "http://", "http://h:", "http://h:0", "http://h:65536",
          "http://h:x", "http://h/v1", "http://u@h", "http://[::1", "http://[::1]x"}) {
      CAPTURE(bad);
      CHECK(std::holds_alternative<std::string>(parse_daemon_url(bad)));
    }
  }

  TEST_CASE("every state, reason and cause maps to its exit code") {
    const auto code = [](const char* record, bool waited = false) {
      return exit_code_of(boost::json::parse(record).as_object(), waited);
    };
    CHECK(code(R"({"state":"completed","reason":"ok"})") == ExitCode::completed);
    CHECK(code(R"({"state":"completed","reason":"completed_after_cancel","cause":"caller"})") ==
          ExitCode::completed);
    for (const char* reason : {"handler_error", "node_lost", "breaker_open"}) {
      CAPTURE(reason);
      CHECK(code((std::string{R"({"state":"failed","reason":")"} + reason + "\"}").c_str()) ==
            ExitCode::failed);
    }
    for (const char* reason : {"deadline_exceeded_before_dispatch", "retry_skipped_budget"}) {
      CAPTURE(reason);
      CHECK(code((std::string{R"({"state":"failed","reason":")"} + reason + "\"}").c_str()) ==
            ExitCode::deadline);
    }
    for (const char* reason :
         {"budget_too_small", "deadline_implausible", "queue_full", "shed", "shutting_down"}) {
      CAPTURE(reason);
      CHECK(code((std::string{R"({"state":"rejected","reason":")"} + reason + "\"}").c_str()) ==
            ExitCode::rejected);
    }
    CHECK(code(R"({"state":"expired","reason":"expired_in_queue"})") == ExitCode::deadline);
    CHECK(code(R"({"state":"expired","reason":"too_late_to_start"})") == ExitCode::deadline);
    CHECK(code(R"({"state":"cancelled","reason":"cancelled_while_running","cause":"deadline"})") ==
          ExitCode::deadline);
    for (const char* cause : {"caller", "upstream", "shutdown"}) {
      CAPTURE(cause);
      CHECK(code((std::string{R"({"state":"cancelled","reason":"cancelled_in_queue","cause":")"} +
                  cause + "\"}")
                     .c_str()) == ExitCode::cancelled);
    }
    // Not ended: shown without waiting it is 0; after a wait that ended, the deadline passed.
    for (const char* state : {"queued", "running", "scheduled", "cancelling"}) {
      CAPTURE(state);
      const std::string record = std::string{R"({"id":1,"state":")"} + state + "\"}";
      CHECK(code(record.c_str()) == ExitCode::completed);
      CHECK(code(record.c_str(), true) == ExitCode::deadline);
    }
    CHECK(code(R"({"state":"exploded"})") == ExitCode::failed);
  }

  TEST_CASE("a record lists each attempt and why retrying stopped") {
    const auto record = boost::json::parse(
        R"({"id":9,"kind":"exec","state":"failed","reason":"retry_skipped_budget","committed":false,
            "attempts":[{"state":"failed","reason":"handler_error","run_ms":3,"committed":false},
                        {"state":"failed","reason":"handler_error","run_ms":2,"committed":false}],
            "retry_stopped":"retry_skipped_budget"})").as_object();
    CHECK(render_record(record) ==
          "job 9 exec: failed (retry_skipped_budget)\n"
          "  attempts   2: failed (handler_error), failed (handler_error)\n"
          "  retries    stopped: retry_skipped_budget\n");
    CHECK(exit_code_of(record, true) == ExitCode::deadline);
  }

  TEST_CASE("a scheduled job renders as scheduled and has not ended") {
    const auto record = boost::json::parse(
        R"({"id":4,"kind":"sleep","state":"scheduled","reason":null,"waiters":0})").as_object();
    CHECK(render_record(record) == "job 4 sleep: scheduled\n");
    CHECK(not_ended(record));
    CHECK(exit_code_of(record, false) == ExitCode::completed);
  }
}
