// Integration tests of sandglassd's life: command line, config errors, drain on SIGTERM, exec
// commands that resist, the metrics it exposes.
#include "daemon_test_support.hpp"
#include "test_paths.hpp"

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

using namespace sandglass::testing;
using boost::json::object;

namespace {

bool process_alive(pid_t pid) {
  // A zombie (state Z) is not running any more.
  std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  const auto close_paren = line.rfind(')');
  return close_paren != std::string::npos && line.size() > close_paren + 2 && line[close_paren + 2] != 'Z';
}

// A daemon with one worker, job 1 (`running_job`) running and job 2 (a short sleep) queued
// behind it, each with its client waiting on its own connection.
struct OneRunningOneQueued {
  OneRunningOneQueued(std::vector<std::string> args, const std::string& running_job)
      : daemon{with_one_worker(std::move(args))}, running{daemon.port()}, queued{daemon.port()} {
    running.send(request_bytes("POST", "/v1/jobs", running_job));
    REQUIRE(eventually([&] { return state_of(daemon.port(), 1) == "running"; }));
    queued.send(request_bytes("POST", "/v1/jobs", R"({"kind":"sleep","args":{"ms":10}})"));
    REQUIRE(eventually([&] { return state_of(daemon.port(), 2) == "queued"; }));
  }

  static std::vector<std::string> with_one_worker(std::vector<std::string> args) {
    args.insert(args.begin(), {"--workers", "1"});
    return args;
  }

  DaemonProcess daemon;
  Connection running;
  Connection queued;
};

// The drain summary line, "stopped: submitted=5 completed=3 failed=0 ...".
std::string stopped_line(const std::string& log) {
  const auto at = log.rfind("stopped: ");
  if (at == std::string::npos) return {};
  return log.substr(at, log.find('\n', at) - at);
}

// The drain ended both jobs of `busy`: each client has its shutdown answer, and the daemon exits
// 0 with a summary that says so.
void check_both_cancelled_by_shutdown(OneRunningOneQueued& busy) {
  const auto a = busy.running.read_answer();
  const auto b = busy.queued.read_answer();
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK(a->status == 503);
  CHECK(json_of(*a).at("reason").as_string() == "cancelled_while_running");
  CHECK(json_of(*a).at("cause").as_string() == "shutdown");
  CHECK(b->status == 503);
  CHECK(json_of(*b).at("reason").as_string() == "cancelled_in_queue");
  CHECK(json_of(*b).at("cause").as_string() == "shutdown");
  CHECK(busy.daemon.wait_exit(std::chrono::seconds{20}) == 0);
  CHECK(stopped_line(busy.daemon.log()) ==
        "stopped: submitted=2 completed=0 failed=0 rejected=0 expired=0 cancelled=2 "
        "drained_in_time=false");
}

}  // namespace

TEST_SUITE("sandglassd command line") {
  TEST_CASE("help and version print and exit 0" * doctest::timeout(60)) {
    const RunResult help = run_sandglassd({"--help"});
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("--drain-timeout-ms") != std::string::npos);
    const RunResult version = run_sandglassd({"--version"});
    CHECK(version.exit_code == 0);
    CHECK(version.out.find("sandglassd") != std::string::npos);
  }

  TEST_CASE("check-config accepts the shipped default config" * doctest::timeout(60)) {
    const RunResult r = run_sandglassd(
        {"--config", sandglass::testing::source_path("daemon/config/sandglassd.toml"), "--check-config"});
    CHECK(r.exit_code == 0);
  }

  TEST_CASE("an invalid config exits 2 with a message naming the key" * doctest::timeout(60)) {
    const std::string config = write_temp_file("bad.toml", "[server]\nmax_body_bytes = \"lots\"\n");
    const RunResult r = run_sandglassd({"--config", config, "--check-config"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("server.max_body_bytes") != std::string::npos);
    const RunResult flag = run_sandglassd({"--workers", "zero"});
    CHECK(flag.exit_code == 2);
    CHECK(flag.err.find("--workers") != std::string::npos);
  }
}

TEST_SUITE("sandglassd drain") {
  TEST_CASE("SIGTERM drains queued and running jobs and every waiting client gets its answer" *
            doctest::timeout(60)) {
    OneRunningOneQueued busy{{"--drain-timeout-ms", "10000"}, R"({"kind":"sleep","args":{"ms":400}})"};
    DaemonProcess& d = busy.daemon;

    d.signal(SIGTERM);
    // While draining: not ready, and new work is refused.
    REQUIRE(eventually([&] { return http(d.port(), "GET", "/readyz").status == 503; }));
    const HttpAnswer refused = post_job(d.port(), R"({"kind":"sleep","args":{"ms":0}})");
    CHECK(refused.status == 503);
    CHECK(refused.header("retry-after") == "1");
    CHECK(json_of(refused).at("reason").as_string() == "shutting_down");

    const auto a = busy.running.read_answer();
    const auto b = busy.queued.read_answer();
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    CHECK(a->status == 200);
    CHECK(b->status == 200);
    CHECK(d.wait_exit(std::chrono::seconds{20}) == 0);
    CHECK(stopped_line(d.log()) ==
          "stopped: submitted=3 completed=2 failed=0 rejected=1 expired=0 cancelled=0 "
          "drained_in_time=true");
  }

  TEST_CASE("jobs still running at the drain timeout are cancelled with cause shutdown" *
            doctest::timeout(60)) {
    // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
    OneRunningOneQueued busy{{"--drain-timeout-ms", "200"}, R"({"kind":"spin","expected_ms":1,"args":{"ms":30000}})"};
    DaemonProcess& d = busy.daemon;

    d.signal(SIGTERM);
    check_both_cancelled_by_shutdown(busy);
  }

  TEST_CASE("a second SIGTERM or SIGINT ends the drain at once and every job still gets its shutdown answer" *
            doctest::timeout(60)) {
    for (const int second : {SIGTERM, SIGINT}) {
      CAPTURE(second);
      OneRunningOneQueued busy{{"--drain-timeout-ms", "600000"}, R"({"kind":"sleep","args":{"ms":20000}})"};
      DaemonProcess& d = busy.daemon;

      d.signal(SIGINT);
      // The first signal was taken (the drain began) before the second is sent: two pending
      // signals of one number would be one.
      REQUIRE(eventually([&] { return http(d.port(), "GET", "/readyz").status == 503; }));
      d.signal(second);
      check_both_cancelled_by_shutdown(busy);
      CHECK(d.log().find("ending the drain now") != std::string::npos);
    }
  }
}

TEST_SUITE("sandglassd exec") {
  TEST_CASE("an exec command that ignores SIGTERM is killed after the grace period and leaves no process" *
            doctest::timeout(60)) {
    const std::string pid_file = write_temp_file("pids.txt", "");
    const std::string config = write_temp_file("stubborn.toml",
        "[commands.stubborn]\n"
        "argv = [\"/bin/sh\", \"-c\", \"trap '' TERM; sleep 30 & echo $$ $! > " + pid_file +
        "; while :; do sleep 0.05; done\"]\n"
        "env = { PATH = \"/usr/bin:/bin\" }\n"
        "kill_grace_ms = 2000\n");
    DaemonProcess d{{"--config", config}};
    Connection c{d.port()};
    c.send(request_bytes("POST", "/v1/jobs", R"({"kind":"exec","args":{"command":"stubborn"},"timeout_ms":30000})"));
    pid_t shell = 0;
    pid_t grandchild = 0;
    REQUIRE(eventually([&] {
      std::ifstream in{pid_file};
      return static_cast<bool>(in >> shell >> grandchild);
    }));
    CHECK(process_alive(shell));
    CHECK(process_alive(grandchild));
    // The kill grace (2 s) is far longer than the DELETE's wait (100 ms), so the DELETE is
    // answered 202, cancelling, and the waiter 409 when SIGKILL has ended the command.
    const HttpAnswer del = http(d.port(), "DELETE", "/v1/jobs/1");
    CHECK(del.status == 202);
    CHECK(json_of(del).at("state").as_string() == "cancelling");
    const auto a = c.read_answer();
    REQUIRE(a.has_value());
    CHECK(a->status == 409);
    const object r = json_of(*a);
    CHECK(r.at("cause").as_string() == "caller");
    CHECK(r.at("result").as_object().at("signal").as_int64() == SIGKILL);
    CHECK(timing(r, "run_ms") >= 2000);  // SIGKILL came no earlier than the grace allows
    CHECK(eventually([&] { return !process_alive(shell) && !process_alive(grandchild); }));
    std::filesystem::remove(pid_file);
  }

  TEST_CASE("an exec command gets the request's stdin and answers its output" * doctest::timeout(60)) {
    const std::string config = write_temp_file("cat.toml", "[commands.cat]\nargv = [\"/bin/cat\"]\n");
    DaemonProcess d{{"--config", config}};
    const HttpAnswer a = post_job(d.port(), R"({"kind":"exec","args":{"command":"cat","stdin":"hello"}})");
    CHECK(a.status == 200);
    const object r = json_of(a);
    CHECK(r.at("result").as_object().at("stdout").as_string() == "hello");
    CHECK(r.at("result").as_object().at("exit_code").as_int64() == 0);
    const HttpAnswer unknown = post_job(d.port(), R"({"kind":"exec","args":{"command":"rm"}})");
    CHECK(unknown.status == 400);
    CHECK(json_of(unknown).at("field").as_string() == "args.command");
  }
}

TEST_SUITE("sandglassd metrics") {
  TEST_CASE("metrics count jobs by outcome and pass promtool check metrics" * doctest::timeout(60)) {
    DaemonProcess d;
    CHECK(post_job(d.port(), R"({"kind":"sleep","args":{"ms":1}})").status == 200);
    CHECK(post_job(d.port(), R"({"kind":"sleep","args":{"ms":1}})", {{"x-request-timeout-ms", "0"}}).status == 504);
    const HttpAnswer m = http(d.port(), "GET", "/metrics");
    CHECK(m.status == 200);
    CHECK(m.header("content-type").find("text/plain") == 0);
    CHECK(metric(d.port(), R"(sandglass_jobs_total{kind="sleep",priority="normal",reason="ok",state="completed"})") == 1);
    CHECK(metric(d.port(), R"(sandglass_rejections_total{kind="sleep",reason="budget_too_small"})") == 1);
    CHECK(metric(d.port(), "sandglass_workers") > 0);
    if (!std::filesystem::exists("/usr/bin/promtool")) {
      MESSAGE("promtool is not installed: skipping promtool check metrics");
      return;
    }
    const std::string path = write_temp_file("metrics.txt", m.body);
    const std::string command = "/usr/bin/promtool check metrics < " + path + " > /dev/null 2>&1";
    CHECK(std::system(command.c_str()) == 0);
    std::filesystem::remove(path);
  }
}
