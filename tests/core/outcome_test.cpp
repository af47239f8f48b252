#include <sandglass/outcome.hpp>

#include <doctest/doctest.h>

#include <cstddef>

using sandglass::Reason;
using sandglass::State;
using sandglass::state_of;

TEST_SUITE("Outcome") {
  TEST_CASE("state_of gives every reason the state the outcome table documents") {
    struct Row {
      Reason reason;
      State state;
    };
    constexpr Row rows[] = {
        {Reason::ok, State::completed},
        {Reason::completed_after_cancel, State::completed},
        {Reason::handler_error, State::failed},
        {Reason::shutting_down, State::rejected},
        {Reason::budget_too_small, State::rejected},
        {Reason::deadline_implausible, State::rejected},
        {Reason::queue_full, State::rejected},
        {Reason::shed, State::rejected},
        {Reason::expired_in_queue, State::expired},
        {Reason::too_late_to_start, State::expired},
        {Reason::cancelled_in_queue, State::cancelled},
        {Reason::cancelled_while_running, State::cancelled},
        {Reason::deadline_exceeded_before_dispatch, State::failed},
        {Reason::retry_skipped_budget, State::failed},
        {Reason::breaker_open, State::failed},
        {Reason::node_lost, State::failed},
        {Reason::invalid_input, State::failed},
    };
    static_assert(std::size(rows) == sandglass::kReasonCount, "a row for every reason");
    for (const Row& r : rows) {
      CAPTURE(sandglass::to_string(r.reason));
      CHECK(state_of(r.reason) == r.state);
    }
  }

  TEST_CASE("a reason outside the enum counts as failed") {
    CHECK(state_of(static_cast<Reason>(sandglass::kReasonCount)) == State::failed);
    CHECK(state_of(static_cast<Reason>(255)) == State::failed);
  }
}
