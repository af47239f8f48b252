// outcome.hpp — `Outcome`, the one terminal result every submitted job gets, and `State`.
//
//   sandglass::Outcome o = handle.wait();
//   if (o.state == sandglass::State::cancelled && o.cause == sandglass::CancelCause::deadline)
//     ...;   // ran out of time at a checkpoint
//
// Every submitted job, admitted or not, gets exactly one outcome, also on shutdown.
//
//   state      reason                              meaning
//   completed  ok                                  the handler returned
//   completed  completed_after_cancel              returned although cancelled (after commit(),
//                                                  then `committed` is true)
//   failed     handler_error                       the handler threw; `error` has its text
//   failed     deadline_exceeded_before_dispatch,  the handler gave up on a dependency
//              retry_skipped_budget, breaker_open  (it threw `JobFailed` with that reason)
//   failed     node_lost                           cluster mode: its node was lost and it could
//                                                  not run again (see docs/cluster.md)
//   failed     invalid_input                       a value it was given was refused where it
//                                                  was used (it threw `JobFailed` with it)
//   rejected   shutting_down, budget_too_small,    never admitted
//              deadline_implausible, queue_full
//   rejected   shed                                admitted, then pushed out by a higher class
//   expired    expired_in_queue, too_late_to_start removed from the queue without running
//   cancelled  cancelled_in_queue                  removed from the queue; see `cause`
//   cancelled  cancelled_while_running             stopped at a checkpoint; see `cause`
//
// A job submitted with a retry or a delay (see JobSpec) lists each attempt that ran in
// `attempts`; when a retry was due but did not happen, `retry_stop` says why (and a retry that
// the rest of the budget could not cover ends the job `failed`, `retry_skipped_budget`).
//
// `state_of(reason)` is this table, the one place that says which state a reason belongs to:
// whoever groups outcomes by state (the daemon's drain summary, its HTTP status table, its
// metrics) asks it instead of listing reasons again.
//
// Thread safety: a value type.
#pragma once

#include <sandglass/cancel.hpp>
#include <sandglass/deadline.hpp>
#include <sandglass/job_spec.hpp>
#include <sandglass/reason.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass {

enum class State : std::uint8_t { completed, failed, rejected, expired, cancelled };

inline constexpr std::size_t kStateCount = static_cast<std::size_t>(State::cancelled) + 1;

std::string_view to_string(State state) noexcept;

// The state an outcome with `reason` has (the table above). A reason outside the enum: failed.
State state_of(Reason reason) noexcept;

// Where a job's time went. Durations not reached (run time of a job that never ran) are zero.
struct Timings {
  Duration budget{};              // granted at admission
  Duration queue_wait{};          // from admission until it started or left the queue
  Duration run_time{};            // handler start to handler return
  Duration remaining_at_start{};  // deadline minus start time (zero if it never started)
  Duration remaining_at_end{};    // deadline minus end time; negative when it ended late
};

// One attempt of a job that ran (see JobSpec::retry): how it ended.
struct AttemptRecord {
  State state = State::failed;
  Reason reason = Reason::ok;
  std::string error;     // what it threw, if anything
  Duration run_time{};   // handler start to handler return
  bool committed = false;
};

// Why a job's retries stopped while its last attempt had failed. Bounded: fit for a metrics label.
enum class RetryStop : std::uint8_t {
  none,                    // no retry was due (the last attempt did not fail, or none was asked)
  attempts_exhausted,      // JobRetry::max_attempts ran
  retry_skipped_budget,    // the rest of the budget cannot cover backoff + estimate + reserve
  retry_budget_exhausted,  // the kind's retry budget had no token left
  committed,               // the failed attempt had passed its commit point
  cancelled,               // the job was cancelled
  rejected,                // admission refused the next attempt at its start
  shutting_down,           // the runtime stopped admitting
};

inline constexpr std::size_t kRetryStopCount = static_cast<std::size_t>(RetryStop::shutting_down) + 1;

// "none", "attempts_exhausted", ..., as in the enum.
std::string_view to_string(RetryStop stop) noexcept;

struct Outcome {
  JobId id = 0;
  std::string kind;
  State state = State::rejected;
  Reason reason = Reason::ok;
  CancelCause cause = CancelCause::none;  // the cancellation that arrived, if any
  // True if the handler passed its commit point (JobContext::commit succeeded): its effect may
  // be durable even if the outcome is not `completed` (it failed after committing).
  bool committed = false;
  Timings timings;
  std::string result;  // what the handler passed to JobContext::set_result (in any state)
  std::string error;   // what a failed or cancelled handler threw, if anything; for
                       // deadline_implausible, the prediction against the deadline
  // For deadline_implausible, and queue_full by the standing-queue rule: how long from the
  // refusal until the same job (same budget, same size) would be admitted, as predicted then:
  // once the work ahead of it has drained (to the target delay, for the standing-queue rule),
  // or, when its estimate alone exceeds its budget, once the samples behind that estimate have
  // aged out (if no run renews them; max() if they never do). Zero otherwise.
  Duration retry_after{};
  // With JobSpec::retry or delay: every attempt that ran, in order (empty if none ran). Empty
  // for other jobs: the outcome itself is then their one attempt, if it ran.
  std::vector<AttemptRecord> attempts;
  RetryStop retry_stop = RetryStop::none;

  // True if the job's handler ran at least until its first instruction.
  bool started() const noexcept {
    return state == State::completed || state == State::failed ||
           reason == Reason::cancelled_while_running;
  }
};

// Receives a job's outcome, exactly once.
using OutcomeCallback = std::function<void(const Outcome&)>;

}  // namespace sandglass
