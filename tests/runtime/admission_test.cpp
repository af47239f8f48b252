// Admission in the Runtime with mixed kinds, classes and budgets: an urgent job behind long
// ones and a bulkhead's parked jobs, and the runtime's side of each rule (latest useful start,
// bulkheads that never strand parked jobs, running work in the prediction).
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include "tests/runtime/fixtures.hpp"

#include <latch>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::Duration;
using sandglass::JobContext;
using sandglass::JobHandle;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;
using sandglass::test::kForever;
using sandglass::test::run_for;

namespace {

// Teaches the runtime that `kind` runs for `lengths`, one job after the other.
void prime(Runtime& rt, const std::string& kind, const std::vector<Duration>& lengths) {
  for (const Duration d : lengths) {
    const Outcome o =
        rt.submit({.kind = kind, .budget = 10s}, [d](JobContext& ctx) { run_for(ctx, d); }).wait();
    REQUIRE(o.state == State::completed);
  }
}

}  // namespace

TEST_SUITE("Runtime admission") {
  TEST_CASE("urgent jobs behind a hundred long-deadline jobs of their class are admitted and "
            "complete" * doctest::timeout(60)) {
    Runtime rt{{.workers = 2, .capacity = 256, .estimate_max_age = kForever}};
    prime(rt, "batch", {50ms, 50ms, 50ms});
    prime(rt, "urgent", {5ms, 5ms, 5ms});

    // Both workers held by batch jobs; then 100 batch jobs with 10 s budgets queue up.
    std::latch started{2};
    std::latch release{1};
    std::vector<JobHandle> holders;
    for (int i = 0; i < 2; ++i) {
      holders.push_back(rt.submit({.kind = "batch", .budget = 10s}, [&](JobContext&) {
        started.count_down();
        release.wait();
      }));
    }
    started.wait();
    std::vector<JobHandle> batch;
    for (int i = 0; i < 100; ++i) {
      batch.push_back(rt.submit({.kind = "batch", .budget = 10s}, [](JobContext&) {}));
    }
    for (const JobHandle& h : batch) REQUIRE_FALSE(h.done());  // all admitted, all queued

    // EDF runs each urgent job next: they start within about one batch run.
    std::vector<JobHandle> urgent;
    for (int i = 0; i < 5; ++i) {
      urgent.push_back(rt.submit({.kind = "urgent", .budget = 300ms},
                                 [](JobContext& ctx) { ctx.checkpoint(); }));
    }
    for (const JobHandle& h : urgent) {
      const auto o = h.outcome();
      CHECK_FALSE(o.has_value());  // not rejected
    }
    release.count_down();
    for (const JobHandle& h : urgent) {
      const Outcome o = h.wait();
      CHECK(o.state == State::completed);
      CHECK(o.reason == Reason::ok);
    }
    for (const JobHandle& h : batch) CHECK(h.wait().state == State::completed);
    for (const JobHandle& h : holders) CHECK(h.wait().state == State::completed);
  }

  TEST_CASE("a bulkhead's parked jobs run as soon as its slot frees, after one of them left at "
            "its latest useful start" * doctest::timeout(60)) {
    Runtime rt{{.workers = 2, .capacity = 64, .kind_limits = {{"db", 1}},
                .estimate_max_age = kForever}};
    // db: a median of about 1 ms, a p90 of about 30 ms.
    prime(rt, "db", {1ms, 1ms, 1ms, 1ms, 1ms, 1ms, 30ms, 30ms});

    std::latch a_started{1};
    std::latch release_a{1};
    JobHandle a = rt.submit({.kind = "db", .budget = 5s}, [&](JobContext&) {
      a_started.count_down();
      release_a.wait();
    });
    a_started.wait();
    // B needs its 30 ms tail within 100 ms: admitted (A is expected to need up to 30 ms more),
    // it must start within 70 ms, while A still holds the slot.
    JobHandle b = rt.submit({.kind = "db", .budget = 100ms}, [](JobContext&) {});
    JobHandle c = rt.submit({.kind = "db", .budget = 5s}, [](JobContext&) {});
    JobHandle d = rt.submit({.kind = "db", .priority = Priority::high, .budget = 5s},
                            [](JobContext&) {});
    // Another kind is not held back by the bulkhead.
    JobHandle other = rt.submit({.kind = "cache", .budget = 5s}, [](JobContext&) {});
    CHECK(other.wait().state == State::completed);

    // The timer removes B at its latest useful start, while A still runs.
    const Outcome ob = b.wait();
    CHECK(ob.state == State::expired);
    CHECK(ob.reason == Reason::too_late_to_start);
    CHECK(ob.timings.remaining_at_end > 0ms);  // its submitter learnt before the deadline

    release_a.count_down();
    CHECK(a.wait().state == State::completed);
    // D (high) then C, at once: not when their 5 s budgets run out.
    const Outcome od = d.wait();
    const Outcome oc = c.wait();
    CHECK(od.state == State::completed);
    CHECK(oc.state == State::completed);
    CHECK(oc.timings.queue_wait < 4s);
  }

  TEST_CASE("a queued job that can no longer finish is dropped by the timer at deadline minus "
            "its estimate" * doctest::timeout(60)) {
    Runtime rt{{.workers = 1, .capacity = 16, .estimate_max_age = kForever}};
    prime(rt, "slow", {30ms, 30ms, 30ms});
    std::latch started{1};
    std::latch release{1};
    JobHandle gate = rt.submit({.kind = "gate", .budget = 10s}, [&](JobContext&) {
      started.count_down();
      release.wait();
    });
    started.wait();
    JobHandle slow = rt.submit({.kind = "slow", .budget = 100ms}, [](JobContext&) {});
    JobHandle plain = rt.submit({.kind = "unknown", .budget = 10s}, [](JobContext&) {});
    const Outcome o = slow.wait();  // while the worker is still held
    CHECK(o.state == State::expired);
    CHECK(o.reason == Reason::too_late_to_start);
    CHECK(o.timings.remaining_at_end > 0ms);
    release.count_down();
    CHECK(gate.wait().state == State::completed);
    CHECK(plain.wait().state == State::completed);
  }

  TEST_CASE("with drop_if_cannot_finish off a queued job stays until its deadline" *
            doctest::timeout(60)) {
    Runtime rt{{.workers = 1, .capacity = 16, .drop_if_cannot_finish = false,
                .estimate_max_age = kForever}};
    prime(rt, "slow", {30ms, 30ms, 30ms});
    std::latch started{1};
    std::latch release{1};
    JobHandle gate = rt.submit({.kind = "gate", .budget = 10s}, [&](JobContext&) {
      started.count_down();
      release.wait();
    });
    started.wait();
    const Outcome o = rt.submit({.kind = "slow", .budget = 100ms}, [](JobContext&) {}).wait();
    CHECK(o.state == State::expired);
    CHECK(o.reason == Reason::expired_in_queue);
    release.count_down();
    CHECK(gate.wait().state == State::completed);
  }

  TEST_CASE("a job is rejected when it could not start before a running job's expected end and "
            "still finish" * doctest::timeout(60)) {
    Runtime rt{{.workers = 1, .capacity = 16, .estimate_max_age = kForever}};
    prime(rt, "long", {300ms, 300ms});
    prime(rt, "short", {1ms, 1ms, 1ms});
    std::latch started{1};
    std::latch release{1};
    JobHandle held = rt.submit({.kind = "long", .budget = 10s}, [&](JobContext&) {
      started.count_down();
      release.wait();
    });
    started.wait();
    // The one worker is expected busy for up to 300 ms more: a 50 ms budget cannot be met,
    // a 5 s one can; a critical job cannot jump a job that already runs.
    const auto o = rt.submit({.kind = "short", .priority = Priority::critical, .budget = 50ms},
                             [](JobContext&) {}).outcome();
    REQUIRE(o.has_value());
    CHECK(o->reason == Reason::deadline_implausible);
    JobHandle fits = rt.submit({.kind = "short", .budget = 5s}, [](JobContext&) {});
    CHECK_FALSE(fits.done());
    release.count_down();
    CHECK(held.wait().state == State::completed);
    CHECK(fits.wait().state == State::completed);
  }

  TEST_CASE("a newcomer that would push a queued job of its class past its latest start is "
            "rejected, one of a higher class is not" * doctest::timeout(60)) {
    Runtime rt{{.workers = 1, .capacity = 256, .estimate_max_age = kForever}};
    prime(rt, "job", {20ms, 20ms, 20ms});
    prime(rt, "big", {300ms, 300ms});
    std::latch started{1};
    std::latch release{1};
    JobHandle held = rt.submit({.kind = "gate", .budget = 30s}, [&](JobContext&) {
      started.count_down();
      release.wait();
    });
    started.wait();
    // A (1 s budget, 300 ms runs: latest start after 700 ms) is queued; 20 ms newcomers with
    // 900 ms budgets overtake it. Each would fit its own deadline up to the 44th; A's promise
    // stops them at about the 35th.
    const auto a_submitted = sandglass::Clock::now();
    JobHandle a = rt.submit({.kind = "big", .budget = 1s}, [](JobContext&) {});
    REQUIRE_FALSE(a.done());
    int admitted = 0;
    Reason last = Reason::ok;
    std::vector<JobHandle> overtaking;
    for (int i = 0; i < 100 && last == Reason::ok; ++i) {
      overtaking.push_back(rt.submit({.kind = "job", .budget = 900ms}, [](JobContext&) {}));
      const auto o = overtaking.back().outcome();
      last = o ? o->reason : Reason::ok;
      if (!o) ++admitted;
    }
    CHECK(last == Reason::deadline_implausible);
    // A's slack shrinks while the loop runs (slowly under a sanitizer on a loaded machine): the
    // newcomers that fit are those whose work fits in what is left of A's 700 ms. The estimates
    // are the runs as measured, which a loaded machine stretches beyond 20 ms and 300 ms.
    const auto elapsed = sandglass::Clock::now() - a_submitted;
    sandglass::Duration big_tail = 300ms;
    sandglass::Duration job_mean = 20ms;
    for (const auto& e : rt.estimates()) {
      if (e.key == "big") big_tail = e.tail;
      if (e.key == "job") job_mean = e.mean;
    }
    const sandglass::Duration slack = 1s - big_tail;
    const auto fit = (slack - std::min<sandglass::Duration>(elapsed, slack)) / job_mean;
    CHECK(admitted >= static_cast<int>(fit) - 7);
    CHECK(admitted <= 35);
    // A sheddable newcomer goes behind A and leaves it alone; a higher class may overtake.
    JobHandle low = rt.submit({.kind = "job", .priority = Priority::sheddable, .budget = 5s},
                              [](JobContext&) {});
    CHECK_FALSE(low.done());
    JobHandle high = rt.submit({.kind = "job", .priority = Priority::high, .budget = 900ms},
                               [](JobContext&) {});
    CHECK_FALSE(high.done());
    release.count_down();
    CHECK(held.wait().state == State::completed);
    CHECK(high.wait().state == State::completed);
    CHECK(a.wait().state == State::completed);
    CHECK(low.wait().state == State::completed);
  }
}
