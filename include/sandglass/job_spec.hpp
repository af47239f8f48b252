// job_spec.hpp — `JobSpec`, what a submitter says about a job, `Priority`, its class, and
// `JobSpecRef`, the non-owning form `Runtime::async_submit` takes.
//
//   sandglass::JobSpec spec{.kind = "resize", .priority = sandglass::Priority::high,
//                           .budget = 800ms};
//   co_await rt.async_submit({.kind = "resize", .budget = 800ms}, handler,
//                            boost::asio::use_awaitable);          // a JobSpecRef
//
// Time rules: `budget` is relative (from admission, a clock reading inside `submit`: the
// job's `enqueued_at`), `deadline` absolute and never moved; when both are given the earlier
// wins. With neither, the runtime's default budget applies; a budget above the
// maximum is clamped (see `BudgetPolicy`). With a `delay`, the job may not start before
// submit + delay, and its budget counts from that moment: deadline = submit + delay + budget.
// A `retry` runs a failed attempt again inside the same deadline (see `JobRetry`).
//
// Thread safety: value types. A JobSpecRef refers to characters and a token it does not own.
#pragma once

#include <sandglass/cancel.hpp>
#include <sandglass/deadline.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace sandglass {

// Priority classes, highest first. The queue serves a higher class before a lower one and,
// within a class, the earliest deadline first.
enum class Priority : std::uint8_t { critical, high, normal, sheddable };

inline constexpr std::size_t kPriorityCount = 4;

std::string_view to_string(Priority priority) noexcept;
std::optional<Priority> priority_from_string(std::string_view name) noexcept;

using JobId = std::uint64_t;

// Retries inside the job's one budget. An attempt that ends `failed` (the handler threw, or
// threw JobFailed) runs again after a jittered exponential backoff (full jitter: the wait before
// retry n is drawn from [0, backoff × 2^(n-1)]), only while the rest of the budget covers that
// wait, the estimate key's tail estimate and the reserve; never after `commit()`, never after a
// cancellation, and only while the kind's retry budget has a token (RuntimeOptions::retry_budget).
// Each retry goes through admission again at its time.
struct JobRetry {
  int max_attempts = 1;  // in all, the first one included; 1: no retry
  Duration backoff = std::chrono::milliseconds{100};  // cap of the wait before the first retry
};

struct JobSpecRef;

struct JobSpec {
  std::string kind;                      // names the work; bulkheads (kind_limits) go by it
  Priority priority = Priority::normal;
  std::optional<Duration> budget;        // relative time budget
  std::optional<Deadline> deadline;      // absolute deadline
  CancelToken parent;                    // cancelling it cancels the job (cause `upstream`)
  std::string idempotency_key;           // not interpreted by the runtime; for sources that
                                         // recognise retried requests (the daemon)
  std::string estimate_key;              // whose run times predict this job's: empty means the
                                         // kind; finer keys (a command, a query) keep a slow
                                         // variant from making a fast one look implausible.
                                         // Keep the set of keys bounded.
  // The job's own run time as its submitter expects it (an input's size, a sleep's length);
  // zero or less: not known. The runtime learns per estimate key how real runs relate to
  // stated ones and predicts this job from its own size (see RuntimeOptions); without it, from
  // the key's recent runs.
  Duration expected{};
  bool admitted = false;                 // admission was decided before the job got here (a
                                         // cluster's claim): the runtime does not predict it again
                                         // and treats it as a key with no samples (admitted,
                                         // dropped unstarted only at its deadline); its deadline,
                                         // cancellation and run-time sample are as for any job
  std::optional<JobRetry> retry;         // none, or max_attempts 1: one attempt
  // Held back (not queued, not work ahead of others) until submit + delay, then admitted as a
  // job submitted then; zero or less: none.
  Duration delay{};

  // A view of this spec; it refers to this spec's strings and token.
  operator JobSpecRef() const noexcept;  // NOLINT: implicit, so async_submit takes a JobSpec
};

// Refers to a CancelToken it does not own (for JobSpecRef): implicit from a token, so
// `.parent = ctx.token()` reads as in a JobSpec.
class CancelTokenRef {
 public:
  constexpr CancelTokenRef() noexcept = default;
  CancelTokenRef(const CancelToken& token) noexcept : token_{&token} {}  // NOLINT: implicit
  // The token referred to; a default (never cancelled) one when none is.
  CancelToken get() const { return token_ != nullptr ? *token_ : CancelToken{}; }

 private:
  const CancelToken* token_ = nullptr;
};

// The fields of a JobSpec without owning any: what `Runtime::async_submit` takes, so that a
// braced spec written inside a `co_await` expression is safe. GCC 12 mis-copies an aggregate
// temporary of a co_await expression (it destroys a stale bitwise copy besides, or instead of,
// the object the call used): with std::string members that frees a small-string buffer that was
// never allocated ("free(): invalid pointer") or a heap buffer twice. A trivially copyable,
// trivially destructible aggregate has nothing such a copy could break. Clang 14 does not
// mis-copy; the type is the same for both.
//
// What it refers to (the characters, the parent token) must live until `async_submit` returns,
// which copies them into a JobSpec before anything can suspend: string literals, named strings
// and temporaries of the same full expression all do.
struct JobSpecRef {
  std::string_view kind;
  Priority priority = Priority::normal;
  std::optional<Duration> budget;
  std::optional<Deadline> deadline;
  CancelTokenRef parent;
  std::string_view idempotency_key;
  std::string_view estimate_key;
  Duration expected{};
  bool admitted = false;
  std::optional<JobRetry> retry;
  Duration delay{};

  // An owning copy.
  JobSpec to_spec() const {
    return JobSpec{.kind = std::string{kind},
                   .priority = priority,
                   .budget = budget,
                   .deadline = deadline,
                   .parent = parent.get(),
                   .idempotency_key = std::string{idempotency_key},
                   .estimate_key = std::string{estimate_key},
                   .expected = expected,
                   .admitted = admitted,
                   .retry = retry,
                   .delay = delay};
  }
};

static_assert(std::is_trivially_copyable_v<JobSpecRef> &&
                  std::is_trivially_destructible_v<JobSpecRef>,
              "JobSpecRef must stay safe to copy bitwise (see its comment)");

inline JobSpec::operator JobSpecRef() const noexcept {
  return JobSpecRef{.kind = kind,
                    .priority = priority,
                    .budget = budget,
                    .deadline = deadline,
                    .parent = parent,
                    .idempotency_key = idempotency_key,
                    .estimate_key = estimate_key,
                    .expected = expected,
                    .admitted = admitted,
                    .retry = retry,
                    .delay = delay};
}

}  // namespace sandglass
