// runtime.hpp — `Runtime`, the deadline-aware job executor, and `JobHandle`.
//
//   sandglass::Runtime rt{{.workers = 4, .capacity = 256}};
//   auto h = rt.submit({.kind = "resize", .budget = 50ms},
//                      [](sandglass::JobContext& ctx) { ctx.checkpoint(); /* work */ });
//   sandglass::Outcome o = h.wait();
//   rt.shutdown(1s);
//
// A Runtime owns a bounded `DeadlineQueue`, a fixed pool of worker threads and one timer thread.
// Submission runs admission at once: a rejected job gets its terminal outcome before `submit`
// returns (no exception). A job whose deadline passes while it waits is removed by the timer
// and its outcome published at that moment (`expired_in_queue`). A running job whose deadline
// passes has its token cancelled with cause `deadline`; it stops at its next checkpoint. One
// that still runs `overrun_after` later is reported as overrunning (see overrun.hpp).
// No thread and no OS timer per job.
//
// Run slots: `workers` jobs run at once. A blocking handler (a `JobHandler`) runs on the worker
// that took it; an awaitable handler (see awaitable_job.hpp) runs on an executor the caller
// names and holds its slot, not a worker thread, until its coroutine has finished. Admission,
// kind limits and `stats().running` count slots, so both forms obey the same queue, deadlines
// and outcomes; a deadline or cancellation reaches an awaitable one as a terminal Asio
// cancellation.
//
// Threads: the workers, one timer thread and one callback thread. The timer runs no user code:
// it records a deadline on the job's token at once, and the callback thread then runs that
// job's on_cancel callbacks, the outcome callbacks of jobs that expired in the queue, and
// `on_overrun`, in that order. A slow callback there delays the callbacks after it, never a
// deadline signal.
//
// Every submitted job gets exactly one outcome, also on shutdown: `shutdown(drain_timeout)`
// stops admission, lets queued and running jobs finish until the drain deadline, then removes
// what is still queued and cancels what still runs (cause `shutdown`), and waits for those
// handlers to return.
//
// Outcome callbacks (`submit`'s third argument) run exactly once, outside the runtime's locks,
// on whichever thread ended the job: a worker, the callback thread (expired in the queue), the
// submitter (rejections), or the thread that cancelled it. They must be quick and must not
// throw (an exception would escape a worker thread: std::terminate). Handlers and callbacks
// must not shut their own runtime down: `shutdown` then throws std::logic_error (it would wait
// for the very code that calls it), and destroying the Runtime there ends in std::terminate.
//
// Thread safety: `Runtime`: all member functions may be called concurrently, except that the
// destructor must not race with anything. `JobHandle`: distinct objects: safe; shared objects:
// safe. A handle may outlive its runtime.
#pragma once

#include <sandglass/awaitable_job.hpp>
#include <sandglass/budget_policy.hpp>
#include <sandglass/deadline.hpp>
#include <sandglass/job_context.hpp>
#include <sandglass/job_spec.hpp>
#include <sandglass/outcome.hpp>
#include <sandglass/overrun.hpp>
#include <sandglass/retry_policy.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/post.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace sandglass {

namespace detail {
struct Job;
class JobRef;
class RuntimeCore;
}  // namespace detail

struct RuntimeOptions {
  std::size_t workers = std::max(1u, std::thread::hardware_concurrency());
  std::size_t capacity = 1024;  // most jobs queued at once
  BudgetPolicy budget{};
  // Bulkheads: at most this many jobs of a kind run at once; kinds not named are unlimited.
  std::map<std::string, std::size_t, std::less<>> kind_limits{};
  // Drop a queued job at dequeue when less time is left than its estimate key's tail estimate.
  bool drop_if_cannot_finish = true;
  // Run-time estimates per estimate key (JobSpec::estimate_key, by default the kind; see
  // service_time_estimator.hpp): the mean of recent runs
  // predicts the work queued ahead of a job; this quantile bounds the job's own run.
  double estimate_quantile = 0.99;
  std::size_t estimate_window = 128;  // most samples kept per estimate key
  // A sample ages out after the longer of `estimate_max_age` and `estimate_age_in_runs` × the
  // kind's typical run time, so a stall cannot lock admission out for long. The next run
  // recorded drops it, or a submission more than estimate_max_age / 8 later without one.
  Duration estimate_max_age = std::chrono::milliseconds{20};
  double estimate_age_in_runs = 10;
  // A running job is overrunning once its deadline passed this long ago (see overrun.hpp).
  // Must be positive.
  Duration overrun_after = std::chrono::seconds{1};
  // Told once about each overrunning job, on the runtime's callback thread (never the timer
  // thread). Empty: none are reported (and the timer never wakes for them), but
  // `Runtime::overruns()` still lists them.
  OverrunCallback on_overrun{};
  // Tiny jobs: while a worker takes jobs whose estimate key's median run time is at most this,
  // one at a time beats several workers taking the queue's lock in turn, and the others stand
  // by (docs/embedding.md, "Tiny jobs"; at most 200 µs before they look again). Zero: every worker
  // always takes from the queue. Must not be negative.
  Duration tiny_job = std::chrono::microseconds{1};
  // The standing-queue rule: while every job the workers started for an interval (ten target
  // delays, at least 100 ms) had waited longer than this target, admission takes only jobs predicted to start
  // within it of now (others: rejected, queue_full). Bursts that drain within the interval
  // are absorbed whole, and an urgent job that overtakes the queue under EDF still starts
  // early. Zero: adaptive, twice a slowly moving mean of the run times, at least 1 ms. Must
  // not be negative.
  Duration queue_delay_target{};
  // Retries of jobs submitted with JobSpec::retry: a token bucket per kind, so that retries
  // stay about `ratio` of the kind's attempts and a failing kind cannot flood the queue.
  RetryBudgetOptions retry_budget{};
  // Draws the retries' backoff jitter: a number in [0, 1) (see RetryPolicy::RandomSource); the
  // wait before retry n is that fraction of JobRetry::backoff × 2^(n-1). Empty: a per-thread
  // generator. Called on the runtime's threads, possibly concurrently.
  std::function<double()> retry_random{};

  // Empty when consistent, else a message naming the offending field.
  std::string validate() const;
};

// Counts since start. A snapshot; fields are read one by one while jobs move.
struct RuntimeStats {
  std::uint64_t submitted = 0;
  std::array<std::uint64_t, kReasonCount> outcomes{};  // indexed by Reason
  std::size_t queued = 0;
  std::array<std::size_t, kPriorityCount> queued_by_priority{};  // indexed by Priority
  std::size_t running = 0;
  std::size_t peak_queued = 0;
  std::size_t overrunning = 0;  // running jobs that are overrunning now (see overrun.hpp)
  std::uint64_t stand_bys = 0;  // times a worker stood by behind tiny jobs (RuntimeOptions::tiny_job)
  bool standing_queue = false;  // the standing-queue rule holds now (RuntimeOptions::queue_delay_target)
  Duration queue_delay_target{};  // its target delay now (fixed, or the adaptive one)
  // The runtime's own prediction error now: the tail (p99, at least zero) of actual − predicted
  // start, of actual − predicted run time, and of actual − predicted finish, which admission
  // adds to every predicted finish as its margin.
  Duration start_error_tail{};
  Duration run_error_tail{};
  Duration prediction_margin{};

  std::uint64_t count(Reason reason) const noexcept {
    return outcomes[static_cast<std::size_t>(reason)];
  }
};

// One estimate key's run-time estimate (see RuntimeOptions and service_time_estimator.hpp), as
// of its key's last submission or run.
struct EstimateSnapshot {
  std::string key;      // JobSpec::estimate_key, or the kind when that was empty
  std::string kind;     // the kind of the job that first used the key
  Duration mean{};      // predicts the work a job of this key puts ahead of later ones
  Duration tail{};      // the `estimate_quantile` of recent runs: what a job's own run must fit
  std::uint64_t samples = 0;  // runs recorded since start: its own and those given to record_run
  std::size_t kept = 0;       // of those, still in the window (not aged out)
};

// The run-time estimate admission uses for one job (Runtime::estimate).
struct RunEstimate {
  Duration central{};  // the work the job puts ahead of later ones
  Duration tail{};     // what the job's own run must fit
};

// Where a job stands, for reporting while it has no outcome yet.
struct JobProgress {
  Duration budget{};                    // granted at admission
  TimePoint enqueued_at{};              // when it was admitted
  Deadline deadline{};
  std::optional<TimePoint> started_at;  // set once a worker took it
  std::size_t worker = 0;               // its run slot (when started_at is set): for a blocking
                                        // handler, the index of the worker that runs it
  bool scheduled = false;               // it waits for a later start (JobSpec::delay, or a
                                        // retry's backoff): not queued, not running
};

class JobHandle {
 public:
  JobHandle() = default;  // refers to no job
  // Handles share the job (an intrusive count in its record): copies refer to the same job.
  JobHandle(const JobHandle& other) noexcept;
  JobHandle(JobHandle&& other) noexcept : job_{std::exchange(other.job_, nullptr)} {}
  JobHandle& operator=(const JobHandle& other) noexcept;
  JobHandle& operator=(JobHandle&& other) noexcept;
  ~JobHandle();
  explicit operator bool() const noexcept { return job_ != nullptr; }

  JobId id() const noexcept;
  // Cancels with cause `caller`: a queued job leaves the queue, a running one is signalled
  // (its on_cancel callbacks run on this thread). True if this call cancelled it; false when
  // it was cancelled before, or had ended: its handler had returned (the outcome then shows no
  // cancellation from this call) or it had its outcome. Safe after the runtime is destroyed
  // (then always false), and while it is being destroyed.
  bool cancel() const;
  // Blocks until the job has its outcome, and returns it.
  Outcome wait() const;
  // Blocks until the outcome is there or the timeout passed; nullopt on timeout.
  std::optional<Outcome> wait_for(Duration timeout) const;
  std::optional<Outcome> wait_until(Deadline deadline) const;
  // The outcome if the job has ended, else nullopt. Does not block.
  std::optional<Outcome> outcome() const;
  bool done() const noexcept;
  // True once a worker has taken the job (it may since have ended). For reporting only: a
  // job that was not started yet may start right after this returns false.
  bool started() const noexcept;
  // The job's budget, admission time, deadline and start time. Empty for an empty handle.
  JobProgress progress() const noexcept;

 private:
  friend class detail::RuntimeCore;
  explicit JobHandle(detail::JobRef&& job) noexcept;

  detail::Job* job_ = nullptr;  // holds one reference
};

namespace detail {
// Connects an Asio cancellation slot to a job that may not be submitted yet: a cancellation
// emitted before the job is attached is kept and applied by `attach`.
// Thread safety: shared objects: safe.
class PendingCancel {
 public:
  void cancel();                         // from the slot's handler
  void attach(const JobHandle& job);     // once submit returned; at most once
 private:
  std::mutex mu_;
  JobHandle job_;          // guarded by mu_
  bool requested_ = false; // guarded by mu_
};
}  // namespace detail

class Runtime {
 public:
  using Handler = JobHandler;

  // Starts the worker and timer threads. Throws std::invalid_argument naming the field when
  // `options` are inconsistent.
  explicit Runtime(RuntimeOptions options = {});
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  // Shuts down with no drain time if `shutdown` was not called. Blocks. Must not run inside a
  // handler or callback of this runtime (std::terminate, see `shutdown_until`).
  ~Runtime();

  // Admits or rejects the job at once. Throws std::invalid_argument for an empty `handler`, an
  // empty `kind` or a `priority` outside the enum.
  JobHandle submit(JobSpec spec, Handler handler);
  // As above; `on_outcome` runs exactly once with the job's outcome (see the file comment).
  JobHandle submit(JobSpec spec, Handler handler, OutcomeCallback on_outcome);
  // An awaitable job (see awaitable_job.hpp): its coroutine runs on `handler.executor` and
  // holds a run slot, not a worker thread, while it awaits; its deadline or cancellation
  // reaches it as a terminal Asio cancellation. Admission, outcomes and `on_outcome` as above.
  // Throws std::invalid_argument for an empty `handler.fn` or `handler.executor`, an empty
  // `kind` or a `priority` outside the enum.
  JobHandle submit(JobSpec spec, AwaitableHandler handler, OutcomeCallback on_outcome = {});
  // A callable that makes a coroutine is not a blocking handler (its coroutine would never
  // run): name the executor it runs on with `awaitable_job(executor, fn)`.
  template <AwaitableFactory F>
  JobHandle submit(JobSpec spec, F&& handler, OutcomeCallback on_outcome = {}) = delete;

  // The Asio form: completes with `void(Outcome)` on the completion handler's associated
  // executor. Works with callbacks, `boost::asio::use_future` and `boost::asio::use_awaitable`:
  //
  //   Outcome o = co_await rt.async_submit({.kind = "x", .priority = Priority::high,
  //                                         .budget = 200ms},
  //                                        handler, boost::asio::use_awaitable);
  //
  // `spec` is a JobSpecRef (a named JobSpec converts to one): a braced spec inside `co_await` is
  // safe with GCC 12, which mis-copies an aggregate temporary there (see JobSpecRef). The spec
  // and `handler` are copied or moved into the job before this returns. `handler` is anything
  // `submit` takes (a copyable or move-only callable). GCC 12 mis-copies a lambda with
  // non-trivially copyable captures (a std::string, a std::unique_ptr) written inside the
  // co_await expression in the same way, which no signature can prevent: with GCC 12, name such
  // a lambda first and pass it with std::move. Lambdas capturing by reference are fine.
  //
  // If the completion handler has a connected cancellation slot, a cancellation emitted on it
  // cancels the job with cause `caller`. The completion's executor (its io_context) must
  // outlive the Runtime: the worker that posts the completion may still be inside `post` when
  // the completion has already run.
  template <typename JobHandlerT, typename CompletionToken>
  auto async_submit(JobSpecRef spec, JobHandlerT&& handler, CompletionToken&& token);

  // Stops admitting, drains until `drain_deadline`, then cancels what is left (cause
  // `shutdown`) and joins all threads. Blocks until every job has its outcome. Idempotent;
  // concurrent callers all block until the first has finished. Throws std::logic_error, and
  // does nothing, when called from a handler or callback this runtime runs (a handler, an
  // outcome callback, an on_cancel callback on the callback thread, `on_overrun`): it would
  // wait for that code to return.
  void shutdown_until(Deadline drain_deadline);
  void shutdown(Duration drain_timeout) { shutdown_until(Deadline::after(drain_timeout)); }
  // Cuts a drain short: a `shutdown_until` in progress, or a later one, stops waiting for its
  // drain deadline and cancels what is left at once (cause `shutdown`), so every job still gets
  // its outcome. Does not block. Idempotent. (sandglassd calls it on a second SIGTERM.)
  void end_drain();
  // The first step of a shutdown alone: from its return on, submissions are rejected with
  // `shutting_down`; queued and running jobs go on. Does not block on jobs. Idempotent.
  void stop_admitting();

  RuntimeStats stats() const;
  // The running jobs that are overrunning now (see overrun.hpp), earliest deadline first. Takes
  // the runtime's lock for a walk over those jobs only.
  std::vector<Overrun> overruns() const;
  // Every estimate key's estimate, ordered by key. Takes the runtime's lock for a walk over the
  // keys. The runtime keeps one estimator per distinct key it has seen: keep keys bounded (the
  // daemon's come from its config). A job's run time is in its estimate before its outcome
  // is published (to a handle or to its callback).
  std::vector<EstimateSnapshot> estimates() const;
  // Adds a run of a job like `spec` that took `run_time` and was measured elsewhere: by another
  // process that runs jobs of the same estimate key (a cluster's other nodes). Only the spec's
  // kind, estimate_key and expected count: the run joins the key's samples (with `expected`,
  // above zero, also its ratio of actual to stated run time), as one of this runtime's own
  // runs would, timed now. The runtime records its own runs itself: a run given here as well is
  // counted twice. Takes the key's estimate lock, never the runtime's. Throws
  // std::invalid_argument for an empty `kind`.
  void record_run(const JobSpec& spec, Duration run_time);
  // The estimate admission would use now for a job like `spec` (its kind, estimate_key and
  // expected): with `expected` above zero, that size × the key's ratio of actual to stated run
  // times (1 while none is kept); else the key's recent runs, zero while it has none. Takes
  // the lock of the runtime's table of keys for the look-up, never the runtime's; a key no job
  // and no record_run named gets no entry.
  RunEstimate estimate(const JobSpec& spec) const;
  const RuntimeOptions& options() const noexcept;

 private:
  std::unique_ptr<detail::RuntimeCore> core_;
};

template <typename JobHandlerT, typename CompletionToken>
auto Runtime::async_submit(JobSpecRef spec, JobHandlerT&& handler, CompletionToken&& token) {
  using StoredHandler = std::decay_t<JobHandlerT>;
  static_assert(requires(Runtime& rt, JobSpec s, StoredHandler h, OutcomeCallback cb) {
    rt.submit(std::move(s), std::move(h), std::move(cb));
  }, "async_submit takes the handlers submit(spec, handler, on_outcome) takes");
  auto initiation = [this](auto completion, JobSpec job_spec, StoredHandler job_handler) {
    using Completion = decltype(completion);
    auto slot = boost::asio::get_associated_cancellation_slot(completion);
    auto executor = boost::asio::get_associated_executor(completion);
    // Completion handlers may be move-only; an outcome callback must be copyable.
    auto shared = std::make_shared<Completion>(std::move(completion));
    // The slot's handler is in place before the job can complete (the completion clears it,
    // possibly on another thread of the executor); a cancellation emitted before submit
    // returned is kept and applied once the job is known. The handler holds the job only
    // through its handle, which is safe after the Runtime is gone.
    std::shared_ptr<detail::PendingCancel> pending;
    if (slot.is_connected()) {
      pending = std::make_shared<detail::PendingCancel>();
      slot.assign([pending](boost::asio::cancellation_type) { pending->cancel(); });
    }
    // this->: clang 14 does not see an unqualified member call in a generic lambda as a use of
    // the captured `this` (-Wunused-lambda-capture).
    JobHandle job = this->submit(
        std::move(job_spec), std::move(job_handler), [shared, executor, slot](const Outcome& outcome) {
          // One copy into the posted function (the runtime keeps its own), then moved on.
          boost::asio::post(executor, [shared, slot, result = Outcome{outcome}]() mutable {
            if (slot.is_connected()) slot.clear();
            std::move (*shared)(std::move(result));
          });
        });
    if (pending) pending->attach(job);
  };
  // Both arguments are owning objects built here, in this ordinary function, before any
  // coroutine of the caller can suspend; the caller's temporaries are not used after this.
  return boost::asio::async_initiate<CompletionToken, void(Outcome)>(
      std::move(initiation), token, spec.to_spec(), StoredHandler(std::forward<JobHandlerT>(handler)));
}

}  // namespace sandglass
