#include <sandglass/retry_policy.hpp>

#include <sandglass/budget_policy.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <thread>
#include <utility>

namespace sandglass {
namespace {

constexpr unsigned kTooManyRequests = 429;
constexpr unsigned kServiceUnavailable = 503;

double thread_local_uniform() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return std::uniform_real_distribution<double>{0.0, 1.0}(engine);
}

Duration non_negative(Duration d) noexcept { return std::max(d, Duration::zero()); }

// Whole thousandths of `tokens`; negative and NaN count as zero.
std::int64_t to_milli(double tokens, std::int64_t scale) noexcept {
  if (!(tokens > 0)) return 0;
  constexpr double kMost = 1e15;  // far above any sensible cap, far below int64 overflow
  return std::llround(std::min(tokens * static_cast<double>(scale), kMost));
}

}  // namespace

bool AttemptResult::succeeded() const noexcept {
  return kind == Kind::ok || (kind == Kind::http_status && http_status >= 200 && http_status < 300);
}

bool AttemptResult::transient() const noexcept {
  switch (kind) {
    case Kind::connect_error:
    case Kind::timeout:
      return true;
    case Kind::http_status:
      return http_status == kServiceUnavailable || http_status == kTooManyRequests;
    case Kind::ok:
    case Kind::error:
      break;
  }
  return false;
}

bool AttemptResult::dependency_failed() const noexcept {
  return transient() || (kind == Kind::http_status && http_status >= 500 && http_status < 600);
}

std::string_view to_string(RetryReason reason) noexcept {
  constexpr std::array<std::string_view, 8> kNames = {
      "retry",
      "succeeded",
      "not_transient",
      "attempts_exhausted",
      "retry_skipped_budget",
      "retry_budget_exhausted",
      "breaker_open",
      "deadline_exceeded_before_dispatch",
  };
  const auto index = static_cast<std::size_t>(reason);
  return index < kNames.size() ? kNames[index] : std::string_view{"unknown"};
}

std::string RetryOptions::validate() const {
  if (max_attempts < 1) return "max_attempts: must be at least 1";
  if (base_backoff < Duration::zero()) return "base_backoff: must not be negative";
  if (max_backoff < base_backoff) return "max_backoff: must not be less than base_backoff";
  if (!(multiplier >= 1.0)) return "multiplier: must be at least 1";
  if (reserve < Duration::zero()) return "reserve: must not be negative";
  return {};
}

RetryPolicy::RetryPolicy(RetryOptions options, RandomSource random)
    : options_{options}, random_{random ? std::move(random) : RandomSource{thread_local_uniform}} {}

Duration RetryPolicy::backoff_cap(int retry) const noexcept {
  const double multiplier = options_.multiplier >= 1.0 ? options_.multiplier : 1.0;
  const double scaled = static_cast<double>(non_negative(options_.base_backoff).count()) *
                        std::pow(multiplier, std::max(retry, 1) - 1);
  const Duration limit = non_negative(options_.max_backoff);
  // `scaled` may be infinite; the comparison keeps the conversion below in range.
  if (!(scaled < static_cast<double>(limit.count()))) return limit;
  return Duration{static_cast<Duration::rep>(scaled)};
}

Duration RetryPolicy::backoff(int retry) const {
  const Duration cap = backoff_cap(retry);
  if (options_.jitter == Jitter::none || cap == Duration::zero()) return cap;
  double u = random_();
  if (!(u > 0.0)) u = 0.0;  // NaN too
  if (u > 1.0) u = 1.0;
  return std::min(cap, Duration{static_cast<Duration::rep>(u * static_cast<double>(cap.count()))});
}

RetryDecision RetryPolicy::decide(const RetryInput& in) const {
  if (in.last.succeeded()) return {.reason = RetryReason::succeeded};
  if (!in.last.transient()) return {.reason = RetryReason::not_transient};
  if (in.attempts >= options_.max_attempts) return {.reason = RetryReason::attempts_exhausted};

  Duration delay = backoff(in.attempts);
  if (in.last.retry_after) delay = std::max(delay, non_negative(*in.last.retry_after));
  // The next attempt would start at `start` and, realistically, leave its answer and our reply
  // done at `done`. Both must lie within the one deadline.
  const TimePoint start = saturating_add(in.now, delay);
  const TimePoint done = saturating_add(saturating_add(start, non_negative(in.attempt_estimate)),
                                        non_negative(options_.reserve));
  if (in.deadline.expired(start) || done > in.deadline.time_point()) {
    return {.delay = delay, .reason = RetryReason::retry_skipped_budget};
  }
  return {.retry = true, .delay = delay, .reason = RetryReason::retry};
}

std::string RetryBudgetOptions::validate() const {
  if (!(ratio >= 0.0)) return "ratio: must not be negative";
  if (!(max_tokens >= 0.0)) return "max_tokens: must not be negative";
  return {};
}

RetryBudget::RetryBudget(RetryBudgetOptions options)
    : deposit_{to_milli(options.ratio, kScale)},
      cap_{to_milli(options.max_tokens, kScale)},
      milli_tokens_{cap_} {}

void RetryBudget::record_request() noexcept {
  std::int64_t current = milli_tokens_.load(std::memory_order_relaxed);
  while (!milli_tokens_.compare_exchange_weak(current, std::min(current + deposit_, cap_),
                                              std::memory_order_relaxed)) {
  }
}

bool RetryBudget::try_withdraw() noexcept {
  std::int64_t current = milli_tokens_.load(std::memory_order_relaxed);
  do {
    if (current < kScale) return false;
  } while (!milli_tokens_.compare_exchange_weak(current, current - kScale,
                                                std::memory_order_relaxed));
  return true;
}

double RetryBudget::tokens() const noexcept {
  return static_cast<double>(milli_tokens_.load(std::memory_order_relaxed)) /
         static_cast<double>(kScale);
}

RetryRun run_with_retries(const RetryPolicy& policy, const RetryLoop& loop,
                          const std::function<AttemptResult(Duration child_budget)>& attempt) {
  const auto now = [&loop] { return loop.now ? loop.now() : Clock::now(); };
  const BudgetPolicy budget{.min_useful = loop.min_useful, .reserve = policy.options().reserve};
  RetryRun run;
  if (loop.retry_budget) loop.retry_budget->record_request();
  for (;;) {
    CircuitBreaker::Permit permit;
    if (loop.breaker) {
      permit = loop.breaker->try_acquire();
      if (!permit) {
        run.reason = RetryReason::breaker_open;
        run.retry_after = permit.retry_after();
        return run;
      }
    }
    const ChildBudget child =
        budget.child_budget(loop.deadline, now(), {.dependency_cap = loop.attempt_cap});
    if (!child.ok()) {
      run.reason = RetryReason::deadline_exceeded_before_dispatch;
      return run;  // a probe permit is given back unanswered
    }
    ++run.attempts;
    run.last = attempt(child.budget);
    if (run.last.dependency_failed()) {
      permit.record_failure();
    } else {
      permit.record_success();
    }
    const RetryDecision d = policy.decide({.deadline = loop.deadline,
                                           .now = now(),
                                           .attempts = run.attempts,
                                           .last = run.last,
                                           .attempt_estimate = loop.attempt_estimate});
    if (!d.retry) {
      run.reason = d.reason;
      return run;
    }
    if (loop.retry_budget && !loop.retry_budget->try_withdraw()) {
      run.reason = RetryReason::retry_budget_exhausted;
      return run;
    }
    if (loop.sleep) {
      loop.sleep(d.delay);
    } else {
      std::this_thread::sleep_for(d.delay);
    }
  }
}

}  // namespace sandglass
