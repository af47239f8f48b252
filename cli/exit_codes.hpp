// exit_codes.hpp — what `sandglass` exits with, so that a script can tell outcomes apart. The
// one table from a job's record (its state, reason and cause, as GET /v1/jobs/{id} shows
// them) to an exit code:
//
//   0 completed     completed (ok, completed_after_cancel); also a job not ended yet, shown
//                   without waiting (queued, running, or the 202 of a submit)
//   1 failed        failed (handler_error, node_lost, breaker_open, ...); also a daemon error
//                   without a record (a 5xx)
//   2 usage         bad flags or arguments, and what the daemon refuses as a request (400, 401,
//                   404, 405, 409 without a record, 413, 431), with its message on stderr
//   3 rejected      rejected at admission (budget_too_small, deadline_implausible, queue_full,
//                   shed, shutting_down)
//   4 deadline      expired (expired_in_queue, too_late_to_start); cancelled with cause
//                   deadline; failed because the budget left no room (deadline_exceeded_before_
//                   dispatch, retry_skipped_budget); and a job still running when a wait for it
//                   ended at its deadline plus the reserve
//   5 cancelled     cancelled for any other cause (caller: a DELETE or `sandglass cancel`, or
//                   the submitter went away; upstream; shutdown)
//   6 unreachable   the daemon cannot be reached (message on stderr)
//
// Thread safety: pure functions.
#pragma once

#include <boost/json/object.hpp>

namespace sandglass::cli {

enum class ExitCode : int {
  completed = 0,
  failed = 1,
  usage = 2,
  rejected = 3,
  deadline = 4,
  cancelled = 5,
  unreachable = 6,
};

// The code for a record (or a submit's 202 {"id", "state": "queued"}). `waited`: the record is
// the answer to a wait for the job's end, so a job not ended is one its deadline passed.
ExitCode exit_code_of(const boost::json::object& record, bool waited);

// The code for a batch's answer (POST /v1/jobs/batch): 3 rejected when any job was rejected at
// admission, else 2 usage when any was refused as a request (an idempotency key's conflict),
// else 0 (every job admitted; they have not ended yet).
ExitCode exit_code_of_batch(const boost::json::object& answer);

// Whether the record says the job has not ended yet (queued, running, scheduled, cancelling).
bool not_ended(const boost::json::object& record);

}  // namespace sandglass::cli
