#include "daemon/http/http_status.hpp"

#include <doctest/doctest.h>

#include <cstddef>

using sandglass::CancelCause;
using sandglass::Outcome;
using sandglass::Reason;
using sandglass::State;
using sandglass::daemon::http_status_of;

namespace {
Outcome outcome(State state, Reason reason, CancelCause cause = CancelCause::none) {
  Outcome o;
  o.state = state;
  o.reason = reason;
  o.cause = cause;
  return o;
}
}  // namespace

TEST_SUITE("http status table") {
  TEST_CASE("every outcome maps to the status the API documents") {
    struct Row {
      Outcome o;
      unsigned code;
      bool retry_after;
    };
    const Row rows[] = {
        {outcome(State::completed, Reason::ok), 200, false},
        {outcome(State::completed, Reason::completed_after_cancel, CancelCause::caller), 200, false},
        {outcome(State::failed, Reason::handler_error), 500, false},
        {outcome(State::rejected, Reason::queue_full), 503, true},
        {outcome(State::rejected, Reason::deadline_implausible), 503, true},
        {outcome(State::rejected, Reason::shed), 503, true},
        {outcome(State::rejected, Reason::shutting_down), 503, true},
        {outcome(State::rejected, Reason::budget_too_small), 504, false},
        {outcome(State::expired, Reason::expired_in_queue), 504, false},
        {outcome(State::expired, Reason::too_late_to_start), 504, false},
        {outcome(State::failed, Reason::deadline_exceeded_before_dispatch), 504, false},
        {outcome(State::failed, Reason::retry_skipped_budget), 504, false},
        {outcome(State::failed, Reason::breaker_open), 503, true},
        {outcome(State::cancelled, Reason::cancelled_while_running, CancelCause::deadline), 504, false},
        {outcome(State::cancelled, Reason::cancelled_while_running, CancelCause::upstream), 504, false},
        {outcome(State::cancelled, Reason::cancelled_while_running, CancelCause::caller), 499, false},
        {outcome(State::cancelled, Reason::cancelled_in_queue, CancelCause::caller), 499, false},
        {outcome(State::cancelled, Reason::cancelled_in_queue, CancelCause::shutdown), 503, true},
        {outcome(State::cancelled, Reason::cancelled_while_running, CancelCause::shutdown), 503, true},
    };
    for (const Row& r : rows) {
      CAPTURE(sandglass::to_string(r.o.reason));
      CAPTURE(sandglass::to_string(r.o.cause));
      CHECK(http_status_of(r.o).code == r.code);
      CHECK(http_status_of(r.o).retry_after == r.retry_after);
    }
  }

  TEST_CASE("a reason's status follows its state unless the reason says more") {
    // The reasons that say more than their state, and what they say.
    const auto special = [](Reason r) -> unsigned {
      switch (r) {
        case Reason::budget_too_small:
        case Reason::deadline_exceeded_before_dispatch:
        case Reason::retry_skipped_budget:
          return 504;
        case Reason::breaker_open:
          return 503;
        case Reason::invalid_input:
          return 400;
        default:
          return 0;
      }
    };
    for (std::size_t i = 0; i < sandglass::kReasonCount; ++i) {
      const auto reason = static_cast<Reason>(i);
      CAPTURE(sandglass::to_string(reason));
      unsigned expected = special(reason);
      if (expected == 0) {
        switch (sandglass::state_of(reason)) {
          case State::completed: expected = 200; break;
          case State::failed: expected = 500; break;
          case State::rejected: expected = 503; break;
          case State::expired: expected = 504; break;
          case State::cancelled: expected = 499; break;  // cause caller
        }
      }
      CHECK(sandglass::daemon::http_status_of(reason, CancelCause::caller).code == expected);
      CHECK(http_status_of(outcome(sandglass::state_of(reason), reason, CancelCause::caller)).code ==
            expected);
    }
  }

  TEST_CASE("a submitter whose job a DELETE cancelled gets 409, its own disconnect stays 499") {
    const Outcome running = outcome(State::cancelled, Reason::cancelled_while_running, CancelCause::caller);
    const Outcome queued = outcome(State::cancelled, Reason::cancelled_in_queue, CancelCause::caller);
    CHECK(http_status_of(running, true).code == 409);
    CHECK(http_status_of(queued, true).code == 409);
    CHECK(http_status_of(running, false).code == 499);
    CHECK_FALSE(http_status_of(running, true).retry_after);
    // Other outcomes do not change with it: a deadline, shutdown, a completion.
    CHECK(http_status_of(outcome(State::cancelled, Reason::cancelled_while_running,
                                 CancelCause::deadline), true).code == 504);
    CHECK(http_status_of(outcome(State::cancelled, Reason::cancelled_while_running,
                                 CancelCause::shutdown), true).code == 503);
    CHECK(http_status_of(outcome(State::completed, Reason::completed_after_cancel,
                                 CancelCause::caller), true).code == 200);
  }
}
