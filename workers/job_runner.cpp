#include "workers/job_runner.hpp"

#include <exception>

namespace sandglass::detail {
namespace {

// What a handler that threw while its job was cancelled (and not committed) ended as.
void mark_cancelled(Outcome& o, CancelCause cause) {
  o.state = State::cancelled;
  o.reason = Reason::cancelled_while_running;
  o.cause = cause;
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
    JobContext ctx{job.id, job.kind, job.deadline, job.token(), policy};
    try {
      job.handler(ctx);
      o.cause = ctx.cause();
      o.state = State::completed;
      o.reason = o.cause == CancelCause::none ? Reason::ok : Reason::completed_after_cancel;
      o.result = ctx.take_result();
    } catch (const Cancelled& c) {
      mark_cancelled(o, ctx.cancelled() ? ctx.cause() : c.cause());
    } catch (const std::exception& e) {
      o.error = e.what();
      if (ctx.cancelled() && !ctx.committed()) {
        mark_cancelled(o, ctx.cause());
      } else {
        o.state = State::failed;
        o.reason = Reason::handler_error;
        o.cause = ctx.cause();
      }
    } catch (...) {
      o.error = "unknown exception";
      if (ctx.cancelled() && !ctx.committed()) {
        mark_cancelled(o, ctx.cause());
      } else {
        o.state = State::failed;
        o.reason = Reason::handler_error;
        o.cause = ctx.cause();
      }
    }
  }
  const TimePoint end = Clock::now();
  o.timings.run_time = end - job.started_at;
  o.timings.remaining_at_end = job.deadline.slack(end);
  return o;
}

}  // namespace sandglass::detail
