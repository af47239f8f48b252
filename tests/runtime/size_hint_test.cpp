// A job may state its own expected run time (JobSpec::expected): the runtime predicts it from
// its own size, scaled by how the key's hinted runs related to their hints, so one long run of
// a kind does not lock out its short jobs; without a hint the key's estimate applies. A refusal
// says which estimate refused it and when the same job would be admitted.
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include "tests/runtime/fixtures.hpp"

#include <string>
#include <thread>

using namespace std::chrono_literals;
using sandglass::Duration;
using sandglass::JobContext;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;
using sandglass::test::kForever;
using sandglass::test::run_for;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_SUITE("Runtime size hints") {
  TEST_CASE("after one long run of a kind, its short jobs that say their size are admitted and "
            "those that do not are refused by the kind's estimate" * doctest::timeout(60)) {
    Runtime rt{{.workers = 2, .capacity = 64, .estimate_max_age = kForever}};
    // Another kind and class beside it, with samples of its own.
    for (int i = 0; i < 3; ++i) {
      REQUIRE(rt.submit({.kind = "report", .priority = Priority::high, .budget = 10s},
                        [](JobContext& ctx) { run_for(ctx, 2ms); })
                  .wait()
                  .state == State::completed);
    }
    REQUIRE(rt.submit({.kind = "img", .budget = 10s}, [](JobContext& ctx) { run_for(ctx, 200ms); })
                .wait()
                .state == State::completed);

    SUBCASE("a hinted short job fits its own budget") {
      const Outcome o = rt.submit({.kind = "img", .priority = Priority::sheddable, .budget = 100ms,
                                   .expected = 1ms},
                                  [](JobContext& ctx) { run_for(ctx, 1ms); })
                            .wait();
      CHECK(o.state == State::completed);
    }
    SUBCASE("an unhinted one gets the kind's estimate, which its budget cannot hold until the "
            "long run is forgotten") {
      const Outcome o =
          rt.submit({.kind = "img", .budget = 100ms}, [](JobContext& ctx) { run_for(ctx, 1ms); }).wait();
      REQUIRE(o.reason == Reason::deadline_implausible);
      CHECK(contains(o.error, " for img)"));
      CHECK_FALSE(contains(o.error, "expected"));
      // The 200 ms sample is kept for an hour (estimate_max_age): no sooner.
      CHECK(o.retry_after > 50min);
      CHECK(o.retry_after <= 1h);
    }
    SUBCASE("the other kind is predicted from its own runs") {
      const Outcome o = rt.submit({.kind = "report", .priority = Priority::high, .budget = 50ms},
                                  [](JobContext& ctx) { run_for(ctx, 1ms); })
                            .wait();
      CHECK(o.state == State::completed);
    }
  }

  TEST_CASE("a key whose hinted runs take longer than their hints is estimated long, from each "
            "job's own size" * doctest::timeout(60)) {
    Runtime rt{{.workers = 1, .capacity = 16, .estimate_max_age = kForever}};
    // Each says 2 ms and runs 20 ms: the key's ratio of actual to expected is about 10.
    for (int i = 0; i < 3; ++i) {
      REQUIRE(rt.submit({.kind = "resize", .budget = 10s, .expected = 2ms},
                        [](JobContext& ctx) { run_for(ctx, 20ms); })
                  .wait()
                  .state == State::completed);
    }
    SUBCASE("a job that says 2 ms is predicted at 20 ms or more, beyond a 15 ms budget") {
      const Outcome o = rt.submit({.kind = "resize", .budget = 15ms, .expected = 2ms},
                                  [](JobContext&) {})
                            .wait();
      REQUIRE(o.reason == Reason::deadline_implausible);
      CHECK(contains(o.error, " for resize, from its expected 2ms)"));
      // Its estimate alone exceeds its budget: only forgetting the ratios would admit it.
      CHECK(o.retry_after > 50min);
    }
    SUBCASE("a job that says 0.1 ms is predicted at about 1 ms, within a 15 ms budget") {
      const Outcome o = rt.submit({.kind = "resize", .budget = 15ms, .expected = 100us},
                                  [](JobContext&) {})
                            .wait();
      CHECK(o.state == State::completed);
    }
    SUBCASE("a job without a hint is predicted from the key's run times, not its ratios") {
      const Outcome o = rt.submit({.kind = "resize", .priority = Priority::critical, .budget = 15ms},
                                  [](JobContext&) {})
                            .wait();
      REQUIRE(o.reason == Reason::deadline_implausible);
      CHECK_FALSE(contains(o.error, "expected"));
    }
  }
}
