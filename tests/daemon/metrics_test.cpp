#include "daemon/metrics.hpp"

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <latch>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::CancelCause;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::RuntimeStats;
using sandglass::State;
using sandglass::Timings;
using sandglass::daemon::DaemonMetrics;

namespace {

// The value of the sample `series` (name and labels exactly as rendered), or "absent".
std::string sample(const std::string& text, std::string_view series) {
  std::istringstream lines{text};
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > series.size() && line.starts_with(series) && line[series.size()] == ' ') {
      return line.substr(series.size() + 1);
    }
  }
  return "absent";
}

Outcome outcome(State state, Reason reason, CancelCause cause = CancelCause::none,
                Timings timings = {}) {
  return Outcome{.id = 987654321, .kind = "sleep", .state = state, .reason = reason,
                 .cause = cause, .timings = timings};
}

std::string render(DaemonMetrics& metrics) { return metrics.render(RuntimeStats{}, 2, false); }

// Every outcome the runtime can produce, once each.
void record_every_outcome(DaemonMetrics& metrics) {
  const Timings ran{.budget = 1s, .queue_wait = 1ms, .run_time = 20ms,
                    .remaining_at_start = 999ms, .remaining_at_end = 979ms};
  const Timings queued{.budget = 1s, .queue_wait = 5ms, .remaining_at_end = -5ms};
  const Timings refused{.budget = 1s};
  const std::vector<Outcome> outcomes = {
      outcome(State::completed, Reason::ok, CancelCause::none, ran),
      outcome(State::completed, Reason::completed_after_cancel, CancelCause::caller, ran),
      outcome(State::failed, Reason::handler_error, CancelCause::none, ran),
      outcome(State::rejected, Reason::shutting_down, CancelCause::none, refused),
      outcome(State::rejected, Reason::budget_too_small, CancelCause::none, refused),
      outcome(State::rejected, Reason::deadline_implausible, CancelCause::none, refused),
      outcome(State::rejected, Reason::queue_full, CancelCause::none, refused),
      outcome(State::rejected, Reason::shed, CancelCause::none, queued),
      outcome(State::expired, Reason::expired_in_queue, CancelCause::none, queued),
      outcome(State::expired, Reason::too_late_to_start, CancelCause::none, queued),
      outcome(State::cancelled, Reason::cancelled_in_queue, CancelCause::upstream, queued),
      outcome(State::cancelled, Reason::cancelled_while_running, CancelCause::shutdown, ran),
  };
  for (const Outcome& o : outcomes) {
    metrics.job_submitted(o.kind, Priority::high);
    metrics.job_finished(o, Priority::high);
  }
  metrics.http_response(200);
  metrics.http_response(503);
}

}  // namespace

TEST_SUITE("DaemonMetrics") {
  TEST_CASE("a completed job is counted by kind priority state and reason") {
    DaemonMetrics metrics;
    metrics.job_submitted("sleep", Priority::normal);
    metrics.job_finished(outcome(State::completed, Reason::ok), Priority::normal);
    const std::string text = render(metrics);
    CHECK(sample(text, R"(sandglass_jobs_submitted_total{kind="sleep",priority="normal"})") ==
          "1");
    CHECK(sample(text,
                 R"(sandglass_jobs_total{kind="sleep",priority="normal",reason="ok",state="completed"})") ==
          "1");
    CHECK(sample(text, R"(sandglass_completed_after_cancel_total{kind="sleep"})") == "0");
    CHECK(sample(text, R"(sandglass_work_after_deadline_seconds_total{kind="sleep"})") == "0");
    CHECK(sample(text, R"(sandglass_run_time_seconds_count{kind="sleep"})") == "1");
  }

  TEST_CASE("each rejection reason is counted and a job rejected at admission is not observed as admitted") {
    DaemonMetrics metrics;
    for (Reason reason : {Reason::queue_full, Reason::deadline_implausible, Reason::shutting_down,
                          Reason::budget_too_small}) {
      Outcome o = outcome(State::rejected, reason, CancelCause::none, Timings{.budget = 1s});
      o.kind = "spin";
      metrics.job_submitted(o.kind, Priority::sheddable);
      metrics.job_finished(o, Priority::sheddable);
    }
    const std::string text = render(metrics);
    for (std::string_view reason :
         {"queue_full", "deadline_implausible", "shutting_down", "budget_too_small"}) {
      CAPTURE(reason);
      CHECK(sample(text, std::string{R"(sandglass_rejections_total{kind="spin",reason=")"} +
                             std::string{reason} + "\"}") == "1");
      CHECK(sample(text, std::string{R"(sandglass_jobs_total{kind="spin",priority="sheddable",reason=")"} +
                             std::string{reason} + R"(",state="rejected"})") == "1");
    }
    CHECK(sample(text, R"(sandglass_jobs_submitted_total{kind="spin",priority="sheddable"})") ==
          "4");
    CHECK(sample(text, R"(sandglass_budget_granted_seconds_count{kind="spin"})") == "0");
    CHECK(sample(text, R"(sandglass_queue_wait_seconds_count{kind="spin"})") == "0");
    CHECK(sample(text, R"(sandglass_run_time_seconds_count{kind="spin"})") == "0");
  }

  TEST_CASE("a shed job is a rejection that was admitted and waited in the queue") {
    DaemonMetrics metrics;
    metrics.job_finished(outcome(State::rejected, Reason::shed, CancelCause::none,
                                 Timings{.budget = 1s, .queue_wait = 250ms}),
                         Priority::sheddable);
    const std::string text = render(metrics);
    CHECK(sample(text, R"(sandglass_rejections_total{kind="sleep",reason="shed"})") == "1");
    CHECK(sample(text, R"(sandglass_budget_granted_seconds_count{kind="sleep"})") == "1");
    CHECK(sample(text, R"(sandglass_queue_wait_seconds_count{kind="sleep"})") == "1");
    CHECK(sample(text, R"(sandglass_queue_wait_seconds_sum{kind="sleep"})") == "0.25");
    CHECK(sample(text, R"(sandglass_remaining_at_dispatch_seconds_count{kind="sleep"})") == "0");
    CHECK(sample(text, R"(sandglass_run_time_seconds_count{kind="sleep"})") == "0");
  }

  TEST_CASE("a cancelled job is counted by the cause of its cancellation") {
    DaemonMetrics metrics;
    metrics.job_finished(
        outcome(State::cancelled, Reason::cancelled_while_running, CancelCause::deadline),
        Priority::normal);
    metrics.job_finished(
        outcome(State::cancelled, Reason::cancelled_in_queue, CancelCause::caller),
        Priority::normal);
    metrics.job_finished(
        outcome(State::cancelled, Reason::cancelled_in_queue, CancelCause::caller),
        Priority::critical);
    const std::string text = render(metrics);
    CHECK(sample(text, R"(sandglass_cancellations_total{cause="caller",kind="sleep"})") == "2");
    CHECK(sample(text, R"(sandglass_cancellations_total{cause="deadline",kind="sleep"})") == "1");
    CHECK(sample(text,
                 R"(sandglass_jobs_total{kind="sleep",priority="normal",reason="cancelled_in_queue",state="cancelled"})") ==
          "1");
    CHECK(sample(text,
                 R"(sandglass_jobs_total{kind="sleep",priority="critical",reason="cancelled_in_queue",state="cancelled"})") ==
          "1");
    CHECK(sample(text, R"(sandglass_run_time_seconds_count{kind="sleep"})") == "1");
  }

  TEST_CASE("a job that completed after a cancellation is counted as completed and not as cancelled") {
    DaemonMetrics metrics;
    metrics.job_finished(
        outcome(State::completed, Reason::completed_after_cancel, CancelCause::caller),
        Priority::normal);
    const std::string text = render(metrics);
    CHECK(sample(text, R"(sandglass_completed_after_cancel_total{kind="sleep"})") == "1");
    CHECK(sample(text,
                 R"(sandglass_jobs_total{kind="sleep",priority="normal",reason="completed_after_cancel",state="completed"})") ==
          "1");
    CHECK(sample(text, R"(sandglass_cancellations_total{cause="caller",kind="sleep"})") ==
          "absent");
  }

  TEST_CASE("histograms count a started job's timings in buckets that include their upper bound") {
    DaemonMetrics metrics;
    metrics.job_finished(outcome(State::completed, Reason::ok, CancelCause::none,
                                 Timings{.budget = 1s, .queue_wait = 250ms, .run_time = 500ms,
                                         .remaining_at_start = 750ms,
                                         .remaining_at_end = 250ms}),
                         Priority::normal);
    const std::string text = render(metrics);
    CHECK(sample(text, R"(sandglass_budget_granted_seconds_bucket{kind="sleep",le="0.5"})") == "0");
    CHECK(sample(text, R"(sandglass_budget_granted_seconds_bucket{kind="sleep",le="1"})") == "1");
    CHECK(sample(text, R"(sandglass_budget_granted_seconds_sum{kind="sleep"})") == "1");
    CHECK(sample(text, R"(sandglass_queue_wait_seconds_bucket{kind="sleep",le="0.1"})") == "0");
    CHECK(sample(text, R"(sandglass_queue_wait_seconds_bucket{kind="sleep",le="0.25"})") == "1");
    CHECK(sample(text, R"(sandglass_remaining_at_dispatch_seconds_bucket{kind="sleep",le="0.5"})") ==
          "0");
    CHECK(sample(text, R"(sandglass_remaining_at_dispatch_seconds_bucket{kind="sleep",le="1"})") ==
          "1");
    CHECK(sample(text, R"(sandglass_remaining_at_dispatch_seconds_sum{kind="sleep"})") == "0.75");
    CHECK(sample(text, R"(sandglass_run_time_seconds_bucket{kind="sleep",le="0.25"})") == "0");
    CHECK(sample(text, R"(sandglass_run_time_seconds_bucket{kind="sleep",le="0.5"})") == "1");
    CHECK(sample(text, R"(sandglass_run_time_seconds_bucket{kind="sleep",le="+Inf"})") == "1");
    CHECK(sample(text, R"(sandglass_run_time_seconds_count{kind="sleep"})") == "1");
    CHECK(sample(text, R"(sandglass_work_after_deadline_seconds_total{kind="sleep"})") == "0");
  }

  TEST_CASE("histogram buckets run from 100 microseconds to five minutes") {
    DaemonMetrics metrics;
    metrics.job_finished(outcome(State::completed, Reason::ok), Priority::normal);
    const std::string text = render(metrics);
    std::vector<std::string> bounds;
    const std::string prefix = R"(sandglass_run_time_seconds_bucket{kind="sleep",le=")";
    std::istringstream lines{text};
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with(prefix)) {
        bounds.push_back(line.substr(prefix.size(), line.find('"', prefix.size()) - prefix.size()));
      }
    }
    const std::vector<std::string> expected = {
        "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
        "0.05",   "0.1",     "0.25",   "0.5",   "1",      "2.5",   "5",    "10",
        "25",     "50",      "100",    "300",   "+Inf"};
    CHECK(bounds == expected);
  }

  TEST_CASE("a job that started after its deadline is observed with zero time remaining at dispatch") {
    DaemonMetrics metrics;
    metrics.job_finished(outcome(State::completed, Reason::ok, CancelCause::none,
                                 Timings{.budget = 1s, .queue_wait = 1100ms, .run_time = 0ms,
                                         .remaining_at_start = -100ms,
                                         .remaining_at_end = -100ms}),
                         Priority::normal);
    const std::string text = render(metrics);
    CHECK(sample(text, R"(sandglass_remaining_at_dispatch_seconds_bucket{kind="sleep",le="0.0001"})") ==
          "1");
    CHECK(sample(text, R"(sandglass_remaining_at_dispatch_seconds_sum{kind="sleep"})") == "0");
  }

  TEST_CASE("work after the deadline counts only the run time spent past the deadline") {
    DaemonMetrics metrics;
    // Ran 500 ms and ended 250 ms late: 250 ms past the deadline.
    metrics.job_finished(outcome(State::completed, Reason::ok, CancelCause::none,
                                 Timings{.run_time = 500ms, .remaining_at_end = -250ms}),
                         Priority::normal);
    // Started 875 ms late and ran 125 ms: all of its run time.
    metrics.job_finished(outcome(State::failed, Reason::handler_error, CancelCause::none,
                                 Timings{.run_time = 125ms, .remaining_at_end = -1s}),
                         Priority::normal);
    // Ended in time.
    metrics.job_finished(outcome(State::completed, Reason::ok, CancelCause::none,
                                 Timings{.run_time = 500ms, .remaining_at_end = 1ms}),
                         Priority::normal);
    // Never ran.
    metrics.job_finished(outcome(State::expired, Reason::expired_in_queue, CancelCause::none,
                                 Timings{.queue_wait = 2s, .remaining_at_end = -2s}),
                         Priority::normal);
    const std::string text = render(metrics);
    CHECK(sample(text, R"(sandglass_work_after_deadline_seconds_total{kind="sleep"})") == "0.375");
  }

  TEST_CASE("gauges show what render is given and every priority class is always present") {
    DaemonMetrics metrics;
    std::string text = metrics.render(RuntimeStats{}, 4, false);
    for (std::string_view priority : {"critical", "high", "normal", "sheddable"}) {
      CAPTURE(priority);
      CHECK(sample(text, std::string{R"(sandglass_queue_depth{priority=")"} +
                             std::string{priority} + "\"}") == "0");
    }
    CHECK(sample(text, "sandglass_draining") == "0");

    RuntimeStats stats;
    stats.queued_by_priority = {2, 0, 5, 1};
    stats.queued = 8;
    stats.running = 3;
    stats.peak_queued = 9;
    text = metrics.render(stats, 4, true);
    CHECK(sample(text, R"(sandglass_queue_depth{priority="critical"})") == "2");
    CHECK(sample(text, R"(sandglass_queue_depth{priority="high"})") == "0");
    CHECK(sample(text, R"(sandglass_queue_depth{priority="normal"})") == "5");
    CHECK(sample(text, R"(sandglass_queue_depth{priority="sheddable"})") == "1");
    CHECK(sample(text, "sandglass_running_jobs") == "3");
    CHECK(sample(text, "sandglass_workers") == "4");
    CHECK(sample(text, "sandglass_draining") == "1");
    CHECK(sample(text, "sandglass_queue_peak_depth") == "9");
  }

  TEST_CASE("the admission gauges show the standing-queue rule and the measured prediction error") {
    DaemonMetrics metrics;
    RuntimeStats stats;
    stats.standing_queue = true;
    stats.queue_delay_target = std::chrono::milliseconds{4};
    stats.start_error_tail = std::chrono::microseconds{1500};
    stats.run_error_tail = std::chrono::milliseconds{2};
    stats.prediction_margin = std::chrono::milliseconds{3};
    const std::string text = metrics.render(stats, 4, false);
    CHECK(sample(text, "sandglass_admission_standing_queue") == "1");
    CHECK(sample(text, "sandglass_admission_queue_delay_target_seconds") == "0.004");
    CHECK(sample(text, R"(sandglass_admission_prediction_error_seconds{of="start"})") == "0.0015");
    CHECK(sample(text, R"(sandglass_admission_prediction_error_seconds{of="run"})") == "0.002");
    CHECK(sample(text, R"(sandglass_admission_prediction_error_seconds{of="finish"})") == "0.003");
  }

  TEST_CASE("http responses are counted by status code and statuses outside 100 to 599 as other") {
    DaemonMetrics metrics;
    metrics.http_response(200);
    metrics.http_response(200);
    metrics.http_response(429);
    metrics.http_response(599);
    metrics.http_response(99);
    metrics.http_response(600);
    const std::string text = render(metrics);
    CHECK(sample(text, R"(sandglass_http_responses_total{code="200"})") == "2");
    CHECK(sample(text, R"(sandglass_http_responses_total{code="429"})") == "1");
    CHECK(sample(text, R"(sandglass_http_responses_total{code="599"})") == "1");
    CHECK(sample(text, R"(sandglass_http_responses_total{code="other"})") == "2");
    CHECK(sample(text, R"(sandglass_http_responses_total{code="600"})") == "absent");
  }

  TEST_CASE("no label carries a job id and every label comes from a bounded set") {
    DaemonMetrics metrics;
    record_every_outcome(metrics);
    const std::string text = render(metrics);
    CHECK(text.find("987654321") == std::string::npos);

    const std::set<std::string> allowed = {"kind", "priority", "state", "reason", "cause", "code",
                                           "le", "of"};
    std::set<std::string> seen;
    std::istringstream lines{text};
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("#")) continue;
      const std::size_t open = line.find('{');
      if (open == std::string::npos) continue;
      // Label values here never contain '=', ',' or '"'.
      std::size_t at = open + 1;
      while (at < line.size() && line[at] != '}') {
        const std::size_t eq = line.find('=', at);
        const std::size_t close = line.find('"', eq + 2);
        REQUIRE(close != std::string::npos);
        seen.insert(line.substr(at, eq - at));
        at = close + 1;
        if (line[at] == ',') ++at;
      }
    }
    for (const std::string& name : seen) {
      CAPTURE(name);
      CHECK(allowed.contains(name));
    }
    CHECK(seen == allowed);
  }

  TEST_CASE("counts from many threads are all recorded" * doctest::timeout(30)) {
    DaemonMetrics metrics;
    constexpr int kThreads = 4;
    constexpr int kJobsPerThread = 2000;
    std::latch start{kThreads + 1};
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        Outcome o = outcome(State::completed, Reason::ok);
        o.kind = t % 2 == 0 ? "sleep" : "spin";
        start.arrive_and_wait();
        for (int i = 0; i < kJobsPerThread; ++i) {
          metrics.job_submitted(o.kind, Priority::normal);
          metrics.job_finished(o, Priority::normal);
          metrics.http_response(200);
        }
      });
    }
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int i = 0; i < 50; ++i) static_cast<void>(render(metrics));
    });
    threads.clear();  // joins

    const std::string text = render(metrics);
    for (std::string_view kind : {"sleep", "spin"}) {
      CAPTURE(kind);
      const std::string k{kind};
      CHECK(sample(text, R"(sandglass_jobs_submitted_total{kind=")" + k +
                             R"(",priority="normal"})") == "4000");
      CHECK(sample(text, R"(sandglass_jobs_total{kind=")" + k +
                             R"(",priority="normal",reason="ok",state="completed"})") == "4000");
      CHECK(sample(text, R"(sandglass_run_time_seconds_count{kind=")" + k + R"("})") == "4000");
    }
    CHECK(sample(text, R"(sandglass_http_responses_total{code="200"})") == "8000");
  }

  TEST_CASE("the rendered text passes promtool check metrics") {
    const std::filesystem::path promtool{"/usr/bin/promtool"};
    if (!std::filesystem::exists(promtool)) {
      MESSAGE("skipped: /usr/bin/promtool is not installed");
      return;
    }
    DaemonMetrics metrics;
    record_every_outcome(metrics);
    RuntimeStats stats;
    stats.queued_by_priority = {1, 2, 3, 4};
    const std::string text = metrics.render(stats, 2, true);

    const std::filesystem::path dir = std::filesystem::temp_directory_path();
    const std::string stem = "sandglass_metrics_test_" + std::to_string(::getpid());
    const std::filesystem::path input = dir / (stem + ".prom");
    const std::filesystem::path output = dir / (stem + ".out");
    std::ofstream{input} << text;
    const std::string command = promtool.string() + " check metrics < " + input.string() + " > " +
                                output.string() + " 2>&1";
    const int status = std::system(command.c_str());
    std::ostringstream report;
    report << std::ifstream{output}.rdbuf();
    std::filesystem::remove(input);
    std::filesystem::remove(output);

    INFO("promtool says: ", report.str());
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}
