#include "workers/job_runner.hpp"

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
void record_throw(Outcome& o, const JobContext& ctx, std::string message,
                  Reason reason = Reason::handler_error) {
  o.error = std::move(message);
  // The token is read once: the timer may signal the deadline between two reads.
  const bool cancelled = ctx.cancelled();
  if (!ctx.committed() && (cancelled || ctx.deadline().expired())) {
    mark_cancelled(o, cancelled ? ctx.cause() : CancelCause::deadline);
    return;
  }
  o.state = State::failed;
  o.reason = reason;
  o.cause = ctx.cause();
}

}  // namespace

Outcome run_job(Job& job, const BudgetPolicy& policy) noexcept {
  Outcome o;
  o.id = job.id;
  o.kind = job.kind;
  o.timings.budget = job.budget;
  o.timings.queue_wait = job.started_at - job.enqueued_at;
  o.timings.remaining_at_start = job.deadline.slack(job.started_at);
  {
    // The context goes (and its on_cancel callbacks are deregistered) before the outcome.
    JobContext ctx{job.id, job.kind, job.deadline, job.token(), policy, job.idempotency_key};
    try {
      job.handler(ctx);
      o.cause = ctx.cause();
      o.state = State::completed;
      o.reason = o.cause == CancelCause::none ? Reason::ok : Reason::completed_after_cancel;
    } catch (const Cancelled& c) {
      mark_cancelled(o, ctx.cancelled() ? ctx.cause() : c.cause());
    } catch (const JobFailed& e) {
      record_throw(o, ctx, e.what(), e.reason());
    } catch (const std::exception& e) {
      record_throw(o, ctx, e.what());
    } catch (...) {
      record_throw(o, ctx, "unknown exception");
    }
    // Also when it failed or was cancelled: a partial result can say how far it got.
    o.result = ctx.take_result();
  }
  const TimePoint end = Clock::now();
  o.timings.run_time = end - job.started_at;
  o.timings.remaining_at_end = job.deadline.slack(end);
  return o;
}

}  // namespace sandglass::detail
