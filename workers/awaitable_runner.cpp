#include "workers/awaitable_runner.hpp"

#include "workers/job.hpp"
#include "workers/job_runner.hpp"
#include "workers/worker_pool.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <exception>
#include <utility>

namespace sandglass::detail {
namespace asio = boost::asio;

namespace {

asio::awaitable<void> run_body(AwaitableRun* run) { co_await run->handler.fn(*run->ctx); }

// The outcome of a job cancelled before its coroutine started: as if it had been removed from
// the queue.
void end_unstarted(JobRef job, JobSource& source) noexcept {
  Outcome o = begin_outcome(*job);
  const CancelCause cause = job->close_cancel();
  o.cause = cause;
  o.state = cause == CancelCause::deadline ? State::expired : State::cancelled;
  o.reason = cause == CancelCause::deadline ? Reason::expired_in_queue : Reason::cancelled_in_queue;
  o.timings.remaining_at_end = job->deadline.slack(Clock::now());
  source.finish_detached(std::move(job), std::move(o));
}

}  // namespace

void launch_awaitable(const JobRef& job, JobSource& source, const BudgetPolicy& policy) {
  AwaitableRun& pending = *job->awaitable();
  auto strand = asio::make_strand(pending.handler.executor);
  // Registered before the start is posted; runs at once if the job is cancelled already. The
  // callback holds no reference (the job owns the registration); whoever cancels holds one.
  pending.unstarted = job->token().on_cancel([j = job.get(), &source]() noexcept {
    auto expected = AwaitableRun::Launch::pending;
    if (j->awaitable()->launch.compare_exchange_strong(expected, AwaitableRun::Launch::abandoned,
                                                       std::memory_order_acq_rel)) {
      end_unstarted(JobRef{j}, source);
    }
  });
  // Everything from here on happens on the strand: the bridge's emits, the co_spawn that binds
  // the signal's slot, the coroutine and its completion never race.
  asio::post(strand, [job, &source, &policy, strand]() mutable {
    AwaitableRun& run = *job->awaitable();
    // Either this start or the cancellation above wins (acq_rel pairs the two exchanges); the
    // loser does nothing.
    auto expected = AwaitableRun::Launch::pending;
    if (!run.launch.compare_exchange_strong(expected, AwaitableRun::Launch::started,
                                            std::memory_order_acq_rel)) {
      return;
    }
    run.unstarted.reset();
    run.ctx.emplace(job->id, job->kind(), job->deadline, job->token(), policy,
                    job->idempotency_key());
    // A cancellation reaches the coroutine as a terminal Asio cancellation, emitted on the
    // strand (a cancellation_signal is not thread-safe). If the job is cancelled already, this
    // posts the emit at once; it runs after this function, once the slot is bound below.
    // The callback holds no reference (the job owns the registration, reset before the job
    // can go); whoever cancels holds one, so the emit it posts may take one of its own.
    run.bridge = run.ctx->token().on_cancel([j = job.get(), strand]() noexcept {
      asio::post(strand, [ref = JobRef{j}] {
        if (!ref->awaitable()->done) ref->awaitable()->signal.emit(asio::cancellation_type::terminal);
      });
    });
    auto completion = [job, &source](std::exception_ptr error) mutable {
      // On the strand: the coroutine is over.
      AwaitableRun& r = *job->awaitable();
      r.done = true;     // an emit still queued does nothing
      r.bridge.reset();  // and no more are posted
      Outcome o = begin_outcome(*job);
      settle_outcome(o, *job, *r.ctx, std::move(error));
      r.handler.fn = nullptr;  // what the coroutine's factory captured goes as the job ends
      r.ctx.reset();           // its token holds the job: kept, it would keep itself alive
      source.finish_detached(std::move(job), std::move(o));
    };
    asio::co_spawn(strand, run_body(&run),
                   asio::bind_cancellation_slot(
                       run.signal.slot(), asio::bind_executor(strand, std::move(completion))));
  });
}

}  // namespace sandglass::detail
