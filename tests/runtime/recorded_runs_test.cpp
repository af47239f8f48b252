// Runs measured elsewhere (Runtime::record_run) join their estimate key's samples, beside the
// runtime's own runs, and Runtime::estimate reads a job's figures as admission does.
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include "tests/runtime/fixtures.hpp"

#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using sandglass::EstimateSnapshot;
using sandglass::JobContext;
using sandglass::Outcome;
using sandglass::Reason;
using sandglass::RunEstimate;
using sandglass::Runtime;
using sandglass::State;
using sandglass::test::kForever;

namespace {

const EstimateSnapshot* find(const std::vector<EstimateSnapshot>& all, const std::string& key) {
  for (const EstimateSnapshot& e : all) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

}  // namespace

TEST_SUITE("Runtime recorded runs") {
  TEST_CASE("recorded runs join the samples of their own estimate key, which estimate reads" *
            doctest::timeout(30)) {
    Runtime rt{{.workers = 1, .capacity = 16, .estimate_max_age = kForever}};
    for (int i = 0; i < 3; ++i) rt.record_run({.kind = "query"}, 10ms);
    for (int i = 0; i < 2; ++i) rt.record_run({.kind = "query", .estimate_key = "query:report"}, 40ms);

    const std::vector<EstimateSnapshot> all = rt.estimates();
    REQUIRE(all.size() == 2);
    const EstimateSnapshot* plain = find(all, "query");
    const EstimateSnapshot* report = find(all, "query:report");
    REQUIRE(plain != nullptr);
    REQUIRE(report != nullptr);
    CHECK(plain->samples == 3);
    CHECK(plain->tail == 10ms);
    CHECK(report->samples == 2);
    CHECK(report->kind == "query");
    CHECK(report->tail == 40ms);

    const RunEstimate by_kind = rt.estimate({.kind = "query"});
    CHECK(by_kind.central == 10ms);
    CHECK(by_kind.tail == 10ms);
    const RunEstimate by_key = rt.estimate({.kind = "query", .estimate_key = "query:report"});
    CHECK(by_key.central == 40ms);
    CHECK(by_key.tail == 40ms);
    // A key nobody named has no runs: unknown, or the job's own size; and no entry is made.
    const RunEstimate unknown = rt.estimate({.kind = "query", .estimate_key = "query:other"});
    CHECK(unknown.central == 0ms);
    CHECK(unknown.tail == 0ms);
    const RunEstimate sized = rt.estimate({.kind = "resize", .expected = 5ms});
    CHECK(sized.central == 5ms);
    CHECK(sized.tail == 5ms);
    CHECK(rt.estimates().size() == 2);
  }

  TEST_CASE("a recorded run with a stated size teaches its key's ratio of actual to stated run "
            "time" *
            doctest::timeout(30)) {
    Runtime rt{{.workers = 1, .capacity = 16, .estimate_max_age = kForever}};
    // Each said 2 ms and took 20 ms: a ratio of 10.
    for (int i = 0; i < 4; ++i) rt.record_run({.kind = "resize", .expected = 2ms}, 20ms);
    const RunEstimate sized = rt.estimate({.kind = "resize", .expected = 3ms});
    CHECK(sized.central == 30ms);
    CHECK(sized.tail == 30ms);
    // Without a size, the key's run times.
    const RunEstimate unsized = rt.estimate({.kind = "resize"});
    CHECK(unsized.central == 20ms);
    CHECK(unsized.tail == 20ms);
    // Another key's size knows nothing of these ratios.
    const RunEstimate other = rt.estimate({.kind = "resize", .estimate_key = "resize:big", .expected = 3ms});
    CHECK(other.tail == 3ms);
  }

  TEST_CASE("a recorded run moves the tail that admission refuses by, beside the runtime's own "
            "runs" *
            doctest::timeout(30)) {
    Runtime rt{{.workers = 1, .capacity = 16, .estimate_max_age = kForever}};
    // One run of its own, quick.
    const Outcome own = rt.submit({.kind = "report", .budget = 10s}, [](JobContext&) {}).wait();
    REQUIRE(own.state == State::completed);
    const RunEstimate before = rt.estimate({.kind = "report"});
    REQUIRE(before.tail < 100ms);
    REQUIRE(rt.submit({.kind = "report", .budget = 200ms}, [](JobContext&) {}).wait().state ==
            State::completed);

    // A run measured elsewhere took 400 ms: the tail is that run now, and a 200 ms budget is
    // refused as a job of this key that cannot finish in time.
    rt.record_run({.kind = "report"}, 400ms);
    CHECK(rt.estimate({.kind = "report"}).tail == 400ms);
    const Outcome refused = rt.submit({.kind = "report", .budget = 200ms}, [](JobContext&) {}).wait();
    CHECK(refused.reason == Reason::deadline_implausible);
    CHECK(refused.error.find(" for report) > deadline in ") != std::string::npos);

    const std::vector<EstimateSnapshot> all = rt.estimates();
    REQUIRE(all.size() == 1);
    CHECK(all.front().samples == 3);  // two of its own, one recorded
  }

  TEST_CASE("record_run refuses a job without a kind" * doctest::timeout(30)) {
    Runtime rt{{.workers = 1, .capacity = 16}};
    CHECK_THROWS_AS(rt.record_run({.kind = ""}, 1ms), std::invalid_argument);
    CHECK(rt.estimates().empty());
  }
}
