// The measured margin in a Runtime: admitted jobs that the queue drops unstarted, because they
// can no longer finish, widen the margin that admission adds to every predicted finish.
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include "tests/runtime/fixtures.hpp"

#include <array>
#include <latch>
#include <vector>

using namespace std::chrono_literals;
using sandglass::JobContext;
using sandglass::JobHandle;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;
using sandglass::test::kForever;
using sandglass::test::run_for;

TEST_SUITE("Runtime measured margin") {
  TEST_CASE("admitted jobs dropped as too late to start widen the margin, which then refuses a "
            "job the idle worker could not have kept the same promise for" * doctest::timeout(60)) {
    Runtime rt{{.workers = 1, .capacity = 64, .estimate_max_age = kForever}};
    // A job of a key without samples holds the only worker: admission predicts it needs
    // nothing more, so every job below is predicted to start at once, behind the others' work.
    std::latch held{1};
    std::latch release{1};
    const JobHandle holder = rt.submit({.kind = "hold", .budget = 10s}, [&](JobContext&) {
      held.count_down();
      release.wait();
    });
    held.wait();

    // 24 jobs of three kinds, three classes and budgets of 150 to 250 ms, each saying it runs
    // 4 ms: at most 96 ms of work ahead of any, so all are admitted. The timer drops each at its
    // latest start (deadline − 4 ms; expired if the timer wakes later than its deadline), at
    // least 50 ms after its predicted start.
    constexpr std::array kKinds = {"resize", "report", "mail"};
    constexpr std::array kClasses = {Priority::high, Priority::normal, Priority::sheddable};
    constexpr std::array kBudgets = {150ms, 200ms, 250ms};
    std::vector<JobHandle> jobs;
    for (int i = 0; i < 24; ++i) {
      jobs.push_back(rt.submit({.kind = kKinds[i % 3], .priority = kClasses[(i / 3) % 3],
                                .budget = kBudgets[(i / 9) % 3], .expected = 4ms},
                               [](JobContext&) {}));
    }
    for (const JobHandle& h : jobs) CHECK_FALSE(h.done());
    for (const JobHandle& h : jobs) CHECK(h.wait().state == State::expired);
    CHECK(rt.stats().count(Reason::too_late_to_start) > 0);
    release.count_down();
    CHECK(holder.wait().state == State::completed);

    const auto stats = rt.stats();
    CHECK(stats.start_error_tail >= 35ms);
    CHECK(stats.prediction_margin >= 35ms);
    // The worker is idle now, but the last promises broke by 50 ms or more: a 1 ms job with
    // 20 ms is refused rather than admitted on a prediction that missed so far.
    const Outcome o = rt.submit({.kind = "report", .budget = 20ms, .expected = 1ms},
                                [](JobContext& ctx) { run_for(ctx, 1ms); })
                          .wait();
    CHECK(o.reason == Reason::deadline_implausible);
  }
}
