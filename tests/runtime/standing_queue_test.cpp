// The standing-queue rule: detection (StandingQueue, with injected times) and what admission
// does while a queue stands (a Runtime with mixed kinds, budgets and sizes).
#include "runtime/standing_queue.hpp"

#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include "tests/runtime/fixtures.hpp"

#include <latch>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::Duration;
using sandglass::TimePoint;
using sandglass::JobContext;
using sandglass::JobHandle;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;
using sandglass::test::kForever;
using sandglass::test::run_for;
using sandglass::detail::StandingQueue;

namespace {

const TimePoint kT0{100s};

}  // namespace

TEST_SUITE("StandingQueue") {
  TEST_CASE("a burst whose jobs wait longer than the target for less than an interval is no "
            "standing queue") {
    StandingQueue q{2ms};  // interval: 100 ms (ten targets would be 20 ms)
    for (int i = 0; i < 10; ++i) q.on_start(15ms, kT0 + i * 9ms);
    CHECK_FALSE(q.standing());
    q.on_start(1ms, kT0 + 90ms);  // the burst drained
    q.on_start(15ms, kT0 + 195ms);
    CHECK_FALSE(q.standing());  // a new stretch above the target begins
  }

  TEST_CASE("jobs that all wait longer than the target for a whole interval make a standing "
            "queue, one short wait or an empty queue ends it") {
    StandingQueue q{2ms};
    for (int i = 0; i <= 20; ++i) q.on_start(3ms, kT0 + i * 5ms);
    CHECK(q.standing());
    CHECK(q.target() == 2ms);
    SUBCASE("a job that waited less than the target") {
      q.on_start(1ms, kT0 + 105ms);
      CHECK_FALSE(q.standing());
    }
    SUBCASE("a worker that found the queue empty") {
      q.on_empty();
      CHECK_FALSE(q.standing());
      q.on_start(3ms, kT0 + 110ms);
      CHECK_FALSE(q.standing());  // the interval starts again
    }
  }

  TEST_CASE("the adaptive target follows the run times, never below its minimum") {
    StandingQueue q{Duration::zero()};
    CHECK(q.adaptive());
    CHECK(q.target() == StandingQueue::kMinTarget);
    q.on_run(10us);
    CHECK(q.target() == StandingQueue::kMinTarget);
    for (int i = 0; i < 1000; ++i) q.on_run(20ms);
    CHECK(q.target() >= 35ms);
    CHECK(q.target() <= 45ms);
  }
}

TEST_SUITE("Runtime standing queue") {
  TEST_CASE("a burst is admitted whole, once the queue stands, only jobs predicted to start "
            "within the target are admitted, urgent ones included, a drained queue ends the rule" *
            doctest::timeout(60)) {
    Runtime rt{{.workers = 1, .capacity = 64, .estimate_max_age = kForever,
                .queue_delay_target = 2ms}};  // interval: 100 ms
    for (int i = 0; i < 2; ++i) {
      REQUIRE(rt.submit({.kind = "step", .budget = 10s}, [](JobContext& ctx) { run_for(ctx, 20ms); })
                  .wait()
                  .state == State::completed);
    }
    CHECK_FALSE(rt.stats().standing_queue);

    // The burst: seven steps of 20 ms, a job of a kind without samples that holds the worker
    // until released, two more steps. Each step after the first waits 20 ms or more, so by the
    // time the holder starts, every start for over 100 ms waited longer than the 2 ms target.
    std::latch held{1};
    std::latch release{1};
    std::vector<JobHandle> burst;
    for (int i = 0; i < 10; ++i) {
      if (i == 7) {
        burst.push_back(rt.submit({.kind = "hold", .budget = 10s}, [&](JobContext&) {
          held.count_down();
          release.wait();
        }));
      } else {
        burst.push_back(rt.submit({.kind = "step", .budget = 10s}, [](JobContext& ctx) { run_for(ctx, 20ms); }));
      }
    }
    for (const JobHandle& h : burst) CHECK_FALSE(h.done());  // all admitted
    held.wait();
    CHECK(rt.stats().standing_queue);
    CHECK(rt.stats().queue_delay_target == 2ms);

    // Behind two queued steps (40 ms of work): refused, whatever its size, budget or estimate.
    const Outcome behind = rt.submit({.kind = "step", .budget = 10s}, [](JobContext&) {}).wait();
    CHECK(behind.reason == Reason::queue_full);
    CHECK(behind.error.rfind("standing queue: predicted start in ", 0) == 0);
    CHECK(behind.retry_after >= 8ms);
    const Outcome unknown =
        rt.submit({.kind = "fresh", .budget = 10s, .expected = 1ms}, [](JobContext&) {}).wait();
    CHECK(unknown.reason == Reason::queue_full);
    // Urgent jobs overtake the queue under EDF: an earlier deadline, or a higher class.
    const JobHandle urgent = rt.submit({.kind = "step", .budget = 1s}, [](JobContext&) {});
    const JobHandle critical =
        rt.submit({.kind = "report", .priority = Priority::critical, .budget = 10s}, [](JobContext&) {});
    CHECK_FALSE(urgent.done());
    CHECK_FALSE(critical.done());

    release.count_down();
    for (const JobHandle& h : burst) CHECK(h.wait().state == State::completed);
    CHECK(urgent.wait().state == State::completed);
    CHECK(critical.wait().state == State::completed);
    // The worker found the queue empty before it published the last outcome.
    CHECK_FALSE(rt.stats().standing_queue);
    CHECK(rt.submit({.kind = "step", .budget = 10s}, [](JobContext&) {}).wait().state == State::completed);
  }
}
