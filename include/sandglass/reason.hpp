// reason.hpp — `Reason`, the one enum of codes that say why a job ended the way it did.
//
// Overload is a normal outcome, not an exception: admission and dequeue answer with a reason
// code. The daemon maps these codes to HTTP status codes in exactly one table.
//
//   if (o.reason == sandglass::Reason::queue_full) retry_elsewhere();
//   log(sandglass::to_string(o.reason));   // "queue_full"
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace sandglass {

enum class Reason : std::uint8_t {
  ok,                      // completed: the handler returned
  completed_after_cancel,  // completed: a cancellation arrived but the handler finished anyway
                           // (after `commit()`, or without reaching a checkpoint)
  handler_error,           // failed: the handler threw
  shutting_down,           // rejected: the runtime no longer admits work
  budget_too_small,        // rejected: less budget than the minimum useful duration
  deadline_implausible,    // rejected: predicted completion lies after the deadline
  queue_full,              // rejected: no room and nothing of a lower class to shed
  shed,                    // rejected: pushed out of a full queue by a job of a higher class
  expired_in_queue,        // expired: the deadline passed while it waited
  too_late_to_start,       // expired: at dequeue, less time left than the kind usually needs
  cancelled_in_queue,      // cancelled: before it started (see the outcome's cause)
  cancelled_while_running, // cancelled: at a checkpoint (see the outcome's cause)
  deadline_exceeded_before_dispatch,  // a child budget fell below the minimum useful duration
  retry_skipped_budget,    // a retry was due, but the rest of the budget could not cover the
                           // backoff, a realistic attempt and the reserve (or a Retry-After)
  breaker_open,            // the dependency's circuit breaker refused the call without trying
  node_lost,               // failed: in cluster mode, the node running it went silent longer
                           // than the lease, and it could not run again (past its commit
                           // point, asked to cancel, or too little time left)
  invalid_input,           // failed: a value the job was given was refused where it was used
                           // (the daemon's sql kind: a parameter PostgreSQL cannot take, SQLSTATE
                           // class 22); the error names it
};

inline constexpr std::size_t kReasonCount = static_cast<std::size_t>(Reason::invalid_input) + 1;

// The snake_case name, as used on the wire and in metrics.
std::string_view to_string(Reason reason) noexcept;
// The inverse of `to_string`; nullopt for an unknown name.
std::optional<Reason> reason_from_string(std::string_view name) noexcept;

}  // namespace sandglass
