#include <sandglass/budget_policy.hpp>

#include <algorithm>

namespace sandglass {

BudgetGrant BudgetPolicy::grant(std::optional<Duration> requested) const noexcept {
  BudgetGrant g;
  if (!requested) {
    g.budget = default_budget;
    g.defaulted = true;
  } else {
    g.budget = std::max(*requested, Duration::zero());
  }
  if (g.budget > max_budget) {
    g.budget = max_budget;
    g.clamped = true;
  }
  if (g.budget < min_useful) g.reason = Reason::budget_too_small;
  return g;
}

ChildBudget BudgetPolicy::child_budget(Deadline deadline, TimePoint now,
                                       ChildBudgetCaps caps) const noexcept {
  ChildBudget c;
  // Both operands are non-negative (a negative reserve counts as none), so this cannot overflow.
  c.budget = std::max(deadline.remaining(now) - std::max(reserve, Duration::zero()), Duration::zero());
  if (caps.dependency_cap) c.budget = std::min(c.budget, std::max(*caps.dependency_cap, Duration::zero()));
  if (caps.latency_cap) c.budget = std::min(c.budget, std::max(*caps.latency_cap, Duration::zero()));
  if (c.budget < min_useful) c.reason = Reason::deadline_exceeded_before_dispatch;
  return c;
}

std::string BudgetPolicy::validate() const {
  if (min_useful < Duration::zero()) return "min_useful: must not be negative";
  if (reserve < Duration::zero()) return "reserve: must not be negative";
  if (default_budget < min_useful) return "default_budget: must not be less than min_useful";
  if (max_budget < default_budget) return "max_budget: must not be less than default_budget";
  return {};
}

}  // namespace sandglass
