// Delayed starts and retries inside the budget (JobSpec::delay, JobSpec::retry): when a job
// may start, what counts as work ahead, which attempts run, why retrying stops, and exactly one
// outcome for every job, also when cancelled or shut down while it waits.
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::CancelCause;
using sandglass::CancelSource;
using sandglass::Clock;
using sandglass::Duration;
using sandglass::JobContext;
using sandglass::JobHandle;
using sandglass::JobRetry;
using sandglass::JobSpec;
using sandglass::Outcome;
using sandglass::Reason;
using sandglass::RetryStop;
using sandglass::Runtime;
using sandglass::RuntimeOptions;
using sandglass::State;

namespace {

// No jitter: every backoff wait is zero (0.0) or its whole cap (1.0).
RuntimeOptions options_with_jitter(double fraction, std::size_t workers = 2) {
  RuntimeOptions o;
  o.workers = workers;
  o.retry_random = [fraction] { return fraction; };
  return o;
}

// Counts the outcomes each job's callback got.
struct OutcomeLog {
  std::mutex mu;
  std::vector<Outcome> seen;
  sandglass::OutcomeCallback callback() {
    return [this](const Outcome& o) {
      std::lock_guard lock{mu};
      seen.push_back(o);
    };
  }
  std::size_t count() {
    std::lock_guard lock{mu};
    return seen.size();
  }
};

}  // namespace

TEST_SUITE("Runtime delayed starts") {
  TEST_CASE("a delayed job waits as scheduled and its budget counts from its start" *
            doctest::timeout(10)) {
    Runtime rt{options_with_jitter(0.0)};
    OutcomeLog log;
    const auto submitted = Clock::now();
    std::atomic<int> ran{0};
    const JobHandle job = rt.submit({.kind = "later", .budget = 300ms, .delay = 10s},
                                    [&](JobContext&) { ++ran; }, log.callback());
    const sandglass::JobProgress p = job.progress();
    CHECK(p.scheduled);
    CHECK_FALSE(job.started());
    CHECK(p.enqueued_at - submitted >= 10s);
    CHECK(p.budget == 300ms);
    CHECK(p.deadline.time_point() == p.enqueued_at + 300ms);
    CHECK(rt.stats().queued == 0);

    CHECK(job.cancel());
    const Outcome o = job.wait();
    CHECK(o.state == State::cancelled);
    CHECK(o.reason == Reason::cancelled_in_queue);
    CHECK(o.cause == CancelCause::caller);
    CHECK(o.id == job.id());
    CHECK(o.attempts.empty());
    CHECK_FALSE(job.cancel());
    rt.shutdown(1s);
    CHECK(ran == 0);
    CHECK(log.count() == 1);
    CHECK(rt.stats().count(Reason::cancelled_in_queue) == 1);
  }

  TEST_CASE("a delayed job starts no earlier than its delay, then runs as any job" *
            doctest::timeout(10)) {
    Runtime rt{options_with_jitter(0.0)};
    const auto submitted = Clock::now();
    std::atomic<Clock::rep> started_at{0};
    const JobHandle job = rt.submit({.kind = "later", .budget = 2s, .delay = 20ms}, [&](JobContext&) {
      started_at = Clock::now().time_since_epoch().count();
    });
    const Outcome o = job.wait();
    CHECK(o.state == State::completed);
    CHECK(o.reason == Reason::ok);
    CHECK(Clock::time_point{Duration{started_at.load()}} - submitted >= 20ms);
    REQUIRE(o.attempts.size() == 1);
    CHECK(o.attempts[0].state == State::completed);
    CHECK_FALSE(job.progress().scheduled);
    CHECK(rt.stats().submitted == 1);
    CHECK(rt.stats().count(Reason::ok) == 1);
  }

  TEST_CASE("delayed jobs are not work ahead: a job behind many of them is admitted" *
            doctest::timeout(10)) {
    RuntimeOptions options = options_with_jitter(0.0, 1);
    options.capacity = 2;
    Runtime rt{options};
    OutcomeLog log;
    std::vector<JobHandle> delayed;
    for (int i = 0; i < 20; ++i) {
      delayed.push_back(rt.submit({.kind = i % 2 == 0 ? "report" : "mail",
                                   .priority = i % 3 == 0 ? sandglass::Priority::high
                                                          : sandglass::Priority::normal,
                                   .budget = 1s + std::chrono::milliseconds{i},
                                   .delay = 30s},
                                  [](JobContext&) {}, log.callback()));
    }
    CHECK(rt.stats().queued == 0);
    const Outcome now = rt.submit({.kind = "mail", .priority = sandglass::Priority::sheddable,
                                   .budget = 500ms},
                                  [](JobContext&) {})
                            .wait();
    CHECK(now.state == State::completed);
    rt.shutdown(0ms);
    for (const JobHandle& h : delayed) {
      const Outcome o = h.wait();
      CHECK(o.state == State::rejected);
      CHECK(o.reason == Reason::shutting_down);
    }
    CHECK(log.count() == delayed.size());
  }

  TEST_CASE("a delayed job goes through admission at its start and may be rejected then" *
            doctest::timeout(10)) {
    RuntimeOptions options = options_with_jitter(0.0, 1);
    options.capacity = 1;
    Runtime rt{options};
    std::latch release{1};
    std::latch running{1};
    const JobHandle blocker = rt.submit({.kind = "block", .budget = 5s}, [&](JobContext&) {
      running.count_down();
      release.wait();
    });
    running.wait();
    const JobHandle queued = rt.submit({.kind = "block", .budget = 5s}, [](JobContext&) {});
    const JobHandle delayed = rt.submit({.kind = "later", .budget = 5s, .delay = 5ms}, [](JobContext&) {});
    const Outcome o = delayed.wait();  // the queue is full at its start
    CHECK(o.state == State::rejected);
    CHECK(o.reason == Reason::queue_full);
    CHECK(o.attempts.empty());
    release.count_down();
    CHECK(blocker.wait().state == State::completed);
    CHECK(queued.wait().state == State::completed);
  }

  TEST_CASE("shutdown, stop_admitting and a parent's cancellation reach a scheduled job once" *
            doctest::timeout(10)) {
    Runtime rt{options_with_jitter(0.0)};
    OutcomeLog log;
    CancelSource parent;
    const JobHandle child = rt.submit({.kind = "later", .budget = 1s, .parent = parent.token(), .delay = 30s},
                                      [](JobContext&) {}, log.callback());
    const JobHandle waiting = rt.submit({.kind = "later", .budget = 1s, .delay = 30s},
                                        [](JobContext&) {}, log.callback());
    parent.cancel(CancelCause::caller);
    const Outcome c = child.wait();
    CHECK(c.state == State::cancelled);
    CHECK(c.reason == Reason::cancelled_in_queue);
    CHECK(c.cause == CancelCause::upstream);

    rt.stop_admitting();
    const Outcome w = waiting.wait();
    CHECK(w.state == State::rejected);
    CHECK(w.reason == Reason::shutting_down);
    const Outcome late = rt.submit({.kind = "later", .budget = 1s, .delay = 1ms}, [](JobContext&) {}).wait();
    CHECK(late.reason == Reason::shutting_down);
    rt.shutdown(1s);
    CHECK(log.count() == 2);
    CHECK_FALSE(waiting.cancel());
  }
}

TEST_SUITE("Runtime retries") {
  TEST_CASE("a job that fails twice then succeeds runs three attempts under one id" *
            doctest::timeout(10)) {
    Runtime rt{options_with_jitter(0.0)};
    std::atomic<int> calls{0};
    const JobHandle job = rt.submit(
        {.kind = "flaky", .budget = 2s, .retry = JobRetry{.max_attempts = 5, .backoff = 1ms}},
        [&](JobContext&) {
          if (++calls <= 2) throw std::runtime_error{"transient " + std::to_string(calls.load())};
        });
    const Outcome o = job.wait();
    CHECK(o.state == State::completed);
    CHECK(o.reason == Reason::ok);
    CHECK(o.id == job.id());
    CHECK(o.retry_stop == RetryStop::none);
    REQUIRE(o.attempts.size() == 3);
    CHECK(o.attempts[0].state == State::failed);
    CHECK(o.attempts[0].reason == Reason::handler_error);
    CHECK(o.attempts[0].error == "transient 1");
    CHECK(o.attempts[1].reason == Reason::handler_error);
    CHECK(o.attempts[1].error == "transient 2");
    CHECK(o.attempts[2].state == State::completed);
    CHECK(calls == 3);
    // The job's timings: every run, and the waits around them, add up to its budget.
    CHECK(o.timings.run_time ==
          o.attempts[0].run_time + o.attempts[1].run_time + o.attempts[2].run_time);
    CHECK(o.timings.queue_wait + o.timings.run_time + o.timings.remaining_at_end == o.timings.budget);
    const sandglass::RuntimeStats s = rt.stats();
    CHECK(s.submitted == 1);
    CHECK(s.count(Reason::ok) == 1);
    CHECK(s.count(Reason::handler_error) == 0);
  }

  TEST_CASE("retries stop when the rest of the budget cannot cover the backoff" *
            doctest::timeout(10)) {
    Runtime rt{options_with_jitter(1.0)};  // each wait its whole cap
    std::atomic<int> calls{0};
    const Outcome o = rt.submit({.kind = "flaky", .budget = 200ms,
                                 .retry = JobRetry{.max_attempts = 5, .backoff = 1s}},
                                [&](JobContext&) {
                                  ++calls;
                                  throw sandglass::JobFailed{Reason::handler_error, "down"};
                                })
                          .wait();
    CHECK(o.state == State::failed);
    CHECK(o.reason == Reason::retry_skipped_budget);
    CHECK(o.retry_stop == RetryStop::retry_skipped_budget);
    CHECK(o.error == "down");
    REQUIRE(o.attempts.size() == 1);
    CHECK(o.attempts[0].reason == Reason::handler_error);
    CHECK(calls == 1);
  }

  TEST_CASE("max_attempts bounds the attempts, and the last failure is the outcome" *
            doctest::timeout(10)) {
    Runtime rt{options_with_jitter(0.0)};
    std::atomic<int> calls{0};
    const Outcome o = rt.submit({.kind = "broken", .budget = 2s,
                                 .retry = JobRetry{.max_attempts = 3, .backoff = 0ms}},
                                [&](JobContext&) {
                                  ++calls;
                                  throw std::runtime_error{"no"};
                                })
                          .wait();
    CHECK(o.state == State::failed);
    CHECK(o.reason == Reason::handler_error);
    CHECK(o.retry_stop == RetryStop::attempts_exhausted);
    CHECK(o.attempts.size() == 3);
    CHECK(calls == 3);
  }

  TEST_CASE("no retry after the commit point" * doctest::timeout(10)) {
    Runtime rt{options_with_jitter(0.0)};
    std::atomic<int> calls{0};
    const Outcome o = rt.submit({.kind = "pay", .budget = 2s,
                                 .retry = JobRetry{.max_attempts = 4, .backoff = 0ms}},
                                [&](JobContext& ctx) {
                                  ++calls;
                                  ctx.commit();
                                  throw std::runtime_error{"after commit"};
                                })
                          .wait();
    CHECK(o.state == State::failed);
    CHECK(o.committed);
    CHECK(o.retry_stop == RetryStop::committed);
    REQUIRE(o.attempts.size() == 1);
    CHECK(o.attempts[0].committed);
    CHECK(calls == 1);
  }

  TEST_CASE("a cancellation while an attempt runs ends the job without a retry" *
            doctest::timeout(10)) {
    Runtime rt{options_with_jitter(0.0)};
    std::atomic<int> calls{0};
    std::latch running{1};
    const JobHandle job = rt.submit(
        {.kind = "stubborn", .budget = 5s, .retry = JobRetry{.max_attempts = 4, .backoff = 0ms}},
        [&](JobContext& ctx) {
          ++calls;
          std::latch cancelled{1};
          auto link = ctx.on_cancel([&]() noexcept { cancelled.count_down(); });
          running.count_down();
          cancelled.wait();
          throw std::runtime_error{"gave up"};  // the cancellation reaching the work
        });
    running.wait();
    CHECK(job.cancel());
    const Outcome o = job.wait();
    CHECK(o.state == State::cancelled);
    CHECK(o.reason == Reason::cancelled_while_running);
    CHECK(o.cause == CancelCause::caller);
    CHECK(o.retry_stop == RetryStop::none);
    CHECK(o.attempts.size() == 1);
    CHECK(calls == 1);
  }

  TEST_CASE("a cancellation during the backoff ends the job without a retry" *
            doctest::timeout(10)) {
    Runtime rt{options_with_jitter(1.0)};  // a whole 2 s wait before the retry
    OutcomeLog log;
    std::atomic<int> calls{0};
    const JobHandle job = rt.submit(
        {.kind = "flaky", .budget = 60s, .retry = JobRetry{.max_attempts = 4, .backoff = 2s}},
        [&](JobContext&) {
          ++calls;
          throw std::runtime_error{"down"};
        },
        log.callback());
    // Observed from outside: the first attempt failed and the job waits for its retry.
    while (!(job.started() && job.progress().scheduled)) std::this_thread::yield();
    CHECK(job.cancel());
    const Outcome o = job.wait();
    CHECK(o.state == State::cancelled);
    CHECK(o.reason == Reason::cancelled_in_queue);
    CHECK(o.cause == CancelCause::caller);
    CHECK(o.retry_stop == RetryStop::cancelled);
    REQUIRE(o.attempts.size() == 1);
    CHECK(o.attempts[0].reason == Reason::handler_error);
    rt.shutdown(1s);
    CHECK(calls == 1);
    CHECK(log.count() == 1);
  }

  TEST_CASE("the kind's retry budget stops a retry storm" * doctest::timeout(10)) {
    RuntimeOptions options = options_with_jitter(0.0);
    options.retry_budget = {.ratio = 0.0, .max_tokens = 1.0};  // one retry for the kind, ever
    Runtime rt{options};
    auto fail = [](JobContext&) { throw std::runtime_error{"down"}; };
    const JobSpec spec{.kind = "storm", .budget = 2s,
                       .retry = JobRetry{.max_attempts = 3, .backoff = 0ms}};
    const Outcome first = rt.submit(spec, fail).wait();
    CHECK(first.attempts.size() == 2);
    CHECK(first.retry_stop == RetryStop::retry_budget_exhausted);
    const Outcome second = rt.submit(spec, fail).wait();
    CHECK(second.attempts.size() == 1);
    CHECK(second.retry_stop == RetryStop::retry_budget_exhausted);
    // Another kind has a budget of its own: its one token.
    JobSpec other = spec;
    other.kind = "calm";
    CHECK(rt.submit(other, fail).wait().attempts.size() == 2);
  }

  TEST_CASE("a bad retry is refused") {
    Runtime rt{options_with_jitter(0.0)};
    CHECK_THROWS_AS(rt.submit({.kind = "x", .retry = JobRetry{.max_attempts = 0}}, [](JobContext&) {}),
                    std::invalid_argument);
    CHECK_THROWS_AS(rt.submit({.kind = "x", .retry = JobRetry{.max_attempts = 2, .backoff = -1ms}},
                              [](JobContext&) {}),
                    std::invalid_argument);
  }

  TEST_CASE("every job gets exactly one outcome under concurrent submits, cancels and shutdown" *
            doctest::timeout(30)) {
    Runtime rt{options_with_jitter(0.5)};
    constexpr int kThreads = 4;
    constexpr int kPerThread = 60;
    std::mutex mu;
    std::vector<int> callbacks(kThreads * kPerThread + 1, 0);  // by job id
    std::vector<JobHandle> handles;
    std::latch go{kThreads};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 random{static_cast<unsigned>(t)};
        go.arrive_and_wait();
        for (int i = 0; i < kPerThread; ++i) {
          const int pick = static_cast<int>(random() % 6);
          JobSpec spec{.kind = pick % 2 == 0 ? "a" : "b",
                       .priority = static_cast<sandglass::Priority>(random() % 4),
                       .budget = std::chrono::milliseconds{50 + random() % 200},
                       .retry = JobRetry{.max_attempts = 1 + pick % 3, .backoff = 1ms},
                       .delay = std::chrono::milliseconds{pick < 3 ? random() % 4 : 0}};
          auto fails_once = std::make_shared<std::atomic<bool>>(pick % 2 == 1);
          const JobHandle h = rt.submit(
              std::move(spec),
              [fails_once](JobContext&) {
                if (fails_once->exchange(false)) throw std::runtime_error{"once"};
              },
              [&](const Outcome& o) {
                std::lock_guard lock{mu};
                ++callbacks.at(o.id);
              });
          if (pick == 5) h.cancel();
          std::lock_guard lock{mu};
          handles.push_back(h);
        }
      });
    }
    for (auto& th : threads) th.join();
    rt.shutdown(0ms);
    std::lock_guard lock{mu};
    REQUIRE(handles.size() == kThreads * kPerThread);
    for (const JobHandle& h : handles) {
      REQUIRE(h.done());
      const Outcome o = *h.outcome();
      CHECK(o.id == h.id());
      CHECK(callbacks.at(h.id()) == 1);
      CHECK(o.attempts.size() <= 3);
    }
    const sandglass::RuntimeStats s = rt.stats();
    std::uint64_t counted = 0;
    for (const auto n : s.outcomes) counted += n;
    CHECK(counted == handles.size());
    CHECK(s.submitted == handles.size());
  }
}
