// retry_policy.hpp — retries that spend the job's one budget: `AttemptResult` (how one call to
// a dependency ended), `RetryPolicy` (whether and when to try again), `RetryBudget` (a cap on
// retries per dependency) and `run_with_retries` (a loop that puts them and an optional
// `CircuitBreaker` together).
//
//   sandglass::RetryPolicy policy{{.max_attempts = 4, .base_backoff = 50ms, .reserve = 10ms}};
//   sandglass::RetryRun run = sandglass::run_with_retries(policy,
//       {.deadline = ctx.deadline(), .attempt_estimate = p99_of_this_dependency,
//        .sleep = [&](sandglass::Duration d) { ctx.sleep_for(d); },   // cancellable
//        .retry_budget = &budget, .breaker = &breaker},
//       [&](sandglass::Duration child_budget) { return post(url, body, child_budget); });
//   if (run.reason == sandglass::RetryReason::retry_skipped_budget) ...
//
// Rules (deadline-budgets.de.txt, timeout-retry-breaker.de.txt):
// - Only transient failures are retried: no connection, an attempt that ran out of time, HTTP
//   503 and 429. Any other 4xx or 5xx and the handler's own errors are final.
// - The wait before retry n (n = 1 for the second attempt) is drawn uniformly from
//   [0, min(max_backoff, base_backoff × multiplier^(n-1))] ("full jitter"), so that clients who
//   failed together do not come back together. `Jitter::none` waits the whole cap.
// - A retry does not reset the deadline. It starts only if the rest of the budget covers the
//   wait, a realistic attempt (`attempt_estimate`: this dependency's high-percentile latency)
//   and the reserve, and only if it would start before the deadline; otherwise the policy stops
//   at once with `retry_skipped_budget`. A Retry-After from the dependency lengthens the wait
//   and is honoured only under the same rule.
// - A `RetryBudget` per dependency keeps retries to about a tenth of the requests, so retries
//   cannot double the load on a dependency that is already failing.
//
// Thread safety: `RetryPolicy`: distinct objects: safe. Shared objects: `decide` and `backoff`
// may be called concurrently if the random source may be (the default one may).
// `RetryBudget`: safe when shared. `run_with_retries` shares only what its arguments share.
#pragma once

#include <sandglass/circuit_breaker.hpp>
#include <sandglass/deadline.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace sandglass {

// How one attempt ended, as far as retrying and the circuit breaker care.
struct AttemptResult {
  enum class Kind : std::uint8_t {
    ok,             // it worked
    connect_error,  // no connection (refused, reset, unreachable): transient
    timeout,        // the attempt ran out of its time: transient
    http_status,    // the dependency answered with `http_status`
    error,          // the handler's own error (bad input, a declined card): final
  };

  Kind kind = Kind::ok;
  unsigned http_status = 0;             // for Kind::http_status
  std::optional<Duration> retry_after;  // the answer's Retry-After, if it had one

  static AttemptResult ok() noexcept { return {}; }
  static AttemptResult connect_error() noexcept { return {.kind = Kind::connect_error}; }
  static AttemptResult timeout() noexcept { return {.kind = Kind::timeout}; }
  static AttemptResult status(unsigned code,
                              std::optional<Duration> retry_after = std::nullopt) noexcept {
    return {.kind = Kind::http_status, .http_status = code, .retry_after = retry_after};
  }
  static AttemptResult error() noexcept { return {.kind = Kind::error}; }

  // `ok`, or an HTTP status 2xx.
  bool succeeded() const noexcept;
  // Worth another attempt: connect_error, timeout, HTTP 503 or 429.
  bool transient() const noexcept;
  // Counts against the dependency's circuit breaker: the transient failures and any 5xx. (A 4xx
  // or the handler's own error says nothing bad about the dependency.)
  bool dependency_failed() const noexcept;
};

// Why a retry loop goes on or stops. Bounded: fit for a metrics label.
enum class RetryReason : std::uint8_t {
  retry,                   // a transient failure, and the budget covers another attempt
  succeeded,               // the last attempt succeeded
  not_transient,           // the last failure is final: retrying cannot help
  attempts_exhausted,      // max_attempts reached
  retry_skipped_budget,    // the rest of the budget cannot cover wait + attempt + reserve
  retry_budget_exhausted,  // the dependency's RetryBudget has no token left
  breaker_open,            // run_with_retries only: the circuit breaker refused the attempt
  deadline_exceeded_before_dispatch,  // run_with_retries only: the child budget fell below
                                      // min_useful, so the attempt was not sent
};

// "retry", "succeeded", ..., as in the enum.
std::string_view to_string(RetryReason reason) noexcept;

// Full jitter, or none (the whole capped exponential wait).
enum class Jitter : std::uint8_t { full, none };

struct RetryOptions {
  int max_attempts = 3;                                   // in all, the first one included; ≥ 1
  Duration base_backoff = std::chrono::milliseconds{50};  // cap of the wait before retry 1
  Duration max_backoff = std::chrono::seconds{2};         // cap of every wait
  double multiplier = 2.0;                                // growth of the cap per retry; ≥ 1
  Jitter jitter = Jitter::full;
  Duration reserve = std::chrono::milliseconds{5};  // kept back for our own cleanup and reply

  // Empty when consistent, else a message naming the offending field
  // (e.g. "max_backoff: must not be less than base_backoff").
  std::string validate() const;
};

// What `RetryPolicy::decide` looks at. `now` is when the last attempt ended.
struct RetryInput {
  Deadline deadline;           // the job's one deadline
  TimePoint now;
  int attempts = 1;            // attempts made so far, the last one included
  AttemptResult last;          // how the last attempt ended
  Duration attempt_estimate{}; // a realistic attempt: this dependency's observed p90/p99
};

struct RetryDecision {
  bool retry = false;
  // With `retry`: how long to wait before the next attempt. With `retry_skipped_budget`: the
  // wait the next attempt would have needed (now + delay is when it would have started).
  Duration delay{};
  RetryReason reason = RetryReason::succeeded;
};

class RetryPolicy {
 public:
  // Returns a number uniformly distributed in [0, 1); values outside [0, 1] are clamped.
  using RandomSource = std::function<double()>;

  // `random` empty means a std::mt19937_64 per thread, seeded from std::random_device.
  explicit RetryPolicy(RetryOptions options = {}, RandomSource random = {});

  // Whether to try again after `in.last`, and after which wait (see the rules above). Reads no
  // clock; draws one random number when it gets as far as computing a wait.
  RetryDecision decide(const RetryInput& in) const;

  // min(max_backoff, base_backoff × multiplier^(retry-1)) for retry ≥ 1; saturates.
  Duration backoff_cap(int retry) const noexcept;
  // The wait before retry `retry` with jitter applied: in [0, backoff_cap(retry)].
  Duration backoff(int retry) const;

  const RetryOptions& options() const noexcept { return options_; }

 private:
  RetryOptions options_;
  RandomSource random_;
};

struct RetryBudgetOptions {
  double ratio = 0.1;        // tokens each request deposits: retries ≈ ratio × requests
  double max_tokens = 10.0;  // the cap, and the start: the largest burst of retries

  // Empty when consistent, else a message naming the offending field.
  std::string validate() const;
};

// A token bucket per dependency: each request deposits `ratio` of a token (up to the cap), each
// retry takes a whole one. Tokens are counted in thousandths, so the arithmetic is exact.
class RetryBudget {
 public:
  explicit RetryBudget(RetryBudgetOptions options = {});

  // A new request (not a retry) to the dependency.
  void record_request() noexcept;
  // True, taking a token, if a retry may go ahead.
  bool try_withdraw() noexcept;
  // Tokens left, for metrics and tests.
  double tokens() const noexcept;

 private:
  static constexpr std::int64_t kScale = 1000;  // thousandths of a token
  std::int64_t deposit_;
  std::int64_t cap_;
  std::atomic<std::int64_t> milli_tokens_;  // relaxed: it publishes nothing else
};

// What `run_with_retries` needs besides the policy and the attempt.
struct RetryLoop {
  Deadline deadline;                   // the job's one deadline
  Duration attempt_estimate{};         // see RetryInput
  Duration min_useful = std::chrono::milliseconds{1};  // a smaller child budget is not sent
  std::optional<Duration> attempt_cap; // upper bound of one attempt's child budget
  // Waits between attempts; should end early and throw when the job is cancelled (for
  // example `ctx.sleep_for`). Empty means std::this_thread::sleep_for.
  std::function<void(Duration)> sleep;
  std::function<TimePoint()> now;      // empty means the steady clock
  RetryBudget* retry_budget = nullptr; // optional; must outlive the call
  CircuitBreaker* breaker = nullptr;   // optional; must outlive the call
};

struct RetryRun {
  AttemptResult last;  // the last attempt's result; `ok` when none was sent
  int attempts = 0;    // attempts sent
  RetryReason reason = RetryReason::succeeded;  // why it stopped (never `retry`)
  Duration retry_after{};  // with `breaker_open`: the breaker's Retry-After
};

// Calls `attempt(child_budget)` until it succeeds or `policy` says stop, where child_budget =
// min(deadline - now - reserve, attempt_cap), computed right before each attempt. Before each
// attempt it asks the breaker (if any) and records the result there; before each retry it
// takes a token from the retry budget (if any), after depositing one request's share once at
// the start. Blocks: in `attempt` and in `sleep`. Exceptions from either propagate; a breaker
// probe that was out is then given back.
RetryRun run_with_retries(const RetryPolicy& policy, const RetryLoop& loop,
                          const std::function<AttemptResult(Duration child_budget)>& attempt);

}  // namespace sandglass
