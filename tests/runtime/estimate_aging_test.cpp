// When the run-time samples of an estimate key age out (runtime/estimate_state.hpp): a worker
// that records a run ages them when due; a submitter that finds aging due decides with the
// figures published last, unless aging is overdue (a pause without runs): then it ages them
// first.
#include <sandglass/runtime.hpp>
#include <sandglass/service_time_estimator.hpp>

#include "runtime/estimate_state.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::Duration;
using sandglass::EstimateSnapshot;
using sandglass::JobContext;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::ServiceTimeEstimator;
using sandglass::TimePoint;
using sandglass::detail::EstimateState;

namespace {

// Samples live 80 ms (no scaling by the typical run); the grace is a check period, 10 ms.
EstimateState make_state() {
  return EstimateState{nullptr, "slow",
                       ServiceTimeEstimator{{.max_age = 80ms, .age_in_runs = 0}}};
}

const TimePoint kT0 = TimePoint{} + std::chrono::hours{1};

std::size_t kept(EstimateState& state) { return state.snapshot("slow").kept; }

std::size_t kept_of(const Runtime& rt, const std::string& key) {
  for (const EstimateSnapshot& e : rt.estimates()) {
    if (e.key == key) return e.kept;
  }
  return 0;
}

}  // namespace

TEST_SUITE("Runtime estimate aging") {
  TEST_CASE("before the samples' time is up, nobody ages them") {
    EstimateState state = make_state();
    state.record(30ms, kT0);
    state.record(30ms, kT0);
    CHECK(state.figures(kT0 + 80ms).tail == 30ms);
    state.record(30ms, kT0 + 80ms);
    CHECK(kept(state) == 3);
  }

  TEST_CASE("a submitter within a check period past due decides with the figures published last") {
    EstimateState state = make_state();
    state.record(30ms, kT0);
    state.record(30ms, kT0);
    const TimePoint due = kT0 + 80ms + 1ns;
    CHECK(state.figures(due).tail == 30ms);
    CHECK(state.figures(due + 9ms).tail == 30ms);
    CHECK(kept(state) == 2);
    // The next run recorded ages them.
    state.record(1ms, due + 9ms);
    CHECK(kept(state) == 1);
    CHECK(state.figures(due + 9ms).tail == 1ms);
  }

  TEST_CASE("a submitter after a pause ages the samples before it decides") {
    EstimateState state = make_state();
    state.record(30ms, kT0);
    state.record(30ms, kT0);
    CHECK(state.figures(kT0 + 80ms + 1ns + 10ms).tail == Duration::zero());
    CHECK(kept(state) == 0);
  }

  TEST_CASE("a worker's record ages the samples when due") {
    EstimateState state = make_state();
    state.record(30ms, kT0);
    state.record(30ms, kT0 + 20ms);
    state.record(1ms, kT0 + 81ms);  // the first sample's time is up, the second's is not
    CHECK(kept(state) == 2);
    state.record(1ms, kT0 + 101ms);
    CHECK(kept(state) == 2);
    CHECK(state.figures(kT0 + 101ms).tail == 1ms);
  }

  TEST_CASE("after a pause, the first job of a mixed workload is decided by fresh figures" *
            doctest::timeout(60)) {
    // Two kinds, two classes, three budgets. The slow kind's runs of 30 ms make a job of 10 ms
    // implausible; once they aged out (80 ms, then a pause well past the 10 ms grace), the
    // first such job is admitted and runs.
    Runtime rt{{.workers = 2, .capacity = 64, .estimate_max_age = 80ms, .estimate_age_in_runs = 0}};
    std::vector<sandglass::JobHandle> warm;
    for (int i = 0; i < 2; ++i) {
      warm.push_back(rt.submit({.kind = "slow", .priority = Priority::normal, .budget = 20s},
                               [](JobContext&) { std::this_thread::sleep_for(30ms); }));
      warm.push_back(rt.submit({.kind = "quick", .priority = Priority::high, .budget = 5s},
                               [](JobContext&) {}));
    }
    for (sandglass::JobHandle& h : warm) CHECK(h.wait().reason == Reason::ok);
    REQUIRE(kept_of(rt, "slow") == 2);
    const sandglass::Outcome refused =
        rt.submit({.kind = "slow", .priority = Priority::high, .budget = 10ms}, [](JobContext&) {})
            .wait();
    CHECK(refused.reason == Reason::deadline_implausible);

    std::this_thread::sleep_for(300ms);
    sandglass::JobHandle quick =
        rt.submit({.kind = "quick", .priority = Priority::normal, .budget = 1s}, [](JobContext&) {});
    const sandglass::Outcome admitted =
        rt.submit({.kind = "slow", .priority = Priority::high, .budget = 10ms}, [](JobContext&) {})
            .wait();
    CHECK(admitted.reason == Reason::ok);
    CHECK(quick.wait().reason == Reason::ok);
    CHECK(kept_of(rt, "slow") == 1);  // its own run; the two of 30 ms aged out
    rt.shutdown(1s);
  }
}
