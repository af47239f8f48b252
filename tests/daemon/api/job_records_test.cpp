#include "daemon/api/job_records.hpp"

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>

#include <chrono>
#include <latch>
#include <mutex>
#include <vector>

using namespace std::chrono_literals;
using sandglass::Outcome;
using sandglass::daemon::Arrival;
using sandglass::daemon::JobRecords;

namespace {
Outcome completed(sandglass::JobId id, std::string result = R"({"n":1})") {
  Outcome o;
  o.id = id;
  o.kind = "sleep";
  o.state = sandglass::State::completed;
  o.reason = sandglass::Reason::ok;
  o.result = std::move(result);
  o.timings = {.budget = 1500ms, .queue_wait = 2ms, .run_time = 7900us, .remaining_at_start = 1498ms,
               .remaining_at_end = -3ms};
  return o;
}
// One job of kind "wait" on its own runtime, running until `release` opens; its outcome goes to
// `records`, which outlives the runtime.
struct HeldJob {
  JobRecords records{{}};
  sandglass::Runtime rt{{.workers = 1}};
  std::latch started{1};
  std::latch release{1};
  sandglass::JobHandle job = rt.submit(
      {.kind = "wait"},
      [this](sandglass::JobContext& ctx) {
        started.count_down();
        release.wait();  // not at a checkpoint: a cancellation waits
        ctx.checkpoint();
      },
      [this](const Outcome& o) { records.finish(o); });
};

// One quick job on its own runtime whose outcome callback finishes its record in `records`, as
// the daemon's does; constructed once that callback has returned, before anyone called add().
// `records` must outlive it.
struct FinishedBeforeAdd {
  explicit FinishedBeforeAdd(JobRecords& r) : records{r} { finished.wait(); }
  JobRecords& records;
  std::latch finished{1};
  sandglass::Runtime rt{{.workers = 1}};
  sandglass::JobHandle job = rt.submit({.kind = "quick", .budget = 5s}, [](sandglass::JobContext&) {},
                                       [this](const Outcome& o) {
                                         records.finish(o);
                                         finished.count_down();
                                       });
};

}  // namespace

TEST_SUITE("job records") {
  TEST_CASE("a terminal record carries state reason result and whole-millisecond timings") {
    JobRecords records{{}};
    records.finish(completed(7));
    const auto json = records.find_json(7);
    REQUIRE(json.has_value());
    const auto r = boost::json::parse(*json).as_object();
    CHECK(r.at("id").to_number<std::uint64_t>() == 7);
    CHECK(r.at("state").as_string() == "completed");
    CHECK(r.at("reason").as_string() == "ok");
    CHECK(r.if_contains("cause") == nullptr);
    CHECK(r.at("result").as_object().at("n").as_int64() == 1);
    const auto& t = r.at("timings").as_object();
    CHECK(t.at("budget_ms").as_int64() == 1500);
    CHECK(t.at("queue_ms").as_int64() == 2);
    CHECK(t.at("run_ms").as_int64() == 7);
    CHECK(t.at("remaining_ms").as_int64() == -3);
    CHECK(t.at("intake_ms").as_int64() == 0);  // finished without add(): no intake known
  }

  TEST_CASE("the arrival given to add is in the record and reaches every waiter" *
            doctest::timeout(10)) {
    HeldJob held;
    JobRecords& records = held.records;
    const sandglass::JobHandle& job = held.job;
    records.add(job, "wait", {.intake = 42ms, .budget = 900ms});
    held.started.wait();
    const auto live = boost::json::parse(*records.find_json(job.id())).as_object();
    CHECK(live.at("timings").as_object().at("intake_ms").as_int64() == 42);
    CHECK(live.at("timings").as_object().at("budget_ms").as_int64() == 900);
    std::vector<sandglass::Duration> told;
    std::mutex told_mu;
    std::latch told_twice{2};
    const auto waiter = [&](const Outcome&, const Arrival& arrival) {
      {
        const std::lock_guard lock{told_mu};
        told.push_back(arrival.intake);
        told.push_back(arrival.budget.value_or(sandglass::Duration::zero()));
      }
      told_twice.count_down();
    };
    REQUIRE(records.wait(job.id(), waiter));  // waits for the outcome
    held.release.count_down();
    job.wait();
    REQUIRE(records.wait(job.id(), waiter));  // called at once, or from finish if it is still to come
    told_twice.wait();
    const std::lock_guard lock{told_mu};
    CHECK(told == std::vector<sandglass::Duration>{42ms, 900ms, 42ms, 900ms});
    const auto r = boost::json::parse(*records.find_json(job.id())).as_object();
    CHECK(r.at("timings").as_object().at("intake_ms").as_int64() == 42);
    CHECK(r.at("timings").as_object().at("budget_ms").as_int64() == 900);
  }

  TEST_CASE("a result that is not JSON is kept as a string") {
    JobRecords records{{}};
    records.finish(completed(1, "plain words"));
    const auto r = boost::json::parse(*records.find_json(1)).as_object();
    CHECK(r.at("result").as_string() == "plain words");
  }

  TEST_CASE("the oldest terminal records are forgotten past the count and byte limits") {
    JobRecords by_count{{.max_count = 2}};
    for (sandglass::JobId id = 1; id <= 3; ++id) by_count.finish(completed(id));
    CHECK_FALSE(by_count.find_json(1).has_value());
    CHECK(by_count.find_json(2).has_value());
    CHECK(by_count.find_json(3).has_value());

    JobRecords by_bytes{{.max_bytes = 20}};
    by_bytes.finish(completed(1, std::string(15, 'x')));
    by_bytes.finish(completed(2, std::string(15, 'y')));
    CHECK_FALSE(by_bytes.find_json(1).has_value());
    CHECK(by_bytes.find_json(2).has_value());
    CHECK(by_bytes.size() == 1);
  }

  TEST_CASE("finishing twice keeps the first outcome") {
    JobRecords records{{}};
    records.finish(completed(4, R"({"first":true})"));
    records.finish(completed(4, R"({"second":true})"));
    const auto r = boost::json::parse(*records.find_json(4)).as_object();
    CHECK(r.at("result").as_object().contains("first"));
  }

  TEST_CASE("an unknown id has no record and cancelling it does nothing") {
    JobRecords records{{}};
    records.cancel(99);
    CHECK_FALSE(records.find_json(99).has_value());
    CHECK(records.size() == 0);
  }

  TEST_CASE("a live job cancelled by DELETE says cause caller until its outcome arrives" *
            doctest::timeout(10)) {
    HeldJob held;
    JobRecords& records = held.records;
    const sandglass::JobHandle& job = held.job;
    records.add(job, "wait");
    held.started.wait();
    auto live = boost::json::parse(*records.find_json(job.id())).as_object();
    CHECK(live.at("state").as_string() == "running");
    CHECK(live.at("reason").is_null());
    CHECK(live.if_contains("cause") == nullptr);
    records.cancel(job.id());
    live = boost::json::parse(*records.find_json(job.id())).as_object();
    CHECK(live.at("state").as_string() == "running");
    CHECK(live.at("cause").as_string() == "caller");
    held.release.count_down();
    REQUIRE(records.outcome_until(job.id(), sandglass::Deadline::never()).has_value());
    const auto r = boost::json::parse(*records.find_json(job.id())).as_object();
    CHECK(r.at("state").as_string() == "cancelled");
    CHECK(r.at("cause").as_string() == "caller");
  }

  TEST_CASE("a record turns terminal when finished, not when the runtime published the outcome" *
            doctest::timeout(10)) {
    // The daemon counts an outcome in /v1/stats and /metrics in the outcome callback, which runs
    // after the runtime published the outcome to the handle, and then finishes the record: a
    // record that read the handle's outcome was terminal before the stats counted it.
    JobRecords records{{}};
    std::latch finish_now{1};
    std::latch finished{1};
    sandglass::Runtime rt{{.workers = 1}};
    const sandglass::JobHandle job = rt.submit(
        {.kind = "quick", .budget = 5s}, [](sandglass::JobContext&) {},
        [&](const Outcome& o) {
          finish_now.wait();  // the daemon's stats and metrics would count it here
          records.finish(o);
          finished.count_down();
        });
    records.add(job, "quick");
    REQUIRE(job.wait().state == sandglass::State::completed);  // published, not yet finished
    const auto live = boost::json::parse(*records.find_json(job.id())).as_object();
    CHECK(live.at("state").as_string() == "running");
    CHECK(live.at("reason").is_null());
    REQUIRE(records.view(job.id()).has_value());
    CHECK_FALSE(records.view(job.id())->outcome.has_value());
    CHECK(records.live_ids() == std::vector<sandglass::JobId>{job.id()});
    CHECK_FALSE(records.outcome(job.id()).has_value());
    CHECK_FALSE(records.outcome_until(job.id(), sandglass::Deadline::after(0s)).has_value());

    finish_now.count_down();
    const auto o = records.outcome_until(job.id(), sandglass::Deadline::never());
    REQUIRE(o.has_value());
    CHECK(o->state == sandglass::State::completed);
    const auto r = boost::json::parse(*records.find_json(job.id())).as_object();
    CHECK(r.at("state").as_string() == "completed");
    CHECK(records.live_ids().empty());
    finished.wait();  // the callback is done with `records` before the runtime goes
  }

  TEST_CASE("a record finished and forgotten before its add stays forgotten and pushes out no newer one" *
            doctest::timeout(10)) {
    // The runtime runs the outcome callback (finish) as soon as the job ends, which can be before
    // the submitter's add(). With more than max_count outcomes in between, finish's record is
    // forgotten first; add() used to create it again, so the oldest outcome came back as the
    // newest and a newer record was forgotten in its place.
    JobRecords records{{.max_count = 2}};
    const FinishedBeforeAdd done{records};
    const sandglass::JobHandle& early = done.job;
    REQUIRE(records.find_json(early.id()).has_value());
    constexpr sandglass::JobId kOthers = 1000;  // ids the runtime above never hands out
    for (sandglass::JobId id = kOthers; id < kOthers + 3; ++id) records.finish(completed(id));
    CHECK_FALSE(records.find_json(early.id()).has_value());
    records.add(early, "quick", {.intake = 1ms});

    CHECK_FALSE(records.find_json(early.id()).has_value());
    CHECK_FALSE(records.outcome(early.id()).has_value());
    bool told = false;
    CHECK_FALSE(records.wait(early.id(), [&told](const Outcome&, const Arrival&) { told = true; }));
    CHECK_FALSE(told);
    CHECK(records.live_ids().empty());
    CHECK(records.size() == 2);
    CHECK(records.find_json(kOthers + 1).has_value());
    CHECK(records.find_json(kOthers + 2).has_value());
    // The next outcomes go on forgetting the oldest first, with no stale entry among them.
    records.finish(completed(kOthers + 3));
    CHECK_FALSE(records.find_json(kOthers + 1).has_value());
    CHECK(records.find_json(kOthers + 2).has_value());
    CHECK(records.find_json(kOthers + 3).has_value());
    CHECK(records.size() == 2);
  }

  TEST_CASE("a record finished before its add keeps the arrival add gives" * doctest::timeout(10)) {
    JobRecords records{{}};
    const FinishedBeforeAdd done{records};
    const sandglass::JobHandle& early = done.job;
    records.add(early, "quick", {.intake = 7ms, .budget = 800ms});
    const auto r = boost::json::parse(*records.find_json(early.id())).as_object();
    CHECK(r.at("state").as_string() == "completed");
    CHECK(r.at("timings").as_object().at("intake_ms").as_int64() == 7);
    CHECK(r.at("timings").as_object().at("budget_ms").as_int64() == 800);
    CHECK(records.live_ids().empty());
    CHECK(records.size() == 1);
  }
}

TEST_SUITE("job records") {
  TEST_CASE("a terminal record says whether the job passed its commit point") {
    JobRecords records{{}};
    Outcome committed = completed(1);
    committed.committed = true;
    records.finish(committed);
    records.finish(completed(2));
    CHECK(boost::json::parse(*records.find_json(1)).as_object().at("committed").as_bool());
    CHECK_FALSE(boost::json::parse(*records.find_json(2)).as_object().at("committed").as_bool());
  }
}
