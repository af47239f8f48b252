#include <sandglass/budget_policy.hpp>

#include <doctest/doctest.h>

#include <optional>
#include <string>

using namespace std::chrono_literals;
using sandglass::BudgetGrant;
using sandglass::BudgetPolicy;
using sandglass::ChildBudget;
using sandglass::Deadline;
using sandglass::Duration;
using sandglass::Reason;
using sandglass::TimePoint;

namespace {

// The policy of the header's example.
constexpr BudgetPolicy kPolicy{
    .min_useful = 5ms, .default_budget = 2s, .max_budget = 30s, .reserve = 10ms};

const TimePoint kNow{100s};

bool starts_with_field(const std::string& message, const std::string& field) {
  return message.starts_with(field + ": ");
}

}  // namespace

TEST_SUITE("BudgetPolicy") {
  TEST_CASE("a request without a budget is granted the default budget") {
    const BudgetGrant g = kPolicy.grant(std::nullopt);
    CHECK(g.budget == 2s);
    CHECK(g.defaulted);
    CHECK_FALSE(g.clamped);
    CHECK(g.reason == Reason::ok);
    CHECK(g.ok());
  }

  TEST_CASE("a requested budget within the limits is granted unchanged") {
    const BudgetGrant g = kPolicy.grant(250ms);
    CHECK(g.budget == 250ms);
    CHECK_FALSE(g.defaulted);
    CHECK_FALSE(g.clamped);
    CHECK(g.ok());
  }

  TEST_CASE("a requested budget above the maximum is clamped to the maximum") {
    Duration requested{};
    SUBCASE("one nanosecond above") { requested = 30s + 1ns; }
    SUBCASE("one hour") { requested = 1h; }
    SUBCASE("the largest duration") { requested = Duration::max(); }
    CAPTURE(requested.count());
    const BudgetGrant g = kPolicy.grant(requested);
    CHECK(g.budget == 30s);
    CHECK(g.clamped);
    CHECK_FALSE(g.defaulted);
    CHECK(g.ok());
  }

  TEST_CASE("a requested budget exactly at the maximum is not clamped") {
    const BudgetGrant g = kPolicy.grant(30s);
    CHECK(g.budget == 30s);
    CHECK_FALSE(g.clamped);
    CHECK(g.ok());
  }

  TEST_CASE("a requested budget exactly at the minimum useful duration is granted") {
    const BudgetGrant g = kPolicy.grant(5ms);
    CHECK(g.budget == 5ms);
    CHECK(g.reason == Reason::ok);
    CHECK(g.ok());
  }

  TEST_CASE("a requested budget below the minimum useful duration is rejected as too small") {
    const BudgetGrant g = kPolicy.grant(5ms - 1ns);
    CHECK(g.budget == 5ms - 1ns);
    CHECK(g.reason == Reason::budget_too_small);
    CHECK_FALSE(g.ok());
    CHECK_FALSE(g.clamped);
    CHECK_FALSE(g.defaulted);
  }

  TEST_CASE("a zero or negative requested budget becomes zero and is rejected as too small") {
    Duration requested{};
    SUBCASE("zero") { requested = Duration::zero(); }
    SUBCASE("minus one nanosecond") { requested = -1ns; }
    SUBCASE("minus one second") { requested = -1s; }
    SUBCASE("the most negative duration") { requested = Duration::min(); }
    CAPTURE(requested.count());
    const BudgetGrant g = kPolicy.grant(requested);
    CHECK(g.budget == Duration::zero());
    CHECK(g.reason == Reason::budget_too_small);
    CHECK_FALSE(g.ok());
    CHECK_FALSE(g.clamped);
    CHECK_FALSE(g.defaulted);
  }

  TEST_CASE("a policy without a minimum useful duration grants a zero budget") {
    BudgetPolicy p = kPolicy;
    p.min_useful = Duration::zero();
    const BudgetGrant g = p.grant(-1s);
    CHECK(g.budget == Duration::zero());
    CHECK(g.ok());
  }

  TEST_CASE("a child budget is what remains of the deadline minus the reserve") {
    const ChildBudget c = kPolicy.child_budget(Deadline::after(1s, kNow), kNow);
    CHECK(c.budget == 990ms);
    CHECK(c.reason == Reason::ok);
    CHECK(c.ok());
  }

  TEST_CASE("a child budget is the smallest of remaining minus reserve and the caps") {
    const Deadline d = Deadline::after(1s, kNow);  // 990 ms after the reserve
    SUBCASE("the dependency cap is smallest") {
      const ChildBudget c = kPolicy.child_budget(d, kNow, {.dependency_cap = 500ms});
      CHECK(c.budget == 500ms);
      CHECK(c.ok());
    }
    SUBCASE("the latency cap is smallest") {
      const ChildBudget c =
          kPolicy.child_budget(d, kNow, {.dependency_cap = 500ms, .latency_cap = 300ms});
      CHECK(c.budget == 300ms);
      CHECK(c.ok());
    }
    SUBCASE("the dependency cap is smaller than the latency cap") {
      const ChildBudget c =
          kPolicy.child_budget(d, kNow, {.dependency_cap = 200ms, .latency_cap = 300ms});
      CHECK(c.budget == 200ms);
      CHECK(c.ok());
    }
    SUBCASE("only a latency cap") {
      const ChildBudget c = kPolicy.child_budget(d, kNow, {.latency_cap = 700ms});
      CHECK(c.budget == 700ms);
      CHECK(c.ok());
    }
    SUBCASE("caps larger than what remains do not raise the budget") {
      const ChildBudget c =
          kPolicy.child_budget(d, kNow, {.dependency_cap = 5s, .latency_cap = 991ms});
      CHECK(c.budget == 990ms);
      CHECK(c.ok());
    }
    SUBCASE("a cap equal to what remains") {
      const ChildBudget c = kPolicy.child_budget(d, kNow, {.dependency_cap = 990ms});
      CHECK(c.budget == 990ms);
      CHECK(c.ok());
    }
  }

  TEST_CASE("a child budget is measured from the given now and not from the deadline's creation") {
    const Deadline d = Deadline::after(1s, kNow);
    CHECK(kPolicy.child_budget(d, kNow + 400ms).budget == 590ms);
    CHECK(kPolicy.child_budget(d, kNow + 985ms).budget == 5ms);
  }

  TEST_CASE("a child budget exactly at the minimum useful duration is ok") {
    const ChildBudget c = kPolicy.child_budget(Deadline::after(15ms, kNow), kNow);
    CHECK(c.budget == 5ms);
    CHECK(c.reason == Reason::ok);
  }

  TEST_CASE("a child budget below the minimum useful duration fails before dispatch") {
    SUBCASE("one nanosecond short after the reserve") {
      const ChildBudget c = kPolicy.child_budget(Deadline::after(15ms - 1ns, kNow), kNow);
      CHECK(c.budget == 5ms - 1ns);
      CHECK(c.reason == Reason::deadline_exceeded_before_dispatch);
      CHECK_FALSE(c.ok());
    }
    SUBCASE("less time left than the reserve") {
      const ChildBudget c = kPolicy.child_budget(Deadline::after(3ms, kNow), kNow);
      CHECK(c.budget == Duration::zero());
      CHECK(c.reason == Reason::deadline_exceeded_before_dispatch);
    }
    SUBCASE("exactly the reserve left") {
      const ChildBudget c = kPolicy.child_budget(Deadline::after(10ms, kNow), kNow);
      CHECK(c.budget == Duration::zero());
      CHECK(c.reason == Reason::deadline_exceeded_before_dispatch);
    }
    SUBCASE("a cap below the minimum useful duration") {
      const ChildBudget c =
          kPolicy.child_budget(Deadline::after(1s, kNow), kNow, {.latency_cap = 1ms});
      CHECK(c.budget == 1ms);
      CHECK(c.reason == Reason::deadline_exceeded_before_dispatch);
    }
    SUBCASE("a negative cap counts as zero") {
      const ChildBudget c =
          kPolicy.child_budget(Deadline::after(1s, kNow), kNow, {.dependency_cap = -1s});
      CHECK(c.budget == Duration::zero());
      CHECK(c.reason == Reason::deadline_exceeded_before_dispatch);
    }
  }

  TEST_CASE("a child of an expired deadline gets a zero budget and fails before dispatch") {
    Deadline d;
    SUBCASE("expired exactly now") { d = Deadline::at(kNow); }
    SUBCASE("expired a second ago") { d = Deadline::at(kNow - 1s); }
    SUBCASE("expired at the start of the clock") { d = Deadline::at(TimePoint::min()); }
    const ChildBudget c = kPolicy.child_budget(d, kNow, {.dependency_cap = 500ms});
    CHECK(c.budget == Duration::zero());
    CHECK(c.reason == Reason::deadline_exceeded_before_dispatch);
    CHECK_FALSE(c.ok());
  }

  TEST_CASE("a child of a never deadline gets the largest budget minus the reserve or its cap") {
    CHECK(kPolicy.child_budget(Deadline::never(), TimePoint{}).budget == Duration::max() - 10ms);
    CHECK(kPolicy.child_budget(Deadline::never(), TimePoint::min()).budget ==
          Duration::max() - 10ms);
    CHECK(kPolicy.child_budget(Deadline::never(), kNow, {.dependency_cap = 500ms}).budget ==
          500ms);
  }

  TEST_CASE("the child budget overload without now reads the steady clock") {
    SUBCASE("a cap decides") {
      const ChildBudget c = kPolicy.child_budget(Deadline::never(), {.dependency_cap = 500ms});
      CHECK(c.budget == 500ms);
      CHECK(c.ok());
    }
    SUBCASE("an expired deadline") {
      const ChildBudget c = kPolicy.child_budget(Deadline::after(-1s));
      CHECK(c.budget == Duration::zero());
      CHECK(c.reason == Reason::deadline_exceeded_before_dispatch);
    }
  }

  TEST_CASE("a consistent policy validates without a message") {
    SUBCASE("the defaults") { CHECK(BudgetPolicy{}.validate() == ""); }
    SUBCASE("the header's example") { CHECK(kPolicy.validate() == ""); }
    SUBCASE("all boundaries equal") {
      const BudgetPolicy p{.min_useful = 1s, .default_budget = 1s, .max_budget = 1s,
                           .reserve = Duration::zero()};
      CHECK(p.validate() == "");
    }
    SUBCASE("all zero") {
      const BudgetPolicy p{.min_useful = Duration::zero(), .default_budget = Duration::zero(),
                           .max_budget = Duration::zero(), .reserve = Duration::zero()};
      CHECK(p.validate() == "");
    }
  }

  TEST_CASE("an inconsistent policy is reported with a message that names the field") {
    BudgetPolicy p = kPolicy;
    std::string field;
    SUBCASE("negative min_useful") {
      p.min_useful = -1ns;
      field = "min_useful";
    }
    SUBCASE("negative reserve") {
      p.reserve = -1ns;
      field = "reserve";
    }
    SUBCASE("default_budget below min_useful") {
      p.default_budget = 5ms - 1ns;
      field = "default_budget";
    }
    SUBCASE("max_budget below default_budget") {
      p.max_budget = 2s - 1ns;
      field = "max_budget";
    }
    CAPTURE(field);
    const std::string message = p.validate();
    CAPTURE(message);
    CHECK(starts_with_field(message, field));
    CHECK(message.size() > field.size() + 2);
  }
}
