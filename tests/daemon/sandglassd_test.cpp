// Integration tests: the real sandglassd binary on an ephemeral port, spoken to over HTTP.
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>
#include <string>
#include <thread>

using namespace sandglass::testing;
using boost::json::object;

TEST_SUITE("sandglassd budgets") {
  TEST_CASE("a job without a budget gets the default budget" * doctest::timeout(60)) {
    DaemonProcess d{{"--default-budget-ms", "1234"}};
    const HttpAnswer a = post_job(d.port(), R"({"kind":"sleep","args":{"ms":0}})");
    CHECK(a.status == 200);
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "completed");
    CHECK(r.at("reason").as_string() == "ok");
    CHECK(timing(r, "budget_ms") == 1234);
  }

  TEST_CASE("an excessive budget is clamped to the maximum" * doctest::timeout(60)) {
    DaemonProcess d{{"--default-budget-ms", "1000", "--max-budget-ms", "5000"}};
    const HttpAnswer a = post_job(d.port(), R"({"kind":"sleep","args":{"ms":0}})",
                                  {{"x-request-timeout-ms", "99999999999"}});
    CHECK(a.status == 200);
    CHECK(timing(json_of(a), "budget_ms") == 5000);
  }

  TEST_CASE("the smallest of the two headers and timeout_ms wins" * doctest::timeout(60)) {
    DaemonProcess d;
    SUBCASE("timeout_ms is smallest") {
      const HttpAnswer a = post_job(d.port(), R"({"kind":"sleep","args":{"ms":0},"timeout_ms":700})",
                                    {{"x-request-timeout-ms", "900"}, {"grpc-timeout", "800m"}});
      CHECK(timing(json_of(a), "budget_ms") == 700);
    }
    SUBCASE("grpc-timeout is smallest") {
      const HttpAnswer a = post_job(d.port(), R"({"kind":"sleep","args":{"ms":0},"timeout_ms":700})",
                                    {{"x-request-timeout-ms", "900"}, {"grpc-timeout", "250m"}});
      CHECK(timing(json_of(a), "budget_ms") == 250);
    }
    SUBCASE("grpc-timeout in seconds") {
      const HttpAnswer a = post_job(d.port(), R"({"kind":"sleep","args":{"ms":0}})",
                                    {{"grpc-timeout", "2S"}});
      CHECK(timing(json_of(a), "budget_ms") == 2000);
    }
  }

  TEST_CASE("malformed budgets are answered 400 naming the header or field" * doctest::timeout(60)) {
    DaemonProcess d;
    const std::string body = R"({"kind":"sleep","args":{"ms":0}})";
    struct Case {
      std::vector<std::pair<std::string, std::string>> headers;
      std::string body;
      std::string field;
    };
    const Case cases[] = {
        {{{"grpc-timeout", "123456789m"}}, body, "grpc-timeout"},  // 9 digits
        {{{"grpc-timeout", "2x"}}, body, "grpc-timeout"},
        {{{"grpc-timeout", ""}}, body, "grpc-timeout"},
        {{{"x-request-timeout-ms", "-5"}}, body, "x-request-timeout-ms"},
        {{{"x-request-timeout-ms", "12ms"}}, body, "x-request-timeout-ms"},
        {{}, R"({"kind":"sleep","args":{"ms":0},"timeout_ms":-1})", "timeout_ms"},
        {{}, R"({"kind":"sleep","args":{"ms":0},"timeout_ms":"100"})", "timeout_ms"},
        {{}, R"({"kind":"sleep","args":{"ms":0},"timeout_ms":1.5})", "timeout_ms"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.field);
      CAPTURE(c.body);
      const HttpAnswer a = post_job(d.port(), c.body, c.headers);
      CHECK(a.status == 400);
      CHECK(json_of(a).at("field").as_string() == c.field);
    }
  }

  TEST_CASE("a budget below the minimum useful one is answered 504 budget_too_small" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--min-budget-ms", "10"}};
    const HttpAnswer a = post_job(d.port(), R"({"kind":"sleep","args":{"ms":0}})",
                                  {{"x-request-timeout-ms", "5"}});
    CHECK(a.status == 504);
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "rejected");
    CHECK(r.at("reason").as_string() == "budget_too_small");
  }
}

TEST_SUITE("sandglassd jobs") {
  TEST_CASE("a job whose budget expires while queued is answered 504 expired_in_queue and never runs" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--workers", "1"}};
    // The blocker outlasts the test, so the spin job waits behind it however slow the machine.
    // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
    const HttpAnswer blocker = post_job(d.port(), R"({"kind":"sleep","expected_ms":1,"args":{"ms":60000}})", {}, "?wait=false");
    REQUIRE(blocker.status == 202);
    const auto blocker_id = json_of(blocker).at("id").to_number<std::uint64_t>();
    REQUIRE(eventually([&] { return state_of(d.port(), blocker_id) == "running"; }));
    // Of no size (0 ms, no hint): nothing to drop it for before its deadline.
    const HttpAnswer a = post_job(d.port(), R"({"kind":"spin","args":{"ms":0},"timeout_ms":200})");
    CHECK(a.status == 504);
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "expired");
    CHECK(r.at("reason").as_string() == "expired_in_queue");
    CHECK(timing(r, "run_ms") == 0);
    CHECK(r.if_contains("result") == nullptr);
    CHECK(metric(d.port(), R"(sandglass_run_time_seconds_count{kind="spin"})") <= 0);
  }

  TEST_CASE("a job that runs out of budget while running is answered 504 cancelled by deadline" *
            doctest::timeout(60)) {
    DaemonProcess d;
    // A budget long enough that a loaded machine still starts the job before it runs out.
    // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
    const HttpAnswer a = post_job(d.port(), R"({"kind":"spin","expected_ms":1,"args":{"ms":60000},"timeout_ms":500})");
    CHECK(a.status == 504);
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "cancelled");
    CHECK(r.at("reason").as_string() == "cancelled_while_running");
    CHECK(r.at("cause").as_string() == "deadline");
  }

  TEST_CASE("a client that disconnects while waiting cancels its running job with cause caller" *
            doctest::timeout(60)) {
    DaemonProcess d;
    {
      Connection c{d.port()};
      // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
      c.send(request_bytes("POST", "/v1/jobs", R"({"kind":"spin","expected_ms":1,"args":{"ms":20000}})"));
      // The first job of a fresh daemon has id 1.
      REQUIRE(eventually([&] { return state_of(d.port(), 1) == "running"; }));
    }  // the client goes away
    REQUIRE(eventually([&] { return state_of(d.port(), 1) == "cancelled"; }));
    const object r = json_of(http(d.port(), "GET", "/v1/jobs/1"));
    CHECK(r.at("reason").as_string() == "cancelled_while_running");
    CHECK(r.at("cause").as_string() == "caller");
    CHECK(metric(d.port(), R"(sandglass_cancellations_total{cause="caller",kind="spin"})") == 1);
  }

  TEST_CASE("a client that disconnects while its job is queued removes it from the queue" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--workers", "1"}};
    const HttpAnswer blocker = post_job(d.port(), R"({"kind":"sleep","args":{"ms":20000}})", {}, "?wait=false");
    REQUIRE(eventually([&] { return state_of(d.port(), 1) == "running"; }));
    {
      Connection c{d.port()};
      c.send(request_bytes("POST", "/v1/jobs", R"({"kind":"sleep","args":{"ms":10}})"));
      REQUIRE(eventually([&] { return state_of(d.port(), 2) == "queued"; }));
    }
    REQUIRE(eventually([&] { return state_of(d.port(), 2) == "cancelled"; }));
    const object r = json_of(http(d.port(), "GET", "/v1/jobs/2"));
    CHECK(r.at("reason").as_string() == "cancelled_in_queue");
    CHECK(r.at("cause").as_string() == "caller");
    CHECK(timing(r, "run_ms") == 0);
    CHECK(cancel_job(d.port(), 1).at("cause").as_string() == "caller");
  }

  TEST_CASE("an async submit answers 202 and the job can be polled and cancelled" *
            doctest::timeout(60)) {
    DaemonProcess d;
    const HttpAnswer a = post_job(d.port(), R"({"kind":"sleep","args":{"ms":20000}})", {}, "?wait=false");
    REQUIRE(a.status == 202);
    const object accepted = json_of(a);
    const auto id = accepted.at("id").to_number<std::uint64_t>();
    CHECK(accepted.at("state").as_string() == "queued");
    CHECK(a.header("location") == "/v1/jobs/" + std::to_string(id));
    REQUIRE(eventually([&] { return state_of(d.port(), id) == "running"; }));
    const object running = json_of(http(d.port(), "GET", a.header("location")));
    CHECK(running.at("kind").as_string() == "sleep");
    CHECK(running.at("reason").is_null());
    const object r = cancel_job(d.port(), id);
    CHECK(r.at("state").as_string() == "cancelled");
    CHECK(r.at("cause").as_string() == "caller");
    CHECK(r.at("reason").as_string() == "cancelled_while_running");
  }

  // The DELETE never answers 200 with "state":"running", and the submitter, still connected,
  // never gets 499 (the code for a client that went away). A queued job ends inside
  // the DELETE, so its answer is always the 200 with the final record; a running one ends at its
  // next checkpoint, which on a loaded machine may come after the DELETE's short wait (202).
  TEST_CASE("a DELETE answers the final record, and the waiting submitter gets 409, not 499" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--workers", "1"}};
    Connection running{d.port()};
    running.send(request_bytes("POST", "/v1/jobs", R"({"kind":"sleep","args":{"ms":20000}})"));
    REQUIRE(eventually([&] { return state_of(d.port(), 1) == "running"; }));
    Connection queued{d.port()};
    queued.send(request_bytes("POST", "/v1/jobs", R"({"kind":"sleep","args":{"ms":10}})"));
    REQUIRE(eventually([&] { return state_of(d.port(), 2) == "queued"; }));

    const HttpAnswer del = http(d.port(), "DELETE", "/v1/jobs/2");
    CHECK(del.status == 200);
    CHECK(json_of(del).at("state").as_string() == "cancelled");
    CHECK(json_of(del).at("reason").as_string() == "cancelled_in_queue");
    CHECK(json_of(del).at("cause").as_string() == "caller");
    const object record = cancel_job(d.port(), 1);
    CHECK(record.at("state").as_string() == "cancelled");
    CHECK(record.at("reason").as_string() == "cancelled_while_running");
    CHECK(record.at("cause").as_string() == "caller");
    for (Connection* c : {&queued, &running}) {
      const auto a = c->read_answer();
      REQUIRE(a.has_value());
      CHECK(a->status == 409);
      CHECK(json_of(*a).at("state").as_string() == "cancelled");
      CHECK(json_of(*a).at("cause").as_string() == "caller");
    }
  }

  TEST_CASE("a DELETE of a job that does not end within 100 ms answers 202 cancelling" *
            doctest::timeout(60)) {
    // The command ignores SIGTERM: it ends only when the kill grace (2 s) ends in SIGKILL. It
    // touches `ready` once its trap is set, so the DELETE does not race the trap.
    const std::string ready = write_temp_file("stubborn.ready", "") + ".set";
    const std::string config = write_temp_file(
        "stubborn.toml",
        "[commands.stubborn]\nargv = [\"/bin/sh\", \"-c\", \"trap '' TERM; touch " + ready +
            "; while true; do sleep 0.05; done\"]\nenv = { PATH = \"/usr/bin:/bin\" }\n"
            "kill_grace_ms = 2000\n");
    DaemonProcess d{{"--config", config}};
    const HttpAnswer sub = http(d.port(), "POST", "/v1/jobs?wait=false",
                                R"({"kind":"exec","args":{"command":"stubborn"}})");
    REQUIRE(sub.status == 202);
    const auto id = json_of(sub).at("id").to_number<std::uint64_t>();
    const std::string path = "/v1/jobs/" + std::to_string(id);
    REQUIRE(eventually([&] { return std::filesystem::exists(ready); }));
    const HttpAnswer del = http(d.port(), "DELETE", path);
    CHECK(del.status == 202);
    CHECK(json_of(del).at("state").as_string() == "cancelling");
    CHECK(json_of(del).at("id").to_number<std::uint64_t>() == id);
    REQUIRE(eventually([&] { return state_of(d.port(), id) == "cancelled"; }));
    CHECK(json_of(http(d.port(), "GET", path)).at("cause").as_string() == "caller");
  }

  TEST_CASE("terminal records are forgotten after their retention and then answered 404" *
            doctest::timeout(60)) {
    // Kept for seconds, so that the first GET finds it however slow the machine; then gone.
    const std::string config = write_temp_file("records.toml", "[records]\nkeep_ms = 3000\n");
    DaemonProcess d{{"--config", config}};
    const HttpAnswer a = post_job(d.port(), R"({"kind":"sleep","args":{"ms":0}})");
    const auto id = json_of(a).at("id").to_number<std::uint64_t>();
    CHECK(http(d.port(), "GET", "/v1/jobs/" + std::to_string(id)).status == 200);
    CHECK(eventually([&] { return http(d.port(), "GET", "/v1/jobs/" + std::to_string(id)).status == 404; }));
    CHECK(http(d.port(), "GET", "/v1/jobs/999999").status == 404);
  }
}

TEST_SUITE("sandglassd status codes") {
  TEST_CASE("a full queue answers 503 queue_full with Retry-After" * doctest::timeout(60)) {
    DaemonProcess d{{"--workers", "1", "--capacity", "1"}};
    post_job(d.port(), R"({"kind":"sleep","args":{"ms":20000}})", {}, "?wait=false");
    REQUIRE(eventually([&] { return state_of(d.port(), 1) == "running"; }));
    CHECK(post_job(d.port(), R"({"kind":"sleep","args":{"ms":10}})", {}, "?wait=false").status == 202);
    const HttpAnswer a = post_job(d.port(), R"({"kind":"sleep","args":{"ms":10}})");
    CHECK(a.status == 503);
    CHECK(a.header("retry-after") == "1");
    CHECK(json_of(a).at("reason").as_string() == "queue_full");
    CHECK(metric(d.port(), R"(sandglass_rejections_total{kind="sleep",reason="queue_full"})") == 1);
  }

  TEST_CASE("a job pushed out by a higher class is answered 503 shed" * doctest::timeout(60)) {
    DaemonProcess d{{"--workers", "1", "--capacity", "1"}};
    post_job(d.port(), R"({"kind":"sleep","args":{"ms":20000}})", {}, "?wait=false");
    REQUIRE(eventually([&] { return state_of(d.port(), 1) == "running"; }));
    Connection waiting{d.port()};
    waiting.send(request_bytes("POST", "/v1/jobs", R"({"kind":"sleep","args":{"ms":10},"priority":"sheddable"})"));
    REQUIRE(eventually([&] { return state_of(d.port(), 2) == "queued"; }));
    CHECK(post_job(d.port(), R"({"kind":"sleep","args":{"ms":10},"priority":"critical"})", {}, "?wait=false").status == 202);
    const auto a = waiting.read_answer();
    REQUIRE(a.has_value());
    CHECK(a->status == 503);
    CHECK(a->header("retry-after") == "1");
    CHECK(json_of(*a).at("reason").as_string() == "shed");
  }

  TEST_CASE("unknown kind unknown path and wrong method get 400 404 and 405" * doctest::timeout(60)) {
    DaemonProcess d;
    const HttpAnswer kind = post_job(d.port(), R"({"kind":"teleport"})");
    CHECK(kind.status == 400);
    CHECK(json_of(kind).at("field").as_string() == "kind");
    CHECK(http(d.port(), "GET", "/v2/nothing").status == 404);
    CHECK(http(d.port(), "GET", "/v1/jobs/abc").status == 404);
    const HttpAnswer method = http(d.port(), "PUT", "/v1/jobs", "{}");
    CHECK(method.status == 405);
    CHECK(method.header("allow") == "GET, POST");
    CHECK(http(d.port(), "POST", "/metrics", "{}").status == 405);
    CHECK(http(d.port(), "PUT", "/v1/jobs/1", "{}").status == 405);
  }

  TEST_CASE("invalid job requests are answered 400 naming the field" * doctest::timeout(60)) {
    DaemonProcess d;
    struct Case {
      std::string body;
      std::string field;
    };
    const Case cases[] = {
        {R"({"kind":"sleep","args":{"ms":0})", "body"},            // malformed JSON
        {R"([1,2,3])", "body"},                                    // not an object
        {"", "body"},
        {R"({"args":{"ms":0}})", "kind"},                          // missing kind
        {R"({"kind":7})", "kind"},                                 // wrong type
        {R"({"kind":"sleep","args":[1]})", "args"},
        {R"({"kind":"sleep","args":{}})", "args.ms"},
        {R"({"kind":"sleep","args":{"ms":"ten"}})", "args.ms"},
        {R"({"kind":"sleep","args":{"ms":-1}})", "args.ms"},
        {R"({"kind":"sleep","args":{"ms":1e30}})", "args.ms"},
        {R"({"kind":"sleep","args":{"ms":1,"speed":2}})", "args.speed"},
        {R"({"kind":"sleep","args":{"ms":0},"colour":"red"})", "colour"},  // extra field
        {R"({"kind":"sleep","args":{"ms":0},"priority":"urgent"})", "priority"},
        {R"({"kind":"sleep","args":{"ms":0},"idempotency_key":""})", "idempotency_key"},
        {"{\"kind\":\"sl\xff\xfe" "ep\"}", "body"},               // not UTF-8
        {std::string(40, '[') + std::string(40, ']'), "body"},     // nested too deep
    };
    for (const Case& c : cases) {
      CAPTURE(c.body);
      const HttpAnswer a = post_job(d.port(), c.body);
      CHECK(a.status == 400);
      CHECK(json_of(a).at("field").as_string() == c.field);
      CHECK(!json_of(a).at("error").as_string().empty());
    }
    CHECK(http(d.port(), "GET", "/healthz").status == 200);  // still serving
  }

  TEST_CASE("a failing command is answered 500 with its exit status in the result" * doctest::timeout(60)) {
    const std::string config = write_temp_file("fail.toml",
        "[commands.fail]\nargv = [\"/bin/sh\", \"-c\", \"echo oops >&2; exit 3\"]\n");
    DaemonProcess d{{"--config", config}};
    const HttpAnswer a = post_job(d.port(), R"({"kind":"exec","args":{"command":"fail"}})");
    CHECK(a.status == 500);
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "failed");
    CHECK(r.at("reason").as_string() == "handler_error");
    CHECK(r.at("result").as_object().at("exit_code").as_int64() == 3);
    CHECK(r.at("result").as_object().at("stderr").as_string() == "oops\n");
  }

  TEST_CASE("healthz and readyz answer 200 while serving" * doctest::timeout(60)) {
    DaemonProcess d;
    CHECK(http(d.port(), "GET", "/healthz").status == 200);
    CHECK(http(d.port(), "GET", "/readyz").status == 200);
  }
}
