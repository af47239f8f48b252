// budget_policy.hpp — `BudgetPolicy`: how a requested time budget becomes a granted one, and how
// much of what remains a job may pass on to a dependency.
//
//   sandglass::BudgetPolicy policy{.min_useful = 5ms, .default_budget = 2s,
//                                  .max_budget = 30s, .reserve = 10ms};
//   auto g = policy.grant(std::nullopt);        // no budget asked: 2 s (defaulted)
//   auto c = policy.child_budget(deadline, {.dependency_cap = 500ms});
//   if (!c.ok()) fail_before_dispatch();       // deadline_exceeded_before_dispatch
//
// Time rules: a negative requested budget is a zero budget. All results saturate.
//
// Thread safety: a value type; `const` member functions are safe to call concurrently.
#pragma once

#include <sandglass/deadline.hpp>
#include <sandglass/reason.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace sandglass {

// A budget handed out at admission.
struct BudgetGrant {
  Duration budget{};          // what the job gets (requested, defaulted or clamped)
  Reason reason = Reason::ok; // ok, or budget_too_small
  bool defaulted = false;     // no budget was requested
  bool clamped = false;       // the request exceeded max_budget

  bool ok() const noexcept { return reason == Reason::ok; }
};

// Upper bounds for a child budget besides the parent's remaining time.
struct ChildBudgetCaps {
  std::optional<Duration> dependency_cap;  // configured limit for this dependency
  std::optional<Duration> latency_cap;     // derived from observed latency (e.g. p99 x 2)
};

// A budget to pass to a dependency.
struct ChildBudget {
  Duration budget{};           // min(remaining - reserve, caps...), never negative
  Reason reason = Reason::ok;  // ok, or deadline_exceeded_before_dispatch

  bool ok() const noexcept { return reason == Reason::ok; }
};

struct BudgetPolicy {
  Duration min_useful = std::chrono::milliseconds{1};  // less than this is not worth starting
  Duration default_budget = std::chrono::seconds{30};  // when the caller names none
  Duration max_budget = std::chrono::minutes{5};       // larger requests are clamped to this
  Duration reserve = std::chrono::milliseconds{5};     // kept back for cleanup and the reply

  // No budget → default; above max → max; below min_useful → reason budget_too_small.
  BudgetGrant grant(std::optional<Duration> requested) const noexcept;

  // min(deadline.remaining(now) - reserve, caps); below min_useful → not ok. The `now` overload
  // exists for tests with their own clock.
  ChildBudget child_budget(Deadline deadline, TimePoint now, ChildBudgetCaps caps = {}) const noexcept;
  ChildBudget child_budget(Deadline deadline, ChildBudgetCaps caps = {}) const noexcept {
    return child_budget(deadline, Clock::now(), caps);
  }

  // Empty when consistent, else a message naming the offending field
  // (e.g. "max_budget: must not be less than default_budget").
  std::string validate() const;
};

}  // namespace sandglass
