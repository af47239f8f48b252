// The reference test plan (shared/reference/deadline-budgets.de.txt, "Den Ablauf an jeder
// Grenze testen": "Mindestens folgende Fälle gehören in den Testplan"), case by case. Each line
// below names a test case that exists, by its binary and its whole name; the test
// test_plan.every_case_names_a_test_that_exists (tests/CMakeLists.txt) fails when one is gone
// or renamed. The in-process cases live in tests/runtime/test_plan_test.cpp; the cases that
// cross a process boundary, and the daemon's side of the others, in tests/daemon/.
//
//  1. No caller deadline: the server applies its default maximum.
//     plan: sandglass_tests: 1: a job without a caller budget gets the default budget
//     plan: sandglassd_tests: a job without a budget gets the default budget
//  2. An excessive caller deadline: the server clamps it.
//     plan: sandglass_tests: 2: an excessive caller budget is clamped to the maximum
//     plan: sandglassd_tests: an excessive budget is clamped to the maximum
//  3. The budget runs out while queued locally: no downstream call starts.
//     plan: sandglass_tests: 3: a budget that runs out while queued never starts and its submitter learns at once
//     plan: sandglassd_tests: 3: a forward job whose budget runs out while queued never calls its upstream
//  4. The budget runs out during an RPC: the client aborts and the server sees the cancellation.
//     plan: sandglassd_tests: when the budget runs out during the downstream call the caller gives up and the downstream job is cancelled
//  5. The budget runs out during a database query: the statement is cancelled and the
//     connection stays reusable.
//     plan: sandglassd_tests: a statement that outlives its budget is answered 504 in time and stops on the server and its connection is reused
//     plan: sandglassd_tests: a write cancelled during its statement is rolled back and its connection is reused
//  6. The caller disconnects early: child work stops before the configured deadline.
//     plan: sandglass_tests: 6: when the caller cancels early the running job and its child work stop
//     plan: sandglassd_tests: a caller that disconnects at the top of a chain stops the work of every hop
//  7. The first attempt fails: a retry starts only if enough budget remains.
//     plan: sandglassd_tests: a retry starts only when the rest of the budget covers its wait and an attempt
//     plan: sandglassd_tests: an upstream that never answers costs each attempt its cap and is retried inside the budget
//  8. The operation commits as the cancellation arrives: reconciliation returns the durable result.
//     plan: sandglassd_tests: a job cancelled after its commit point completes after cancel and its key returns the committed result
//     plan: sandglassd_tests: a write cancelled after its COMMIT was sent completes after cancel and a retry with its key does not insert twice
//  9. The services' clocks differ: the remaining duration passed on does not grow.
//     plan: sandglassd_tests: 9: hops whose steady clocks differ by a day pass on a budget that only shrinks
//     plan: sandglassd_tests: each hop of a three-daemon chain receives a budget smaller than the one before by at least the reserve
// 10. Load rises sharply: overtaken work shrinks instead of piling up behind timed-out requests.
//     plan: sandglass_tests: 10: a burst far above capacity does not let expired work pile up
//     plan: sandglassd_tests: under 10x overload and a SIGTERM in the middle of it every accepted job gets exactly one answer
#include "daemon_test_support.hpp"
#include "forwarding_daemon.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace sandglass::testing;
using boost::json::object;

namespace {

// Runs sandglassd in a time namespace whose steady clock (CLOCK_MONOTONIC, CLOCK_BOOTTIME) is
// `offset_s` seconds ahead of this machine's. unshare forks: the daemon is its child, killed
// with it. Without root, a user namespace of its own gives unshare the right to make one.
std::vector<std::string> clock_ahead_by(int offset_s) {
  const std::string offset = std::to_string(offset_s);
  std::vector<std::string> launcher{"/usr/bin/unshare", "--time", "--monotonic", offset,
                                    "--boottime", offset, "--kill-child=SIGKILL"};
  if (::geteuid() != 0) launcher.insert(launcher.begin() + 1, {"--user", "--map-root-user"});
  return launcher;
}

// The clock offsets (/proc/PID/timens_offsets) of the process that `parent` (unshare) started.
std::string clock_offsets_of_child(pid_t parent) {
  const std::string task = "/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent);
  pid_t child = 0;
  std::ifstream{task + "/children"} >> child;
  std::ifstream offsets{"/proc/" + std::to_string(child) + "/timens_offsets"};
  std::ostringstream text;
  text << offsets.rdbuf();
  return text.str();
}

}  // namespace

TEST_SUITE("sandglassd test plan") {
  TEST_CASE("3: a forward job whose budget runs out while queued never calls its upstream" *
            doctest::timeout(60)) {
    DaemonProcess down;
    const auto up = forwarding_to(down.port(), {}, {"--workers", "1"});
    // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
    const HttpAnswer blocker = post_job(up->port(), R"({"kind":"sleep","expected_ms":1,"args":{"ms":60000}})", {}, "?wait=false");
    REQUIRE(blocker.status == 202);
    REQUIRE(eventually([&] { return state_of(up->port(), 1) == "running"; }));

    const HttpAnswer a = post_job(up->port(), forward_body(R"({"kind":"sleep","args":{"ms":1}})"),
                                  {{"x-request-timeout-ms", "300"}});
    CHECK(a.status == 504);
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "expired");
    CHECK(r.at("reason").as_string() == "expired_in_queue");
    CHECK(timing(r, "run_ms") == 0);
    // Nothing reached the upstream: no request, no job, no answer.
    CHECK(metric(down.port(), R"(sandglass_jobs_submitted_total{kind="sleep",priority="normal"})") == -1);
    CHECK(http(down.port(), "GET", "/v1/jobs/1").status == 404);
    CHECK(metric(up->port(), R"(sandglass_upstream_attempts_total{result="answered",upstream="next"})") == -1);
  }

  TEST_CASE("9: hops whose steady clocks differ by a day pass on a budget that only shrinks" *
            doctest::timeout(60)) {
    // client -> a (this machine's clock) -> b (a day ahead) -> c (this machine's clock again):
    // b's clock is ahead of a's, c's behind b's. An absolute deadline on the wire would give b a
    // budget a day short (expired at once) and c one a day too long.
    DaemonProcess c;
    const auto b = forwarding_to(c.port(), {}, {}, 20, clock_ahead_by(86'400));
    const auto a = forwarding_to(b->port());
    INFO("b's clock offsets: " << clock_offsets_of_child(b->pid()));
    std::istringstream offsets{clock_offsets_of_child(b->pid())};
    std::string clock;
    long seconds = 0;
    offsets >> clock >> seconds;
    CHECK(clock == "monotonic");
    CHECK(seconds == 86'400);
    const HttpAnswer answer =
        post_job(a->port(), forward_body(forward_body(R"({"kind":"sleep","args":{"ms":1}})")),
                 {{"x-request-timeout-ms", "5000"}});
    REQUIRE(answer.status == 200);
    const object at_a = json_of(answer);
    CHECK(inner_record(at_a).at("state").as_string() == "completed");  // b, whose clock is ahead
    CHECK(check_budget_shrinks_each_hop(at_a, 5000, 20) == 2);
  }
}
