#include <sandglass/retry_policy.hpp>

#include <sandglass/reason.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <latch>
#include <limits>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::AttemptResult;
using sandglass::CircuitBreaker;
using sandglass::Deadline;
using sandglass::Duration;
using sandglass::Jitter;
using sandglass::RetryBudget;
using sandglass::RetryDecision;
using sandglass::RetryOptions;
using sandglass::RetryPolicy;
using sandglass::RetryReason;
using sandglass::RetryRun;
using sandglass::TimePoint;

namespace {

constexpr Duration kTick = 1s;

TimePoint tick(int n) { return TimePoint{} + n * kTick; }

// Time that moves only when the test says so: attempts and waits advance it.
struct FakeClock {
  TimePoint now{};
  std::function<TimePoint()> function() {
    return [this] { return now; };
  }
  std::function<void(Duration)> sleep() {
    return [this](Duration d) { now += d; };
  }
};

// A dependency that answers from a recorded script, as the reference examples do.
struct ScriptedDependency {
  FakeClock& clock;
  std::vector<AttemptResult> answers;
  Duration attempt_time{};
  std::vector<TimePoint> started;
  std::vector<Duration> child_budgets;

  std::function<AttemptResult(Duration)> attempt() {
    return [this](Duration child_budget) {
      started.push_back(clock.now);
      child_budgets.push_back(child_budget);
      clock.now += attempt_time;
      return answers.at(started.size() - 1);
    };
  }
};

// with_retry of timeout-retry-breaker.de.txt: waits of 1, 2, 4, 8 ticks, no jitter, no
// deadline, attempts that take no time.
RetryOptions reference_options(int max_attempts) {
  return {.max_attempts = max_attempts,
          .base_backoff = kTick,
          .max_backoff = 8 * kTick,
          .multiplier = 2.0,
          .jitter = Jitter::none,
          .reserve = Duration::zero()};
}

RetryPolicy fixed_random(RetryOptions options, double u) {
  return RetryPolicy{options, [u] { return u; }};
}

}  // namespace

TEST_SUITE("RetryPolicy") {
  TEST_CASE("the reference retry example succeeds on the third attempt at tick 3") {
    // Tick 0, Versuch 1: timeout / Tick 1, Versuch 2: 503 / Tick 3, Versuch 3: ok
    FakeClock clock;
    ScriptedDependency provider{clock, {AttemptResult::timeout(), AttemptResult::status(503),
                                        AttemptResult::ok()}};
    const RetryRun run = sandglass::run_with_retries(
        RetryPolicy{reference_options(4)},
        {.deadline = Deadline::never(), .sleep = clock.sleep(), .now = clock.function()},
        provider.attempt());
    CHECK(provider.started == std::vector<TimePoint>{tick(0), tick(1), tick(3)});
    CHECK(run.attempts == 3);
    CHECK(run.reason == RetryReason::succeeded);
    CHECK(run.last.succeeded());
  }

  TEST_CASE("three timeouts with a limit of three attempts return the last timeout") {
    // The reference's "Sag die Ausgabe voraus": the fourth answer (ok) is never asked for.
    FakeClock clock;
    ScriptedDependency provider{clock, {AttemptResult::timeout(), AttemptResult::timeout(),
                                        AttemptResult::timeout(), AttemptResult::ok()}};
    const RetryRun run = sandglass::run_with_retries(
        RetryPolicy{reference_options(3)},
        {.deadline = Deadline::never(), .sleep = clock.sleep(), .now = clock.function()},
        provider.attempt());
    CHECK(provider.started == std::vector<TimePoint>{tick(0), tick(1), tick(3)});
    CHECK(run.attempts == 3);
    CHECK(run.reason == RetryReason::attempts_exhausted);
    CHECK(run.last.kind == AttemptResult::Kind::timeout);
    CHECK(clock.now == tick(3));
  }

  TEST_CASE("the deadline exercise stops because attempt 4 would start at tick 7 after the deadline 5") {
    // Tick 0, Versuch 1: timeout / Tick 1, Versuch 2: timeout / Tick 3, Versuch 3: timeout
    // ich höre auf: Versuch 4 käme bei Tick 7, nach der Frist 5 / Ergebnis: timeout
    const RetryPolicy policy{reference_options(std::numeric_limits<int>::max())};
    const Deadline deadline = Deadline::at(tick(5));
    const std::vector<AttemptResult> answers{AttemptResult::timeout(), AttemptResult::timeout(),
                                             AttemptResult::timeout(), AttemptResult::ok()};

    SUBCASE("step by step with the decision function") {
      std::vector<TimePoint> started;
      TimePoint now = tick(0);
      RetryDecision d;
      for (int attempt = 1;; ++attempt) {
        started.push_back(now);
        d = policy.decide({.deadline = deadline,
                           .now = now,
                           .attempts = attempt,
                           .last = answers.at(static_cast<std::size_t>(attempt - 1))});
        if (!d.retry) break;
        now += d.delay;
      }
      CHECK(started == std::vector<TimePoint>{tick(0), tick(1), tick(3)});
      CHECK(d.reason == RetryReason::retry_skipped_budget);
      CHECK(now + d.delay == tick(7));
    }
    SUBCASE("with run_with_retries") {
      FakeClock clock;
      ScriptedDependency provider{clock, answers};
      const RetryRun run = sandglass::run_with_retries(
          policy, {.deadline = deadline, .sleep = clock.sleep(), .now = clock.function()},
          provider.attempt());
      CHECK(provider.started == std::vector<TimePoint>{tick(0), tick(1), tick(3)});
      CHECK(run.attempts == 3);
      CHECK(run.reason == RetryReason::retry_skipped_budget);
      CHECK(run.last.kind == AttemptResult::Kind::timeout);
      CHECK(clock.now == tick(3));  // stopped at once, without waiting
    }
  }

  TEST_CASE("a failure that is not transient is not retried") {
    // The reference's "Finde den Fehler": a declined card must not be asked for four times.
    AttemptResult failure;
    SUBCASE("the handler's own error") { failure = AttemptResult::error(); }
    SUBCASE("400") { failure = AttemptResult::status(400); }
    SUBCASE("404") { failure = AttemptResult::status(404); }
    SUBCASE("409") { failure = AttemptResult::status(409); }
    SUBCASE("500") { failure = AttemptResult::status(500); }
    SUBCASE("504") { failure = AttemptResult::status(504); }
    CAPTURE(failure.http_status);
    FakeClock clock;
    ScriptedDependency bank{clock, {failure, AttemptResult::ok()}};
    const RetryRun run = sandglass::run_with_retries(
        RetryPolicy{reference_options(4)},
        {.deadline = Deadline::never(), .sleep = clock.sleep(), .now = clock.function()},
        bank.attempt());
    CHECK(run.attempts == 1);
    CHECK(run.reason == RetryReason::not_transient);
    CHECK(clock.now == tick(0));
  }

  TEST_CASE("connect errors timeouts 503 and 429 are retried") {
    AttemptResult failure;
    SUBCASE("connect error") { failure = AttemptResult::connect_error(); }
    SUBCASE("timeout") { failure = AttemptResult::timeout(); }
    SUBCASE("503") { failure = AttemptResult::status(503); }
    SUBCASE("429") { failure = AttemptResult::status(429); }
    CAPTURE(failure.http_status);
    const RetryDecision d = RetryPolicy{reference_options(4)}.decide(
        {.deadline = Deadline::never(), .now = tick(0), .attempts = 1, .last = failure});
    CHECK(d.retry);
    CHECK(d.reason == RetryReason::retry);
    CHECK(d.delay == kTick);
  }

  TEST_CASE("attempt results are classified for retries and for the breaker") {
    struct Row {
      AttemptResult result;
      bool succeeded;
      bool transient;
      bool dependency_failed;
    };
    const Row rows[] = {
        {AttemptResult::ok(), true, false, false},
        {AttemptResult::status(200), true, false, false},
        {AttemptResult::status(204), true, false, false},
        {AttemptResult::status(302), false, false, false},
        {AttemptResult::status(400), false, false, false},
        {AttemptResult::status(429), false, true, true},
        {AttemptResult::status(500), false, false, true},
        {AttemptResult::status(503), false, true, true},
        {AttemptResult::connect_error(), false, true, true},
        {AttemptResult::timeout(), false, true, true},
        {AttemptResult::error(), false, false, false},
    };
    for (const Row& r : rows) {
      CAPTURE(static_cast<int>(r.result.kind));
      CAPTURE(r.result.http_status);
      CHECK(r.result.succeeded() == r.succeeded);
      CHECK(r.result.transient() == r.transient);
      CHECK(r.result.dependency_failed() == r.dependency_failed);
    }
  }

  TEST_CASE("a retry starts only if the rest covers the wait a realistic attempt and the reserve") {
    // Rest 1000 ms = wait 100 ms + attempt estimate + reserve 100 ms.
    const RetryPolicy policy{{.max_attempts = 5,
                              .base_backoff = 100ms,
                              .jitter = Jitter::none,
                              .reserve = 100ms}};
    const Deadline deadline = Deadline::at(TimePoint{} + 1000ms);
    auto decide = [&](Duration estimate) {
      return policy.decide({.deadline = deadline,
                            .now = TimePoint{},
                            .attempts = 1,
                            .last = AttemptResult::timeout(),
                            .attempt_estimate = estimate});
    };
    const RetryDecision fits = decide(800ms);
    CHECK(fits.retry);
    CHECK(fits.delay == 100ms);
    const RetryDecision too_slow = decide(800ms + 1ns);
    CHECK_FALSE(too_slow.retry);
    CHECK(too_slow.reason == RetryReason::retry_skipped_budget);
    CHECK(too_slow.delay == 100ms);
  }

  TEST_CASE("no retry starts at or after the deadline") {
    const RetryPolicy policy{reference_options(10)};
    TimePoint now{};
    SUBCASE("the wait would end exactly at the deadline") { now = tick(4); }
    SUBCASE("the deadline has passed") { now = tick(6); }
    const RetryDecision d = policy.decide({.deadline = Deadline::at(tick(5)),
                                           .now = now,
                                           .attempts = 1,
                                           .last = AttemptResult::status(503)});
    CHECK_FALSE(d.retry);
    CHECK(d.reason == RetryReason::retry_skipped_budget);
  }

  TEST_CASE("Retry-After is honoured when it fits the budget") {
    const RetryPolicy policy = fixed_random({.base_backoff = 100ms, .reserve = 10ms}, 0.5);
    auto decide = [&](Duration retry_after) {
      return policy.decide({.deadline = Deadline::at(TimePoint{} + 1s),
                            .now = TimePoint{},
                            .attempts = 1,
                            .last = AttemptResult::status(503, retry_after),
                            .attempt_estimate = 200ms});
    };
    SUBCASE("a longer Retry-After replaces the backoff") {
      const RetryDecision d = decide(300ms);
      CHECK(d.retry);
      CHECK(d.delay == 300ms);
    }
    SUBCASE("a shorter Retry-After leaves the backoff") {
      const RetryDecision d = decide(10ms);
      CHECK(d.retry);
      CHECK(d.delay == 50ms);
    }
    SUBCASE("a Retry-After that does not fit stops at once") {
      const RetryDecision d = decide(790ms + 1ns);
      CHECK_FALSE(d.retry);
      CHECK(d.reason == RetryReason::retry_skipped_budget);
      CHECK(d.delay == 790ms + 1ns);
    }
    SUBCASE("the largest Retry-After does not overflow") {
      const RetryDecision d = decide(Duration::max());
      CHECK_FALSE(d.retry);
      CHECK(d.reason == RetryReason::retry_skipped_budget);
    }
  }

  TEST_CASE("max_attempts counts the first attempt") {
    const RetryDecision d = RetryPolicy{reference_options(1)}.decide(
        {.deadline = Deadline::never(), .now = tick(0), .attempts = 1,
         .last = AttemptResult::timeout()});
    CHECK_FALSE(d.retry);
    CHECK(d.reason == RetryReason::attempts_exhausted);
  }

  TEST_CASE("a success needs no retry") {
    const RetryDecision d = RetryPolicy{reference_options(3)}.decide(
        {.deadline = Deadline::never(), .now = tick(0), .attempts = 1,
         .last = AttemptResult::status(201)});
    CHECK_FALSE(d.retry);
    CHECK(d.reason == RetryReason::succeeded);
  }

  TEST_CASE("the backoff cap grows exponentially up to max_backoff") {
    const RetryPolicy policy{{.base_backoff = 100ms, .max_backoff = 1s, .multiplier = 2.0}};
    CHECK(policy.backoff_cap(1) == 100ms);
    CHECK(policy.backoff_cap(2) == 200ms);
    CHECK(policy.backoff_cap(3) == 400ms);
    CHECK(policy.backoff_cap(4) == 800ms);
    CHECK(policy.backoff_cap(5) == 1s);
    CHECK(policy.backoff_cap(6) == 1s);
    CHECK(policy.backoff_cap(100000) == 1s);
    CHECK(policy.backoff_cap(0) == 100ms);
  }

  TEST_CASE("full jitter scales the cap by the injected random number") {
    const RetryOptions options{.base_backoff = 100ms, .max_backoff = 1s};
    CHECK(fixed_random(options, 0.5).backoff(1) == 50ms);
    CHECK(fixed_random(options, 0.5).backoff(3) == 200ms);
    CHECK(fixed_random(options, 0.25).backoff(5) == 250ms);
    CHECK(fixed_random(options, 0.0).backoff(2) == Duration::zero());
    SUBCASE("numbers outside [0, 1] are clamped") {
      CHECK(fixed_random(options, 1.5).backoff(1) == 100ms);
      CHECK(fixed_random(options, -0.5).backoff(1) == Duration::zero());
      CHECK(fixed_random(options, std::nan("")).backoff(1) == Duration::zero());
    }
    SUBCASE("no jitter waits the whole cap") {
      const RetryPolicy policy{{.base_backoff = 100ms, .jitter = Jitter::none}};
      CHECK(policy.backoff(2) == 200ms);
    }
  }

  TEST_CASE("the default random source keeps every wait within the cap and spreads them") {
    const RetryPolicy policy{{.base_backoff = 100ms}};
    std::set<Duration> seen;
    for (int i = 0; i < 1000; ++i) {
      const Duration d = policy.backoff(1);
      REQUIRE(d >= Duration::zero());
      REQUIRE(d <= 100ms);
      seen.insert(d);
    }
    CHECK(seen.size() > 900);
  }

  TEST_CASE("options name the offending field") {
    CHECK(RetryOptions{}.validate().empty());
    CHECK(RetryOptions{.max_attempts = 0}.validate() == "max_attempts: must be at least 1");
    CHECK(RetryOptions{.base_backoff = -1ms}.validate() == "base_backoff: must not be negative");
    CHECK(RetryOptions{.base_backoff = 2s, .max_backoff = 1s}.validate() ==
          "max_backoff: must not be less than base_backoff");
    CHECK(RetryOptions{.multiplier = 0.5}.validate() == "multiplier: must be at least 1");
    CHECK(RetryOptions{.multiplier = std::nan("")}.validate() == "multiplier: must be at least 1");
    CHECK(RetryOptions{.reserve = -1ms}.validate() == "reserve: must not be negative");
    CHECK(sandglass::RetryBudgetOptions{}.validate().empty());
    CHECK(sandglass::RetryBudgetOptions{.ratio = -0.1}.validate() == "ratio: must not be negative");
    CHECK(sandglass::RetryBudgetOptions{.max_tokens = -1}.validate() ==
          "max_tokens: must not be negative");
  }

  TEST_CASE("retry reasons and the new reason codes have their names") {
    CHECK(sandglass::to_string(RetryReason::retry) == "retry");
    CHECK(sandglass::to_string(RetryReason::retry_skipped_budget) == "retry_skipped_budget");
    CHECK(sandglass::to_string(RetryReason::deadline_exceeded_before_dispatch) ==
          "deadline_exceeded_before_dispatch");
    CHECK(sandglass::to_string(sandglass::Reason::retry_skipped_budget) == "retry_skipped_budget");
    CHECK(sandglass::to_string(sandglass::Reason::breaker_open) == "breaker_open");
    for (std::size_t i = 0; i < sandglass::kReasonCount; ++i) {
      const auto reason = static_cast<sandglass::Reason>(i);
      CAPTURE(i);
      CHECK(sandglass::reason_from_string(sandglass::to_string(reason)) == reason);
    }
  }
}

TEST_SUITE("RetryBudget") {
  TEST_CASE("a full retry budget allows a burst of max_tokens retries and then one per ten requests") {
    RetryBudget budget{{.ratio = 0.1, .max_tokens = 10}};
    for (int i = 0; i < 10; ++i) CHECK(budget.try_withdraw());
    CHECK_FALSE(budget.try_withdraw());
    for (int i = 0; i < 9; ++i) budget.record_request();
    CHECK_FALSE(budget.try_withdraw());
    budget.record_request();
    CHECK(budget.try_withdraw());
    CHECK(budget.tokens() == 0.0);
  }

  TEST_CASE("retries of a thousand failing requests stay at a tenth of them") {
    RetryBudget budget{{.ratio = 0.1, .max_tokens = 10}};
    while (budget.try_withdraw()) {
    }
    int retries = 0;
    for (int request = 0; request < 1000; ++request) {
      budget.record_request();
      if (budget.try_withdraw()) ++retries;  // every request fails and wants a retry
    }
    CHECK(retries == 100);
  }

  TEST_CASE("deposits stop at the cap") {
    RetryBudget budget{{.ratio = 0.5, .max_tokens = 2}};
    for (int i = 0; i < 10; ++i) budget.record_request();
    CHECK(budget.tokens() == 2.0);
  }

  TEST_CASE("the retry budget loses no token under concurrent requests and retries" *
            doctest::timeout(10)) {
    constexpr int kThreads = 8;
    RetryBudget budget{{.ratio = 0.1, .max_tokens = 100}};
    std::atomic<int> withdrawn{0};
    auto together = [&](auto body) {
      std::latch start{kThreads};
      std::vector<std::jthread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&] {
          start.arrive_and_wait();
          body();
        });
      }
    };
    together([&] {
      for (int i = 0; i < 50; ++i) {
        if (budget.try_withdraw()) withdrawn.fetch_add(1);
      }
    });
    CHECK(withdrawn.load() == 100);  // 400 asked, 100 tokens
    together([&] {
      for (int i = 0; i < 125; ++i) budget.record_request();
    });
    CHECK(budget.tokens() == 100.0);  // 1000 deposits of a tenth, none lost
  }
}

TEST_SUITE("run_with_retries") {
  TEST_CASE("each attempt gets the rest of the budget minus the reserve capped by attempt_cap") {
    // Attempts take 200 ms and time out; waits of 100, 200, 400 ms; deadline at 1000 ms.
    FakeClock clock;
    ScriptedDependency dependency{clock,
                                  {AttemptResult::timeout(), AttemptResult::timeout(),
                                   AttemptResult::timeout(), AttemptResult::timeout()},
                                  200ms};
    const RetryPolicy policy{
        {.max_attempts = 10, .base_backoff = 100ms, .jitter = Jitter::none, .reserve = 100ms}};
    const RetryRun run = sandglass::run_with_retries(
        policy,
        {.deadline = Deadline::at(TimePoint{} + 1000ms),
         .attempt_cap = 500ms,
         .sleep = clock.sleep(),
         .now = clock.function()},
        dependency.attempt());
    CHECK(dependency.started ==
          std::vector<TimePoint>{TimePoint{}, TimePoint{} + 300ms, TimePoint{} + 700ms});
    CHECK(dependency.child_budgets == std::vector<Duration>{500ms, 500ms, 200ms});
    CHECK(run.attempts == 3);
    CHECK(run.reason == RetryReason::retry_skipped_budget);  // the next would start at 1300 ms
  }

  TEST_CASE("an attempt whose child budget is below min_useful is not sent") {
    FakeClock clock;
    ScriptedDependency dependency{clock, {AttemptResult::ok()}};
    const RetryRun run = sandglass::run_with_retries(
        RetryPolicy{{.reserve = 5ms}},
        {.deadline = Deadline::at(TimePoint{} + 6ms),
         .min_useful = 2ms,
         .sleep = clock.sleep(),
         .now = clock.function()},
        dependency.attempt());
    CHECK(run.attempts == 0);
    CHECK(run.reason == RetryReason::deadline_exceeded_before_dispatch);
    CHECK(dependency.started.empty());
  }

  TEST_CASE("an empty retry budget stops the loop after the first failure") {
    FakeClock clock;
    ScriptedDependency dependency{clock, {AttemptResult::status(503), AttemptResult::ok()}};
    RetryBudget budget{{.ratio = 0.1, .max_tokens = 10}};
    while (budget.try_withdraw()) {
    }
    const RetryRun run = sandglass::run_with_retries(
        RetryPolicy{reference_options(4)},
        {.deadline = Deadline::never(), .sleep = clock.sleep(), .now = clock.function(),
         .retry_budget = &budget},
        dependency.attempt());
    CHECK(run.attempts == 1);
    CHECK(run.reason == RetryReason::retry_budget_exhausted);
    CHECK(budget.tokens() == 0.1);
  }

  TEST_CASE("an open breaker stops the loop at once with its retry after") {
    FakeClock clock;
    CircuitBreaker breaker{{.failure_threshold = 2, .cooldown = 4 * kTick}, clock.function()};
    ScriptedDependency dependency{clock,
                                  {AttemptResult::connect_error(), AttemptResult::connect_error(),
                                   AttemptResult::ok()}};
    const RetryRun run = sandglass::run_with_retries(
        RetryPolicy{reference_options(5)},
        {.deadline = Deadline::never(), .sleep = clock.sleep(), .now = clock.function(),
         .breaker = &breaker},
        dependency.attempt());
    // Two failures open the breaker at tick 1; the third attempt, due at tick 3, is refused.
    CHECK(dependency.started == std::vector<TimePoint>{tick(0), tick(1)});
    CHECK(run.attempts == 2);
    CHECK(run.reason == RetryReason::breaker_open);
    CHECK(run.retry_after == 2 * kTick);
    CHECK(run.last.kind == AttemptResult::Kind::connect_error);
    CHECK(breaker.state() == sandglass::BreakerState::open);
  }

  TEST_CASE("a permanent failure does not count against the breaker") {
    FakeClock clock;
    CircuitBreaker breaker{{.failure_threshold = 1}, clock.function()};
    ScriptedDependency dependency{clock, {AttemptResult::status(404)}};
    const RetryRun run = sandglass::run_with_retries(
        RetryPolicy{reference_options(3)},
        {.deadline = Deadline::never(), .sleep = clock.sleep(), .now = clock.function(),
         .breaker = &breaker},
        dependency.attempt());
    CHECK(run.reason == RetryReason::not_transient);
    CHECK(breaker.state() == sandglass::BreakerState::closed);
  }

  TEST_CASE("an attempt that throws gives the breaker's probe back") {
    FakeClock clock;
    CircuitBreaker breaker{{.failure_threshold = 1, .cooldown = kTick}, clock.function()};
    breaker.try_acquire().record_failure();
    clock.now = tick(1);
    const std::function<AttemptResult(Duration)> cancelled = [](Duration) -> AttemptResult {
      throw std::runtime_error{"cancelled"};
    };
    CHECK_THROWS_AS(sandglass::run_with_retries(RetryPolicy{reference_options(3)},
                                                {.deadline = Deadline::never(),
                                                 .sleep = clock.sleep(),
                                                 .now = clock.function(),
                                                 .breaker = &breaker},
                                                cancelled),
                    std::runtime_error);
    CHECK(breaker.state() == sandglass::BreakerState::half_open);
    CHECK(breaker.try_acquire().is_probe());
  }
}
