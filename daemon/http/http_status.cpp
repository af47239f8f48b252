#include "daemon/http/http_status.hpp"

#include <array>
#include <optional>

namespace sandglass::daemon {
namespace {

constexpr HttpStatus kOk{200};
constexpr HttpStatus kFailed{500};
constexpr HttpStatus kTryLater{kStatusServiceUnavailable, true};
constexpr HttpStatus kOutOfTime{504};
constexpr HttpStatus kBadInput{kStatusBadRequest};
constexpr HttpStatus kCallerGone{kStatusClientClosedRequest};

// Indexed by State (state_of(reason), the one table of states in outcome.hpp). Cancelled
// outcomes are refined by their cause below.
constexpr std::array<HttpStatus, kStateCount> kByState{
    kOk,          // completed
    kFailed,      // failed
    kTryLater,    // rejected
    kOutOfTime,   // expired
    kCallerGone,  // cancelled (see the cause)
};
static_assert(static_cast<std::size_t>(State::cancelled) + 1 == kByState.size());

// The reasons that say more than their state: time ran out (a retry later would not help), or
// a dependency is down for a while (a retry later may).
std::optional<HttpStatus> by_reason(Reason reason) noexcept {
  switch (reason) {
    case Reason::budget_too_small:
    case Reason::deadline_exceeded_before_dispatch:
    case Reason::retry_skipped_budget:
      return kOutOfTime;
    case Reason::breaker_open:
      return kTryLater;
    case Reason::invalid_input:
      return kBadInput;
    default:
      return std::nullopt;
  }
}

// Indexed by CancelCause, for cancelled outcomes.
constexpr std::array<HttpStatus, 5> kByCause{
    kCallerGone,  // none (a handler threw Cancelled on its own)
    kCallerGone,  // caller
    kOutOfTime,   // deadline
    kOutOfTime,   // upstream
    kTryLater,    // shutdown
};
static_assert(static_cast<std::size_t>(CancelCause::shutdown) + 1 == kByCause.size());

}  // namespace

HttpStatus http_status_of(Reason reason, CancelCause cause) noexcept {
  if (const auto special = by_reason(reason)) return *special;
  const State state = state_of(reason);
  if (state == State::cancelled) {
    const auto c = static_cast<std::size_t>(cause);
    return c < kByCause.size() ? kByCause[c] : kCallerGone;
  }
  return kByState[static_cast<std::size_t>(state)];
}

HttpStatus http_status_of(const Outcome& outcome) noexcept {
  return http_status_of(outcome.reason, outcome.cause);
}

HttpStatus http_status_of(const Outcome& outcome, bool cancelled_by_request) noexcept {
  if (cancelled_by_request && state_of(outcome.reason) == State::cancelled &&
      outcome.cause == CancelCause::caller) {
    return {kStatusConflict};
  }
  return http_status_of(outcome);
}

}  // namespace sandglass::daemon
