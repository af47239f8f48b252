// Handlers that fail around their deadline: the outcome names the deadline, not the failure it
// caused, also when the handler notices the deadline before the runtime's timer does.
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

using namespace std::chrono_literals;
using sandglass::CancelCause;
using sandglass::JobContext;
using sandglass::Outcome;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;

TEST_SUITE("Runtime handler faults") {
  TEST_CASE("a handler that throws because its deadline passed is cancelled by the deadline even "
            "before the timer signals it" * doctest::timeout(30)) {
    // Like a socket whose timeout is the job's deadline: the handler watches the clock, not its
    // token, and throws the moment the deadline passes, usually before the timer thread wakes.
    Runtime rt{{.workers = 1, .capacity = 8}};
    int ran = 0;
    for (int i = 0; i < 20; ++i) {
      // A kind of its own each time, so that no run-time estimate makes admission refuse it.
      const Outcome o = rt.submit({.kind = "io" + std::to_string(i), .budget = 20ms},
                                  [](JobContext& ctx) {
                                    while (!ctx.deadline().expired()) {
                                    }
                                    throw std::runtime_error{"read timed out"};
                                  }).wait();
      if (o.state == State::expired) continue;  // a loaded machine started it too late
      ++ran;
      CHECK(o.state == State::cancelled);
      CHECK(o.reason == Reason::cancelled_while_running);
      CHECK(o.cause == CancelCause::deadline);
      CHECK(o.error == "read timed out");
    }
    CHECK(ran > 0);
  }

  TEST_CASE("a handler that throws after its commit point fails even past its deadline" *
            doctest::timeout(30)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    // 100 ms: long enough that a loaded machine starts the job before its deadline.
    const Outcome o = rt.submit({.kind = "commit", .budget = 100ms}, [](JobContext& ctx) {
                          ctx.commit();
                          while (!ctx.deadline().expired()) {
                          }
                          throw std::runtime_error{"write failed"};
                        }).wait();
    CHECK(o.state == State::failed);
    CHECK(o.reason == Reason::handler_error);
    CHECK(o.error == "write failed");
  }
}
