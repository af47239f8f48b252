// http_status.hpp (private) — the one table from a job's outcome to its HTTP status.
//
//   completed (ok, completed_after_cancel)                      200
//   failed (handler_error)                                      500
//   rejected for overload (queue_full, deadline_implausible,
//            shed) or shutting_down                             503 + Retry-After
//   rejected budget_too_small, expired (expired_in_queue,
//            too_late_to_start), deadline_exceeded_before_dispatch  504
//   cancelled, cause deadline or upstream                       504
//   cancelled, cause caller                                     499 (client closed request)
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
