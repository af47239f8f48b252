// The real `sandglass` binary against a real sandglassd on an ephemeral loopback port: every
// command and every exit code, with mixed kinds, classes and budgets.
#include "cli_process.hpp"
#include "daemon_test_support.hpp"
#include "fail_and_slow_commands.hpp"
#include "recording_server.hpp"

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>

#include <filesystem>
#include <string>

using namespace sandglass::testing;
using boost::json::object;

namespace {

// `sandglass --url URL ARGS...` against the daemon on `port`.
CliResult cli(std::uint16_t port, std::vector<std::string> args) {
  args.insert(args.begin(), {"--url", url_of(port)});
  return run_cli(args);
}

object json_out(const CliResult& r) { return boost::json::parse(r.out).as_object(); }

// Submits without waiting and returns the job's id (from --json).
std::uint64_t submit_id(std::uint16_t port, std::vector<std::string> args) {
  args.insert(args.begin(), {"--json", "submit"});
  const CliResult r = cli(port, args);
  REQUIRE(r.exit_code == 0);
  const object o = json_out(r);
  REQUIRE(o.at("state").as_string() == "queued");
  return o.at("id").to_number<std::uint64_t>();
}

}  // namespace

TEST_SUITE("sandglass CLI") {
  TEST_CASE("a completed job exits 0 and shows its record" * doctest::timeout(60)) {
    DaemonProcess d;
    SUBCASE("human-readable") {
      const CliResult r = cli(d.port(), {"submit", "sleep", "--args", R"({"ms":50})", "--budget",
                                         "2s", "--priority", "high", "--wait"});
      CHECK(r.exit_code == 0);
      CHECK(r.out.starts_with("job 1 sleep: completed (ok)\n"));
      CHECK(r.out.find("  result     {\"slept_ms\":50}\n") != std::string::npos);
      CHECK(r.out.find("  timings    budget 2000 ms = intake ") != std::string::npos);
      CHECK(r.err.empty());
    }
    SUBCASE("as the daemon's JSON") {
      const CliResult r =
          cli(d.port(), {"--json", "submit", "sleep", "--args", R"({"ms":50})", "--wait"});
      CHECK(r.exit_code == 0);
      const object o = json_out(r);
      CHECK(o.at("state").as_string() == "completed");
      CHECK(o.at("result").as_object().at("slept_ms").as_int64() == 50);
    }
  }

  TEST_CASE("a failing job exits 1" * doctest::timeout(60)) {
    DaemonProcess d{{"--config", fail_and_slow_commands_config()}};
    const CliResult r = cli(d.port(), {"submit", "exec", "--args", R"({"command":"fail"})",
                                       "--priority", "sheddable", "--budget", "10s", "--wait"});
    CHECK(r.exit_code == 1);
    CHECK(r.out.starts_with("job 1 exec: failed (handler_error)\n"));
  }

  TEST_CASE("a job rejected at admission exits 3, waiting or not" * doctest::timeout(60)) {
    DaemonProcess d{{"--min-budget-ms", "50"}};
    SUBCASE("waiting") {
      const CliResult r =
          cli(d.port(), {"submit", "sleep", "--args", R"({"ms":1})", "--budget", "20ms", "--wait"});
      CHECK(r.exit_code == 3);
      CHECK(r.out.starts_with("job 1 sleep: rejected (budget_too_small)\n"));
    }
    SUBCASE("not waiting") {
      const CliResult r =
          cli(d.port(), {"--json", "submit", "spin", "--args", R"({"ms":1})", "--budget", "20ms"});
      CHECK(r.exit_code == 3);
      CHECK(json_out(r).at("reason").as_string() == "budget_too_small");
    }
  }

  TEST_CASE("a job cut by its deadline exits 4" * doctest::timeout(60)) {
    DaemonProcess d{{"--config", fail_and_slow_commands_config()}};
    const CliResult r = cli(d.port(), {"submit", "exec", "--args", R"({"command":"slow"})",
                                       "--budget", "300ms", "--priority", "critical", "--wait"});
    CHECK(r.exit_code == 4);
    CHECK(r.out.starts_with("job 1 exec: cancelled (cancelled_while_running, cause deadline)\n"));
  }

  TEST_CASE("sandglass cancel ends a job with exit 5, and so do the clients waiting for it" *
            doctest::timeout(60)) {
    DaemonProcess d;
    // A submitter that waits, and a reader that waits, for one long job.
    CliProcess submitter{
        {"--url", url_of(d.port()), "submit", "sleep", "--args", R"({"ms":20000})", "--wait"}};
    REQUIRE(eventually([&] { return state_of(d.port(), 1) == "running"; }));
    CliProcess reader{{"--url", url_of(d.port()), "get", "1", "--wait"}};
    const CliResult cancelled = cli(d.port(), {"cancel", "1"});
    CHECK(cancelled.exit_code == 5);
    CHECK(cancelled.out.starts_with(
        "job 1 sleep: cancelled (cancelled_while_running, cause caller)\n"));
    const CliResult s = submitter.wait();  // the daemon's 409 with the record
    CHECK(s.exit_code == 5);
    CHECK(s.out.starts_with("job 1 sleep: cancelled (cancelled_while_running, cause caller)\n"));
    const CliResult g = reader.wait();
    CHECK(g.exit_code == 5);
    CHECK(g.out == s.out);
  }

  TEST_CASE("a daemon that cannot be reached is exit 6 with a message on stderr" *
            doctest::timeout(60)) {
    const std::string url = "http://127.0.0.1:" + std::to_string(free_port());
    for (const std::vector<std::string>& args : {std::vector<std::string>{"stats"},
                                                 {"get", "1"},
                                                 {"submit", "sleep", "--wait"},
                                                 {"watch", "--count", "1"}}) {
      std::vector<std::string> all{"--url", url};
      all.insert(all.end(), args.begin(), args.end());
      const CliResult r = run_cli(all);
      CAPTURE(args.front());
      CHECK(r.exit_code == 6);
      CHECK(r.err.find("sandglass: cannot reach sandglassd at " + url + ": ") == 0);
    }
  }

  TEST_CASE("bad usage is exit 2 with a message naming what is wrong" * doctest::timeout(60)) {
    DaemonProcess d;
    SUBCASE("no command") { CHECK(run_cli({}).exit_code == 2); }
    SUBCASE("an unknown flag") { CHECK(cli(d.port(), {"stats", "--bogus"}).exit_code == 2); }
    SUBCASE("a get without an id, or with one that is not a number") {
      CHECK(cli(d.port(), {"get"}).exit_code == 2);
      CHECK(cli(d.port(), {"get", "seven"}).exit_code == 2);
    }
    SUBCASE("a duration without a unit") {
      const CliResult r = cli(d.port(), {"submit", "sleep", "--budget", "500"});
      CHECK(r.exit_code == 2);
      CHECK(r.err ==
            "sandglass: --budget: \"500\" is not a duration (a whole number and a unit: "
            "e.g. 500ms, 1s, 2m, 1h)\n");
    }
    SUBCASE("args that are not a JSON object") {
      CHECK(cli(d.port(), {"submit", "sleep", "--args", "{ms:1"})
                .err.starts_with("sandglass: --args: is not valid JSON"));
      CHECK(cli(d.port(), {"submit", "sleep", "--args", "[1]"}).exit_code == 2);
    }
    SUBCASE("a URL that is not http") {
      const CliResult r = run_cli({"--url", "https://127.0.0.1:1", "stats"});
      CHECK(r.exit_code == 2);
      CHECK(r.err.starts_with("sandglass: --url: must start with http://"));
    }
    SUBCASE("the daemon's 400 for an unknown kind, with its message") {
      const CliResult r = cli(d.port(), {"submit", "nosuchkind", "--wait"});
      CHECK(r.exit_code == 2);
      CHECK(r.err.starts_with("sandglass: kind: unknown kind \"nosuchkind\"; known: "));
      CHECK(r.err.ends_with(" (HTTP 400)\n"));
      CHECK(r.out.empty());
    }
    SUBCASE("the daemon's 400 for a bad listing filter, and 404 for an unknown job") {
      const CliResult list = cli(d.port(), {"list", "--state", "done"});
      CHECK(list.exit_code == 2);
      CHECK(list.err.starts_with("sandglass: state: must be one of scheduled, queued, running"));
      const CliResult get = cli(d.port(), {"get", "424242"});
      CHECK(get.exit_code == 2);
      CHECK(get.err == "sandglass: id: no such job (unknown or forgotten) (HTTP 404)\n");
    }
  }

  TEST_CASE("each submit flag becomes its field in the request" * doctest::timeout(60)) {
    RecordingServer server{400, R"({"error":"is not a known field","field":"delay_ms"})"};
    const CliResult r = run_cli({"--url", url_of(server.port()), "submit", "spin", "--args",
                                 R"({"ms":5})", "--budget", "2m", "--priority", "critical", "--key",
                                 "order-7", "--expected-ms", "40", "--delay", "1s", "--retry", "3"},
                                {"SANDGLASS_TOKEN=s3cret"});
    CHECK(r.exit_code == 2);
    CHECK(r.err == "sandglass: delay_ms: is not a known field (HTTP 400)\n");
    CHECK(server.request().starts_with("POST /v1/jobs?wait=false HTTP/1.1\r\n"));
    CHECK(server.request().find("\r\nAuthorization: Bearer s3cret\r\n") != std::string::npos);
    CHECK(boost::json::parse(server.body()) ==
          boost::json::parse(R"({"kind":"spin","args":{"ms":5},"timeout_ms":120000,
            "priority":"critical","idempotency_key":"order-7","expected_ms":40,"delay_ms":1000,
            "retry":{"max_attempts":3}})"));
  }

  TEST_CASE("a flag left out sends no field, and --wait submits waiting" * doctest::timeout(60)) {
    RecordingServer server{200, R"({"id":9,"kind":"sleep","state":"completed","reason":"ok"})"};
    const CliResult r = run_cli({"--url", url_of(server.port()), "submit", "sleep", "--wait"});
    CHECK(r.exit_code == 0);
    CHECK(server.request().starts_with("POST /v1/jobs HTTP/1.1\r\n"));
    CHECK(server.request().find("Authorization") == std::string::npos);
    CHECK(boost::json::parse(server.body()) == boost::json::parse(R"({"kind":"sleep"})"));
  }

  TEST_CASE("get, list, stats and watch show what the daemon says" * doctest::timeout(60)) {
    DaemonProcess d{{"--config", fail_and_slow_commands_config(), "--workers", "2"}};
    const std::uint64_t slept =
        submit_id(d.port(), {"sleep", "--args", R"({"ms":200})", "--budget", "5s"});
    const std::uint64_t failed = submit_id(d.port(), {"exec", "--args", R"({"command":"fail"})"});

    SUBCASE("get --wait waits for the end") {
      const CliResult r = cli(d.port(), {"get", std::to_string(slept), "--wait"});
      CHECK(r.exit_code == 0);
      CHECK(r.out.starts_with("job 1 sleep: completed (ok)\n"));
      const CliResult f = cli(d.port(), {"--json", "get", std::to_string(failed), "--wait"});
      CHECK(f.exit_code == 1);
      CHECK(json_out(f).at("reason").as_string() == "handler_error");
      // Once ended, a get without --wait shows the same.
      CHECK(cli(d.port(), {"get", std::to_string(slept)}).out == r.out);
    }
    SUBCASE("list filters by state and kind, and pages") {
      REQUIRE(cli(d.port(), {"get", std::to_string(slept), "--wait"}).exit_code == 0);
      REQUIRE(cli(d.port(), {"get", std::to_string(failed), "--wait"}).exit_code == 1);
      const CliResult all = cli(d.port(), {"--json", "list", "--limit", "1"});
      CHECK(all.exit_code == 0);
      const object page = json_out(all);
      CHECK(page.at("jobs").as_array().size() == 1);
      CHECK(page.at("next_cursor").as_string() == "2");
      const CliResult exec = cli(d.port(), {"list", "--kind", "exec", "--state", "failed"});
      CHECK(exec.exit_code == 0);
      CHECK(exec.out.starts_with("ID       KIND       STATE      REASON"));
      CHECK(exec.out.find("\n2        exec       failed     handler_error ") != std::string::npos);
      CHECK(exec.out.find("sleep") == std::string::npos);
      const CliResult next = cli(d.port(), {"list", "--limit", "1", "--cursor", "2"});
      CHECK(next.out.find("\n1        sleep      completed  ok ") != std::string::npos);
    }
    SUBCASE("stats") {
      const CliResult r = cli(d.port(), {"stats"});
      CHECK(r.exit_code == 0);
      CHECK(r.out.starts_with("workers 2   queue "));
      CHECK(r.out.find("\nrunning           ") != std::string::npos);
      const CliResult j = cli(d.port(), {"--json", "stats"});
      CHECK(json_out(j).at("capacity").as_object().at("workers").as_int64() == 2);
    }
    SUBCASE("watch refreshes --count times") {
      const CliResult r = cli(d.port(), {"watch", "--count", "3", "--interval", "10ms"});
      CHECK(r.exit_code == 0);
      std::size_t screens = 0;
      for (auto at = r.out.find("sandglassd at " + url_of(d.port())); at != std::string::npos;
           at = r.out.find("sandglassd at ", at + 1)) {
        ++screens;
      }
      CHECK(screens == 3);
      CHECK(r.out.find("workers 2   queue ") != std::string::npos);
      CHECK(r.out.find("\x1b[2J") == std::string::npos);  // not a terminal: no clearing
    }
  }

  TEST_CASE("SANDGLASS_URL names the daemon and SANDGLASS_TOKEN is its bearer token" *
            doctest::timeout(60)) {
    const std::string token_file = write_temp_file("token", "t0ken-for-the-cli-test\n");
    std::filesystem::permissions(
        token_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    DaemonProcess d{{"--auth-token-file", token_file}};
    const std::string url = "SANDGLASS_URL=" + url_of(d.port());
    const CliResult without = run_cli({"stats"}, {url});
    CHECK(without.exit_code == 2);
    CHECK(without.err.starts_with("sandglass: authorization: a bearer token is required"));
    const CliResult with = run_cli({"submit", "sleep", "--args", R"({"ms":1})", "--wait"},
                                   {url, "SANDGLASS_TOKEN=t0ken-for-the-cli-test"});
    CHECK(with.exit_code == 0);
    CHECK(with.out.starts_with("job 1 sleep: completed (ok)\n"));
    // --url wins over SANDGLASS_URL.
    CHECK(run_cli({"--url", "http://127.0.0.1:" + std::to_string(free_port()), "stats"}, {url})
              .exit_code == 6);
    std::filesystem::remove(token_file);
  }
}
