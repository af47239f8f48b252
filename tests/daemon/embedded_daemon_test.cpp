// An embedder builds its own daemon from the library: the built-in kinds plus one of its own.
#include <sandglass/daemon/daemon.hpp>

#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <boost/json/serialize.hpp>

using namespace sandglass::testing;
using sandglass::daemon::ArgsError;
using sandglass::daemon::Daemon;
using sandglass::daemon::DaemonConfig;
using sandglass::daemon::JobKind;
using sandglass::daemon::KindRegistry;

TEST_SUITE("embedded daemon") {
  TEST_CASE("a kind registered by an embedder is served over HTTP beside the built-in ones" *
            doctest::timeout(60)) {
    DaemonConfig config;
    config.listen_port = 0;
    config.runtime.workers = 2;
    KindRegistry kinds = sandglass::daemon::builtin_kinds(config);
    kinds.add("add", {.prepare = [](const boost::json::object& args) -> sandglass::JobHandler {
                sandglass::daemon::reject_unknown_keys(args, {"a", "b"});
                const auto a = sandglass::daemon::require_int(args, "a", -1000, 1000);
                const auto b = sandglass::daemon::require_int(args, "b", -1000, 1000);
                return [a, b](sandglass::JobContext& ctx) {
                  ctx.checkpoint();
                  ctx.set_result(boost::json::serialize(boost::json::object{{"sum", a + b}}));
                };
              }});
    CHECK_THROWS_AS(kinds.add("add", {.prepare = [](const boost::json::object&) { return sandglass::JobHandler{}; }}),
                    std::invalid_argument);

    Daemon d{config, std::move(kinds)};
    d.start();
    REQUIRE(d.port() != 0);
    CHECK(d.listen_address() == "127.0.0.1:" + std::to_string(d.port()));

    const HttpAnswer a = post_job(d.port(), R"({"kind":"add","args":{"a":2,"b":40}})");
    CHECK(a.status == 200);
    CHECK(json_of(a).at("result").as_object().at("sum").as_int64() == 42);
    const HttpAnswer bad = post_job(d.port(), R"({"kind":"add","args":{"a":2}})");
    CHECK(bad.status == 400);
    CHECK(json_of(bad).at("field").as_string() == "args.b");
    CHECK(post_job(d.port(), R"({"kind":"sleep","args":{"ms":1}})").status == 200);

    d.request_stop();
    CHECK(d.draining());
    const sandglass::daemon::DrainSummary s = d.wait();
    CHECK(s.drained_in_time);
    CHECK(s.stats.submitted == 2);
    CHECK(s.stats.count(sandglass::Reason::ok) == 2);
  }

  TEST_CASE("a daemon destroyed without a drain still gives every job its outcome" *
            doctest::timeout(60)) {
    DaemonConfig config;
    config.listen_port = 0;
    config.runtime.workers = 1;
    std::optional<Daemon> d;
    d.emplace(config, sandglass::daemon::builtin_kinds(config));
    d->start();
    // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
    const HttpAnswer a = post_job(d->port(), R"({"kind":"sleep","expected_ms":1,"args":{"ms":30000}})", {}, "?wait=false");
    REQUIRE(a.status == 202);
    REQUIRE(eventually([&] { return state_of(d->port(), 1) == "running"; }));
    Connection waiting{d->port()};
    waiting.send(request_bytes("POST", "/v1/jobs", R"({"kind":"sleep","args":{"ms":10}})"));
    REQUIRE(eventually([&] { return state_of(d->port(), 2) == "queued"; }));
    sandglass::Runtime& rt = d->runtime();
    CHECK(rt.stats().queued == 1);
    d.reset();  // no drain time: the running job is cancelled, the queued one removed
    const auto answer = waiting.read_answer();  // within 30 s: a bound that only catches a hang
    REQUIRE(answer.has_value());
    CHECK(answer->status == 503);
    CHECK(json_of(*answer).at("cause").as_string() == "shutdown");
  }
}

TEST_SUITE("embedded daemon") {
  TEST_CASE("a kind that throws JobFailed with a reason that is not a failure fails as handler_error naming it" *
            doctest::timeout(60)) {
    DaemonConfig config;
    config.listen_port = 0;
    config.runtime.workers = 2;
    KindRegistry kinds = sandglass::daemon::builtin_kinds(config);
    kinds.add("give_up", {.prepare = [](const boost::json::object& args) -> sandglass::JobHandler {
                sandglass::daemon::reject_unknown_keys(args, {"reason"});
                const std::string name{args.at("reason").as_string()};
                sandglass::Reason reason = sandglass::Reason::ok;
                for (auto r : {sandglass::Reason::ok, sandglass::Reason::queue_full,
                               sandglass::Reason::shed, sandglass::Reason::breaker_open}) {
                  if (sandglass::to_string(r) == name) reason = r;
                }
                return [reason](sandglass::JobContext&) { throw sandglass::JobFailed{reason, "gave up"}; };
              }});
    Daemon d{config, std::move(kinds)};
    d.start();

    for (const char* reason : {"ok", "queue_full", "shed"}) {
      CAPTURE(reason);
      const HttpAnswer a =
          post_job(d.port(), std::string{R"({"kind":"give_up","args":{"reason":")"} + reason + "\"}}");
      CHECK(a.status == 500);
      const auto r = json_of(a);
      CHECK(r.at("state").as_string() == "failed");
      CHECK(r.at("reason").as_string() == "handler_error");
      const std::string error{r.at("error").as_string()};
      CHECK(error.find(std::string{"reason "} + reason + ",") != std::string::npos);
      CHECK(error.find("gave up") != std::string::npos);
    }
    // A failure reason is kept.
    const auto kept = json_of(post_job(d.port(), R"({"kind":"give_up","args":{"reason":"breaker_open"}})"));
    CHECK(kept.at("state").as_string() == "failed");
    CHECK(kept.at("reason").as_string() == "breaker_open");
    CHECK(kept.at("error").as_string() == "gave up");

    d.request_stop();
    const sandglass::daemon::DrainSummary s = d.wait();
    CHECK(s.stats.count(sandglass::Reason::handler_error) == 3);
    CHECK(s.stats.count(sandglass::Reason::ok) == 0);
  }
}
