// Estimate keys finer than the kind: one kind's slow variant does not make its fast variant
// look implausible, and a deadline_implausible rejection says why.
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include "tests/runtime/fixtures.hpp"

#include <boost/asio/use_future.hpp>

#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::Duration;
using sandglass::EstimateSnapshot;
using sandglass::JobContext;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;
using sandglass::test::kForever;
using sandglass::test::run_for;

TEST_SUITE("Runtime estimate keys") {
  TEST_CASE("a slow key's estimate does not make a fast key of the same kind implausible" *
            doctest::timeout(30)) {
    Runtime rt{{.workers = 1, .capacity = 16, .estimate_max_age = kForever}};
    for (int i = 0; i < 2; ++i) {
      const Outcome slow = rt.submit({.kind = "sleep", .budget = 10s, .estimate_key = "sleep:slow"},
                                     [](JobContext& ctx) { run_for(ctx, 300ms); })
                               .wait();
      REQUIRE(slow.state == State::completed);
    }
    // Another kind's jobs beside them, with their own (default) key.
    REQUIRE(rt.submit({.kind = "spin", .priority = Priority::high, .budget = 10s},
                      [](JobContext&) {})
                .wait()
                .state == State::completed);

    // With one estimate per kind, the 300 ms tail would reject this 200 ms job out of hand.
    const Outcome fast = rt.submit({.kind = "sleep", .budget = 200ms, .estimate_key = "sleep:fast"},
                                   [](JobContext& ctx) { ctx.set_result("fast"); })
                             .wait();
    CHECK(fast.state == State::completed);
    CHECK(fast.result == "fast");

    // The slow key still is implausible in 200 ms, and the rejection says why.
    const Outcome slow = rt.submit({.kind = "sleep", .budget = 200ms, .estimate_key = "sleep:slow"},
                                   [](JobContext&) {})
                             .wait();
    CHECK(slow.reason == Reason::deadline_implausible);
    CHECK(slow.error.find("predicted finish ") == 0);
    CHECK(slow.error.find("(start in ") != std::string::npos);
    CHECK(slow.error.find(" for sleep:slow) > deadline in ") != std::string::npos);

    const std::vector<EstimateSnapshot> estimates = rt.estimates();
    REQUIRE(estimates.size() == 3);
    CHECK(estimates[0].key == "sleep:fast");
    CHECK(estimates[0].kind == "sleep");
    CHECK(estimates[0].samples == 1);
    CHECK(estimates[1].key == "sleep:slow");
    CHECK(estimates[1].kind == "sleep");
    CHECK(estimates[1].samples == 2);
    CHECK(estimates[1].kept == 2);
    CHECK(estimates[1].tail >= 300ms);
    CHECK(estimates[1].mean >= 300ms);
    CHECK(estimates[2].key == "spin");  // an empty key is the kind
    CHECK(estimates[2].kind == "spin");
    CHECK(estimates[2].samples == 1);
  }

  TEST_CASE("async_submit carries the estimate key of a braced spec" * doctest::timeout(30)) {
    Runtime rt{{.workers = 1, .capacity = 8, .estimate_max_age = kForever}};
    auto f = rt.async_submit({.kind = "q", .budget = 5s, .estimate_key = "q:report"},
                             [](JobContext&) {}, boost::asio::use_future);
    REQUIRE(f.get().state == State::completed);
    const auto estimates = rt.estimates();
    REQUIRE(estimates.size() == 1);
    CHECK(estimates[0].key == "q:report");
    CHECK(estimates[0].kind == "q");
  }
}
