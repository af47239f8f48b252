// A job starts only while it can still be useful as the clock reads when a worker takes it,
// not as it read when that worker's previous run ended (the lock may be contended, or the
// worker preempted, in between). The core is not started: this thread plays its one worker,
// and no timer removes expired jobs, so only the worker's own check can drop one.
#include "runtime/runtime_core.hpp"

#include <doctest/doctest.h>

#include <thread>

using namespace std::chrono_literals;
using sandglass::Deadline;
using sandglass::JobContext;
using sandglass::JobHandle;
using sandglass::Outcome;
using sandglass::Reason;
using sandglass::State;
using sandglass::detail::Job;
using sandglass::detail::RuntimeCore;

namespace {

// What a worker reports for a run that returned at once.
Outcome completed_at_once() {
  Outcome o;
  o.state = State::completed;
  o.reason = Reason::ok;
  o.timings.run_time = sandglass::Duration::zero();
  return o;
}

}  // namespace

TEST_SUITE("Runtime start") {
  TEST_CASE("a worker does not start a job whose deadline passed after its previous run ended" *
            doctest::timeout(30)) {
    RuntimeCore core{{.workers = 1, .capacity = 8}};
    const JobHandle first = core.submit({.kind = "first", .budget = 10s}, [](JobContext&) {}, {});
    Job* running = core.next_job(0, nullptr, {});
    REQUIRE(running != nullptr);
    REQUIRE(running->id == first.id());

    // Queued while `first` runs: one job of another kind and class that expires soon, one
    // with a long budget.
    const JobHandle late = core.submit(
        {.kind = "late", .priority = sandglass::Priority::high, .budget = 2ms}, [](JobContext&) {}, {});
    const JobHandle spare = core.submit({.kind = "spare", .budget = 10s}, [](JobContext&) {}, {});
    REQUIRE_FALSE(late.done());
    // The run of `first` ended when it started (run time zero), before `late`'s deadline; the
    // worker comes back for the next job only after that deadline.
    const Deadline late_deadline = late.progress().deadline;
    while (!late_deadline.expired()) std::this_thread::yield();

    Job* next = core.next_job(0, running, completed_at_once());
    REQUIRE(next != nullptr);
    CHECK(next->id == spare.id());
    const std::optional<Outcome> dropped = late.outcome();
    REQUIRE(dropped.has_value());
    CHECK(dropped->state == State::expired);
    CHECK(dropped->reason == Reason::expired_in_queue);
    CHECK(first.outcome().has_value());

    std::thread worker{[&] { CHECK(core.next_job(0, next, completed_at_once()) == nullptr); }};
    core.shutdown_until(Deadline::after(10s));
    worker.join();
    CHECK(spare.outcome().has_value());
  }
}
