#include "daemon/http/http_status.hpp"

#include <array>

namespace sandglass::daemon {
namespace {

constexpr HttpStatus kOk{200};
constexpr HttpStatus kFailed{500};
constexpr HttpStatus kTryLater{kStatusServiceUnavailable, true};
constexpr HttpStatus kOutOfTime{504};
constexpr HttpStatus kCallerGone{kStatusClientClosedRequest};

// Indexed by Reason. Cancellations are refined by their cause below.
constexpr std::array<HttpStatus, kReasonCount> kByReason{
    kOk,          // ok
    kOk,          // completed_after_cancel
    kFailed,      // handler_error
    kTryLater,    // shutting_down
    kOutOfTime,   // budget_too_small
    kTryLater,    // deadline_implausible
    kTryLater,    // queue_full
    kTryLater,    // shed
    kOutOfTime,   // expired_in_queue
    kOutOfTime,   // too_late_to_start
    kCallerGone,  // cancelled_in_queue (see the cause)
    kCallerGone,  // cancelled_while_running (see the cause)
    kOutOfTime,   // deadline_exceeded_before_dispatch
    kOutOfTime,   // retry_skipped_budget
    kTryLater,    // breaker_open
};
static_assert(static_cast<std::size_t>(Reason::breaker_open) + 1 == kByReason.size());

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

HttpStatus http_status_of(const Outcome& outcome) noexcept {
  if (outcome.state == State::cancelled) return kByCause[static_cast<std::size_t>(outcome.cause)];
  return kByReason[static_cast<std::size_t>(outcome.reason)];
}

}  // namespace sandglass::daemon
