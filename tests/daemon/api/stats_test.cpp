// LiveStats and stats_json on a moved clock: per-second buckets, the one-minute window, the
// five-minute series, histograms and estimates.
#include "daemon/api/stats.hpp"

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>

#include <latch>
#include <stdexcept>
#include <string>
#include <vector>

using namespace sandglass;
using namespace sandglass::daemon;
using namespace std::chrono_literals;

namespace {

Outcome outcome(State state, Reason reason, Duration run = 10ms, Duration left = 50ms,
                CancelCause cause = CancelCause::none, const std::string& kind = "sleep") {
  Outcome o;
  o.kind = kind;
  o.state = state;
  o.reason = reason;
  o.cause = cause;
  o.timings = {.budget = 100ms, .queue_wait = 5ms, .run_time = run, .remaining_at_start = 90ms,
               .remaining_at_end = left};
  return o;
}

boost::json::object render(const LiveStats& live, TimePoint now, const RuntimeOptions& options = {},
                           const std::vector<EstimateSnapshot>& estimates = {},
                           const RuntimeStats& runtime = {}) {
  const LiveStats::Snapshot snap = live.snapshot(now);
  const std::vector<JobRecords::View> none;
  const std::string metrics =
      "# HELP x\nsandglass_upstream_breaker_state{upstream=\"next\"} 2\n"
      "sandglass_upstream_breaker_state{upstream=\"a\\\"b\"} 0\n"
      "sandglass_sql_pool_size{database=\"main\"} 4\n"
      "sandglass_sql_pool_connections{database=\"main\"} 3\n"
      "sandglass_sql_pool_in_use{database=\"main\"} 1\n";
  return boost::json::parse(stats_json({.runtime = runtime, .options = options, .live = snap,
                                        .live_jobs = none, .estimates = estimates,
                                        .kind_metrics = metrics}))
      .as_object();
}

std::int64_t num(const boost::json::value& v) { return v.to_number<std::int64_t>(); }

}  // namespace

TEST_SUITE("LiveStats") {
  TEST_CASE("the last minute counts only outcomes of the last sixty seconds, by state reason and cause") {
    LiveStats live;
    const TimePoint t0 = TimePoint{} + 1000s;
    live.job_finished(outcome(State::completed, Reason::ok), t0);
    live.job_finished(outcome(State::completed, Reason::ok), t0 + 30s);
    live.job_finished(outcome(State::completed, Reason::completed_after_cancel, 10ms, -20ms), t0 + 30s);
    live.job_finished(outcome(State::rejected, Reason::queue_full), t0 + 40s);
    live.job_finished(outcome(State::expired, Reason::too_late_to_start), t0 + 41s);
    live.job_finished(outcome(State::cancelled, Reason::cancelled_while_running, 10ms, 50ms,
                              CancelCause::deadline), t0 + 42s);

    const auto at_61 = render(live, t0 + 61s);
    const auto& m = at_61.at("last_minute").as_object();
    CHECK(num(m.at("completed").at("total")) == 2);  // the first one is 61 s old
    CHECK(num(m.at("completed").at("late")) == 1);
    CHECK(num(m.at("completed").at("on_time")) == 1);
    CHECK(num(m.at("refused").at("by_reason").at("queue_full")) == 1);
    CHECK(num(m.at("refused").at("by_reason").at("shed")) == 0);
    CHECK(num(m.at("expired").at("by_reason").at("too_late_to_start")) == 1);
    CHECK(num(m.at("cancelled").at("by_cause").at("deadline")) == 1);
    CHECK(num(m.at("cancelled").at("by_cause").at("caller")) == 0);

    // The series still holds all of them, at their seconds; after five minutes none.
    const auto& on_time = at_61.at("series").at("on_time").as_array();
    REQUIRE(on_time.size() == LiveStats::kSeconds);
    CHECK(num(on_time[LiveStats::kSeconds - 62]) == 1);  // t0
    CHECK(num(on_time[LiveStats::kSeconds - 32]) == 1);  // t0 + 30 s
    CHECK(num(at_61.at("series").at("late").as_array()[LiveStats::kSeconds - 32]) == 1);
    const auto later = render(live, t0 + 400s);
    for (const char* s : {"on_time", "late", "refused", "expired", "cancelled", "failed"}) {
      for (const auto& v : later.at("series").at(s).as_array()) CHECK(num(v) == 0);
    }
    CHECK(num(later.at("last_minute").at("completed").at("total")) == 0);
  }

  TEST_CASE("a bucket reused after five minutes starts from zero") {
    LiveStats live;
    const TimePoint t0 = TimePoint{} + 5000s;
    live.job_finished(outcome(State::failed, Reason::handler_error), t0);
    live.job_finished(outcome(State::failed, Reason::handler_error), t0 + 300s);  // same bucket
    const auto s = render(live, t0 + 300s);
    CHECK(num(s.at("last_minute").at("failed").at("total")) == 1);
    CHECK(num(s.at("last_minute").at("failed").at("by_reason").at("handler_error")) == 1);
  }

  TEST_CASE("histograms count admitted and started jobs") {
    LiveStats live;
    const TimePoint t = TimePoint{} + 100s;
    for (int i = 1; i <= 10; ++i) {
      live.job_finished(outcome(State::completed, Reason::ok, std::chrono::milliseconds{i * 10}), t);
    }
    live.job_finished(outcome(State::rejected, Reason::budget_too_small), t);  // never admitted
    live.job_finished(outcome(State::cancelled, Reason::cancelled_while_running, 900ms, 5ms,
                              CancelCause::caller), t);  // says nothing of the kind
    live.job_finished(outcome(State::completed, Reason::ok, 10ms, 0ms, CancelCause::none, "spin"), t);
    const auto s = render(live, t, {.kind_limits = {{"spin", 2}}});
    const auto& h = s.at("histograms").as_object();
    std::int64_t budgets = 0;
    for (const auto& v : h.at("budget").as_array()) budgets += num(v);
    CHECK(budgets == 12);
    // 100 ms falls in the bucket whose bound is 100.
    const auto& le = h.at("le_ms").as_array();
    std::size_t b100 = 0;
    while (num(le[b100]) != 100) ++b100;
    CHECK(num(h.at("budget").as_array()[b100]) == 12);
    CHECK(num(s.at("bulkheads").at("spin").at("limit")) == 2);
    CHECK(num(s.at("bulkheads").at("spin").at("running")) == 0);
    CHECK(s.at("estimates").as_object().empty());  // none given: the daemon keeps none itself
  }

  TEST_CASE("the estimates are the runtime's own, one per estimate key, from whole runs only" *
            doctest::timeout(30)) {
    // Several kinds and keys, classes and budgets; the runtime learns from completed and failed
    // runs and from runs its deadline stopped, not from a run cancelled by its caller.
    Runtime rt{{.workers = 2, .capacity = 64}};
    struct Job {
      std::string kind, key;
      Priority priority;
      Duration budget;
      bool fail = false;
    };
    const std::vector<Job> jobs{
        {"sleep", "", Priority::normal, 5s},         {"sleep", "", Priority::high, 2s},
        {"sleep", "", Priority::sheddable, 10s},     {"exec", "exec:fast", Priority::critical, 3s},
        {"exec", "exec:fast", Priority::normal, 4s, true}, {"exec", "exec:slow", Priority::high, 6s},
    };
    for (const Job& j : jobs) {
      const bool fail = j.fail;
      const Outcome o = rt.submit({.kind = j.kind, .priority = j.priority, .budget = j.budget,
                                   .estimate_key = j.key},
                                  [fail](JobContext&) {
                                    if (fail) throw std::runtime_error{"failed on purpose"};
                                  })
                            .wait();
      REQUIRE(o.state == (fail ? State::failed : State::completed));
    }
    std::latch running{1};
    const JobHandle cancelled = rt.submit({.kind = "exec", .budget = 10s, .estimate_key = "exec:slow"},
                                          [&running](JobContext& ctx) {
                                            running.count_down();
                                            for (;;) ctx.checkpoint();
                                          });
    running.wait();
    cancelled.cancel();
    REQUIRE(cancelled.wait().cause == CancelCause::caller);

    const auto s = render(LiveStats{}, TimePoint{} + 1s, {}, rt.estimates());
    const auto& e = s.at("estimates").as_object();
    CHECK(e.size() == 3);
    CHECK(e.at("sleep").at("kind").as_string() == "sleep");
    CHECK(num(e.at("sleep").at("samples")) == 3);
    CHECK(e.at("exec:fast").at("kind").as_string() == "exec");
    CHECK(num(e.at("exec:fast").at("samples")) == 2);  // the failed run counts
    CHECK(e.at("exec:slow").at("kind").as_string() == "exec");
    CHECK(num(e.at("exec:slow").at("samples")) == 1);  // the cancelled one does not
    for (const auto& [key, v] : e) {
      CAPTURE(std::string{key});
      CHECK(num(v.at("tail_ms")) >= num(v.at("mean_ms")));
      CHECK(num(v.at("kept")) <= num(v.at("samples")));
    }
    // The figures are the runtime's, rounded down to whole milliseconds.
    for (const EstimateSnapshot& snap : rt.estimates()) {
      CAPTURE(snap.key);
      CHECK(num(e.at(snap.key).at("mean_ms")) ==
            std::chrono::duration_cast<std::chrono::milliseconds>(snap.mean).count());
      CHECK(num(e.at(snap.key).at("tail_ms")) ==
            std::chrono::duration_cast<std::chrono::milliseconds>(snap.tail).count());
    }
  }

  TEST_CASE("the admission state is the runtime's: the standing-queue rule and the measured margin") {
    RuntimeStats runtime;
    runtime.standing_queue = true;
    runtime.queue_delay_target = 2500us;
    runtime.start_error_tail = 1234567ns;
    runtime.run_error_tail = 3ms;
    runtime.prediction_margin = 4ms;
    const LiveStats live;
    const auto s = render(live, TimePoint{} + 1s, {}, {}, runtime);
    const boost::json::object& a = s.at("admission").as_object();
    CHECK(a.at("standing_queue").as_bool());
    CHECK(a.at("queue_delay_target_ms").as_double() == 2.5);
    CHECK(a.at("start_error_tail_ms").as_double() == 1.234);
    CHECK(a.at("run_error_tail_ms").as_double() == 3.0);
    CHECK(a.at("margin_ms").as_double() == 4.0);
  }

  TEST_CASE("breaker states and pool use come from the kinds' own series") {
    LiveStats live;
    const auto s = render(live, TimePoint{} + 1s);
    CHECK(s.at("breakers").at("next").as_string() == "open");
    CHECK(s.at("breakers").at("a\"b").as_string() == "closed");
    CHECK(num(s.at("sql_pools").at("main").at("size")) == 4);
    CHECK(num(s.at("sql_pools").at("main").at("connections")) == 3);
    CHECK(num(s.at("sql_pools").at("main").at("in_use")) == 1);
  }
}
