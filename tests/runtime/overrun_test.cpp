// Jobs that go on past their deadline: the runtime reports them once (on_overrun), lists them
// (overruns(), stats().overrunning) and keeps serving with the rest of its workers.
#include <sandglass/overrun.hpp>
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include "tests/runtime/fixtures.hpp"

#include <condition_variable>
#include <latch>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::test::Gate;
using sandglass::CancelCause;
using sandglass::JobContext;
using sandglass::JobHandle;
using sandglass::Outcome;
using sandglass::Overrun;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::RuntimeOptions;
using sandglass::State;

namespace {

// What on_overrun was told, in order.
struct Reports {
  sandglass::OverrunCallback callback() {
    return [this](const Overrun& o) {
      {
        std::lock_guard lock{mu};
        seen.push_back(o);
      }
      changed.notify_all();
    };
  }
  // Blocks until at least `n` reports arrived (failing the test after 30 s, so a job that
  // never ran cannot hang the suite); returns all of them.
  std::vector<Overrun> wait_for(std::size_t n) {
    std::unique_lock lock{mu};
    const bool arrived = changed.wait_for(lock, std::chrono::seconds{30},
                                          [&] { return seen.size() >= n; });
    REQUIRE_MESSAGE(arrived, "fewer than ", n, " overrun reports in 30 s");
    return seen;
  }
  std::vector<Overrun> all() {
    std::lock_guard lock{mu};
    return seen;
  }

  std::mutex mu;
  std::condition_variable changed;
  std::vector<Overrun> seen;  // guarded by mu
};


}  // namespace

TEST_SUITE("Runtime overruns") {
  TEST_CASE("a job that never reaches a checkpoint is reported once with its worker while the "
            "other workers keep serving" * doctest::timeout(20)) {
    Reports reports;
    Runtime rt{{.workers = 2, .capacity = 64, .overrun_after = 50ms,
                .on_overrun = reports.callback()}};
    Gate stuck;
    const JobHandle h = rt.submit({.kind = "stuck", .budget = 300ms}, stuck.handler());
    stuck.started.wait();
    const std::vector<Overrun> seen = reports.wait_for(1);
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].id == h.id());
    CHECK(seen[0].kind == "stuck");
    CHECK(seen[0].worker < 2);
    CHECK(seen[0].worker == h.progress().worker);
    CHECK(seen[0].deadline == h.progress().deadline);
    CHECK(seen[0].started_at == *h.progress().started_at);
    CHECK(seen[0].past_deadline >= 50ms);
    CHECK_FALSE(h.done());

    const std::vector<Overrun> now = rt.overruns();
    REQUIRE(now.size() == 1);
    CHECK(now[0].id == h.id());
    CHECK(now[0].worker == seen[0].worker);
    CHECK(now[0].past_deadline >= seen[0].past_deadline);
    CHECK(rt.stats().overrunning == 1);

    // The other worker serves everything else meanwhile.
    std::vector<JobHandle> others;
    for (int i = 0; i < 20; ++i) {
      others.push_back(rt.submit({.kind = "quick", .budget = 5s}, [](JobContext& ctx) {
        ctx.checkpoint();
        ctx.set_result("done");
      }));
    }
    for (const JobHandle& o : others) {
      const Outcome out = o.wait();
      CHECK(out.state == State::completed);
      CHECK(out.result == "done");
    }
    CHECK(rt.overruns().size() == 1);

    stuck.release.count_down();
    const Outcome o = h.wait();
    // It returned although its deadline cancelled it: it completed, late, and says so.
    CHECK(o.state == State::completed);
    CHECK(o.reason == Reason::completed_after_cancel);
    CHECK(o.cause == CancelCause::deadline);
    CHECK(o.timings.remaining_at_end <= -50ms);
    CHECK(rt.overruns().empty());
    CHECK(rt.stats().overrunning == 0);
    rt.shutdown(1s);
    CHECK(reports.all().size() == 1);
  }

  TEST_CASE("a job that stops at its checkpoint when its deadline passes is never reported" *
            doctest::timeout(20)) {
    Reports reports;
    Runtime rt{{.workers = 2, .capacity = 64, .overrun_after = 30ms,
                .on_overrun = reports.callback()}};
    const Outcome polite = rt.submit({.kind = "polite", .budget = 100ms}, [](JobContext& ctx) {
                               for (;;) ctx.checkpoint();
                             }).wait();
    CHECK(polite.cause == CancelCause::deadline);
    // A stuck job with a later deadline: the timer reports in deadline order, so once this one
    // is reported, the polite job would have been reported before it if it ever were.
    Gate stuck;
    const JobHandle h = rt.submit({.kind = "stuck", .budget = 300ms}, stuck.handler());
    const std::vector<Overrun> seen = reports.wait_for(1);
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].id == h.id());
    stuck.release.count_down();
    CHECK(h.wait().reason == Reason::completed_after_cancel);
  }

  TEST_CASE("two stuck jobs are reported with their two workers and a third worker serves on" *
            doctest::timeout(20)) {
    Reports reports;
    Runtime rt{{.workers = 3, .capacity = 64, .overrun_after = 20ms,
                .on_overrun = reports.callback()}};
    Gate first;
    Gate second;
    const JobHandle a = rt.submit({.kind = "stuck", .budget = 300ms}, first.handler());
    const JobHandle b = rt.submit({.kind = "stuck", .budget = 400ms}, second.handler());
    const std::vector<Overrun> seen = reports.wait_for(2);
    REQUIRE(seen.size() == 2);
    CHECK(seen[0].id == a.id());  // the earlier deadline first
    CHECK(seen[1].id == b.id());
    CHECK(seen[0].worker != seen[1].worker);
    CHECK(rt.stats().overrunning == 2);
    CHECK(rt.overruns().size() == 2);
    CHECK(rt.submit({.kind = "quick", .budget = 5s}, [](JobContext&) {}).wait().state ==
          State::completed);
    first.release.count_down();
    CHECK(a.wait().reason == Reason::completed_after_cancel);
    CHECK(rt.overruns().size() == 1);
    CHECK(rt.overruns()[0].id == b.id());
    second.release.count_down();
    CHECK(b.wait().reason == Reason::completed_after_cancel);
    CHECK(rt.stats().overrunning == 0);
  }

  TEST_CASE("without a callback a stuck job is still listed by overruns" * doctest::timeout(20)) {
    Runtime rt{{.workers = 1, .capacity = 8, .overrun_after = 10ms}};
    Gate stuck;
    const JobHandle h = rt.submit({.kind = "stuck", .budget = 300ms}, stuck.handler());
    stuck.started.wait();
    // Polls the runtime's state: nothing is reported, the list is the only way to learn it.
    std::vector<Overrun> now;
    while ((now = rt.overruns()).empty()) std::this_thread::sleep_for(1ms);
    REQUIRE(now.size() == 1);
    CHECK(now[0].id == h.id());
    CHECK(now[0].worker == 0);
    CHECK(now[0].kind == "stuck");
    CHECK(now[0].past_deadline >= 10ms);  // overrun_after
    stuck.release.count_down();
    h.wait();
    CHECK(rt.overruns().empty());
  }

  TEST_CASE("a handler that throws after overrunning fails and its worker serves the next job" *
            doctest::timeout(20)) {
    Reports reports;
    Runtime rt{{.workers = 1, .capacity = 8, .overrun_after = 10ms,
                .on_overrun = reports.callback()}};
    std::latch release{1};
    const JobHandle h = rt.submit({.kind = "stuck", .budget = 300ms}, [&](JobContext&) {
      release.wait();
      throw std::runtime_error{"gave up late"};
    });
    reports.wait_for(1);
    release.count_down();
    const Outcome o = h.wait();
    // Cancelled before it threw, and never committed: the exception counts as the cancellation.
    CHECK(o.state == State::cancelled);
    CHECK(o.cause == CancelCause::deadline);
    CHECK(o.error == "gave up late");
    CHECK(rt.submit({.kind = "next", .budget = 5s}, [](JobContext&) {}).wait().state ==
          State::completed);
  }

  TEST_CASE("overrun_after must be positive") {
    RuntimeOptions options;
    options.overrun_after = 0ms;
    CHECK(options.validate() == "overrun_after: must be positive");
    CHECK_THROWS_WITH_AS(Runtime{options}, "RuntimeOptions.overrun_after: must be positive",
                         std::invalid_argument);
    options.overrun_after = 1ms;
    CHECK(options.validate().empty());
  }
}
