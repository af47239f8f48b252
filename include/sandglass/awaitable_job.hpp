// awaitable_job.hpp — `AwaitableHandler`: a job whose handler is a Boost.Asio coroutine that runs
// on an executor the caller names, and `awaitable_job`, which makes one.
//
//   boost::asio::io_context io;   // run by the service's own threads
//   rt.submit({.kind = "fetch", .priority = sandglass::Priority::high, .budget = 200ms},
//             sandglass::awaitable_job(io.get_executor(),
//                 [](sandglass::JobContext& ctx) -> boost::asio::awaitable<void> {
//                   boost::asio::steady_timer t{co_await boost::asio::this_coro::executor, 1s};
//                   co_await t.async_wait(boost::asio::use_awaitable);  // ends with
//                   ctx.set_result("done");          // operation_aborted at the deadline
//                 }));
//
// A slot, not a thread: admission and concurrency count an awaitable job as running from the
// moment a worker takes it from the queue until the coroutine has finished, exactly like a
// blocking job (it holds one of the runtime's `workers` run slots, and kind limits apply), but
// no worker thread waits for it: the worker starts it on the executor and takes the next job as
// soon as a slot is free. The coroutine runs on a strand of the named executor, so its code never
// runs on two threads at once.
//
// Cancellation: when the job is cancelled (its deadline, `JobHandle::cancel`, a parent token,
// shutdown) the runtime emits a terminal Asio cancellation into the coroutine, on its strand: the
// operation it awaits completes with `operation_aborted` (with `use_awaitable`: throws
// boost::system::system_error), and any later `co_await` of an asynchronous operation throws the
// same. `ctx.checkpoint()`, `ctx.cancelled()` and `ctx.on_cancel` work as for a blocking handler.
//
// Outcomes: as for a blocking handler. Returning completes the job; an exception fails it
// (`JobFailed` with its reason); an exception after a cancellation (the aborted wait included)
// makes it `cancelled_while_running` with the cancellation's cause. Every job has exactly one
// outcome, published on the strand when the coroutine has finished.
//
// The executor must run until every awaitable job submitted with it has its outcome: a shutdown
// cancels the jobs and waits for their coroutines to finish, on that executor. The coroutine and
// its outcome callback must not shut their own runtime down.
//
// Thread safety: an `AwaitableHandler` is a value: distinct objects: safe; shared objects:
// unsafe.
#pragma once

#include <sandglass/job_context.hpp>
#include <sandglass/move_only_function.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <type_traits>
#include <utility>

namespace sandglass {

// What an awaitable job runs: `fn(ctx)` makes the coroutine, and it runs on (a strand of)
// `executor`. Both must be set.
struct AwaitableHandler {
  boost::asio::any_io_executor executor;
  MoveOnlyFunction<boost::asio::awaitable<void>(JobContext&)> fn;
};

// True for a callable that makes an awaitable handler's coroutine.
template <typename F>
concept AwaitableFactory =
    std::is_invocable_r_v<boost::asio::awaitable<void>, std::decay_t<F>&, JobContext&>;

// An awaitable handler that runs `fn` on `executor` (any Asio executor: an io_context's, a
// strand, a thread_pool's). `fn` may be move-only.
template <typename Executor, AwaitableFactory F>
AwaitableHandler awaitable_job(const Executor& executor, F&& fn) {
  return {boost::asio::any_io_executor{executor},
          MoveOnlyFunction<boost::asio::awaitable<void>(JobContext&)>{std::forward<F>(fn)}};
}

}  // namespace sandglass
