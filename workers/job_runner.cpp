#include "workers/job_runner.hpp"

#include "workers/callback_scope.hpp"

#include <cstdint>
#include <exception>
#include <string>

namespace sandglass::detail {
namespace {

void mark_cancelled(Outcome& o, CancelCause cause) {
  o.state = State::cancelled;
  o.reason = Reason::cancelled_while_running;
  o.cause = cause;
}

// The handler threw `message`. If the job was cancelled before its commit point, the exception
// is most likely the cancellation reaching the real work (a closed socket, a killed child):
// the job counts as cancelled. So does one whose deadline passed before the timer signalled it:
// work bounded by the same deadline (a socket timeout) may notice it first. Otherwise it failed.
// `cause` is what the token held when it was closed.
void record_throw(Outcome& o, const JobContext& ctx, CancelCause cause, std::string message,
                  Reason reason = Reason::handler_error) {
  o.error = std::move(message);
  if (!ctx.committed() && (cause != CancelCause::none || ctx.deadline().expired())) {
    mark_cancelled(o, cause != CancelCause::none ? cause : CancelCause::deadline);
    return;
  }
  o.state = State::failed;
  o.reason = reason;
  o.cause = cause;
}

}  // namespace

Outcome begin_outcome(const Job& job) {
  Outcome o;
  o.id = job.id;
  o.kind = job.kind();
  o.timings.budget = job.budget;
  o.timings.queue_wait = job.started_at - job.enqueued_at;
  o.timings.remaining_at_start = job.deadline.slack(job.started_at);
  return o;
}

void settle_outcome(Outcome& o, Job& job, JobContext& ctx, std::exception_ptr error) noexcept {
  enum class Ended : std::uint8_t { returned, cancelled, threw } ended = Ended::returned;
  std::string message;
  Reason reason = Reason::handler_error;
  CancelCause thrown_cause = CancelCause::none;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const Cancelled& c) {
      ended = Ended::cancelled;
      thrown_cause = c.cause();
    } catch (const JobFailed& e) {
      ended = Ended::threw;
      // Only a failure reason says how a run failed; any other (ok, queue_full, shed, ...)
      // would make a run that threw look completed or never admitted. That is the handler's
      // programming error, recorded as one.
      if (state_of(e.reason()) == State::failed) {
        message = e.what();
        reason = e.reason();
      } else {
        message = std::string{"JobFailed was thrown with reason "} + std::string{to_string(e.reason())} +
                  ", which is not a failure reason: " + e.what();
      }
    } catch (const std::exception& e) {
      ended = Ended::threw;
      message = e.what();
    } catch (...) {
      ended = Ended::threw;
      message = "unknown exception";
    }
  }
  // From here on the job accepts no cancellation (JobHandle::cancel returns false), so the
  // cause read here is the one the outcome reports: a cancellation either made it in or
  // was refused.
  const CancelCause cause = job.close_cancel();
  switch (ended) {
    case Ended::returned:
      o.cause = cause;
      o.state = State::completed;
      o.reason = cause == CancelCause::none ? Reason::ok : Reason::completed_after_cancel;
      break;
    case Ended::cancelled:
      mark_cancelled(o, cause != CancelCause::none ? cause : thrown_cause);
      break;
    case Ended::threw:
      record_throw(o, ctx, cause, std::move(message), reason);
      break;
  }
  o.committed = ctx.committed();
  // Also when it failed or was cancelled: a partial result can say how far it got.
  o.result = ctx.take_result();
  const TimePoint end = Clock::now();
  o.timings.run_time = end - job.started_at;
  o.timings.remaining_at_end = job.deadline.slack(end);
}

Outcome run_job(Job& job, const BudgetPolicy& policy) noexcept {
  Outcome o = begin_outcome(job);
  // The context goes before the outcome is complete (the handler's on_cancel registrations went
  // with its scopes).
  JobContext ctx{job.id, job.kind(), job.deadline, job.token(), policy, job.idempotency_key()};
  std::exception_ptr error;
  try {
    const CallbackScope scope{job.core()};
    job.handler(ctx);
  } catch (...) {
    error = std::current_exception();
  }
  settle_outcome(o, job, ctx, std::move(error));
  return o;
}

}  // namespace sandglass::detail
