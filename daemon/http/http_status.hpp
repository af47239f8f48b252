// http_status.hpp (private) — the one table from a job's outcome to its HTTP status. It goes
// by the outcome's state, as `state_of(reason)` (outcome.hpp) names it, with a few reasons that
// say more than their state:
//
//   completed                                                   200
//   failed (handler_error, node_lost)                           500
//     deadline_exceeded_before_dispatch, retry_skipped_budget   504
//     breaker_open                                              503 + Retry-After
//     invalid_input (a value refused where it was used)         400
//   rejected (queue_full, deadline_implausible, shed,
//            shutting_down)                                     503 + Retry-After
//     budget_too_small (also a request whose budget was spent
//            before the daemon had read it)                     504
//   expired (expired_in_queue, too_late_to_start)               504
//   cancelled, cause deadline or upstream                       504
//   cancelled, cause caller                                     499 (client closed request:
//                                                               its own client went away)
//     ... by a DELETE /v1/jobs/{id}, answered to a submitter
//         still waiting for it (cancelled_by_request)           409 (Conflict: another request
//                                                               cancelled it; body cause caller)
//   cancelled, cause shutdown                                   503 + Retry-After
//
// Thread safety: pure functions.
#pragma once

#include <sandglass/outcome.hpp>

namespace sandglass::daemon {

struct HttpStatus {
  unsigned code = 200;
  bool retry_after = false;  // the client may try again later: send a Retry-After header
};

HttpStatus http_status_of(const Outcome& outcome) noexcept;
// The same for a submitter's answer: `cancelled_by_request` when a DELETE cancelled the job
// (a cancelled outcome with cause caller is then 409, not 499).
HttpStatus http_status_of(const Outcome& outcome, bool cancelled_by_request) noexcept;
// The same for an outcome with `reason` and `cause` (the cause matters for cancellations only).
HttpStatus http_status_of(Reason reason, CancelCause cause = CancelCause::none) noexcept;

// Status codes the daemon uses besides the table above.
inline constexpr unsigned kStatusAccepted = 202;
inline constexpr unsigned kStatusBadRequest = 400;
inline constexpr unsigned kStatusUnauthorized = 401;
inline constexpr unsigned kStatusNotFound = 404;
inline constexpr unsigned kStatusMethodNotAllowed = 405;
inline constexpr unsigned kStatusRequestTimeout = 408;
inline constexpr unsigned kStatusConflict = 409;
inline constexpr unsigned kStatusPayloadTooLarge = 413;
inline constexpr unsigned kStatusHeadersTooLarge = 431;
inline constexpr unsigned kStatusClientClosedRequest = 499;
inline constexpr unsigned kStatusServiceUnavailable = 503;

}  // namespace sandglass::daemon
