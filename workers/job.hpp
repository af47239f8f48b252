// job.hpp (private) — `Job`, everything the runtime keeps about one submitted job, in one
// allocation: its queue links, handler, cancellation state, timings and outcome.
//
// Layout matters for the hand-off: a job is made on the submitting thread in memory that a
// worker freed last, so every cache line written when it is made has to travel between cores.
// What submit writes comes first, in as few lines as possible; what only some jobs have (an
// idempotency key, a parent, an awaitable run, a published outcome a handle may read, waiters)
// is behind one pointer, made by the first of them; the cancellation state is two words until
// someone registers a callback. 248 bytes, one 256-byte malloc chunk
// (tests/workers/job_pool_test.cpp). A job with an outcome callback is a `JobWithCallback`: the
// callback right after the record, in a block of the pool's second size, so that a job without
// one carries no room for it and a job with one needs no second allocation.
//
// Lifetime: an intrusive reference count, the one inside the job's cancellation state (the
// record derives from it), held by `JobRef`s (the runtime's while the job is queued or
// running, a worker's, the timer's for a moment), `JobHandle`s and the job's cancel tokens
// (`token()`: a token may outlive the job's outcome, and keeps the record until it goes). The
// last reference returns the record to the pool (job_pool.hpp).
//
// Thread safety: fields marked "guarded by the runtime" are read and written only under the
// runtime's mutex. The outcome is published once (`publish`) and then read by any thread.
#pragma once

#include <sandglass/cancel.hpp>
#include <sandglass/deadline_queue.hpp>
#include <sandglass/job_context.hpp>
#include <sandglass/outcome.hpp>

#include "workers/awaitable_runner.hpp"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace sandglass::detail {

class RuntimeCore;

// What a job reaches of its runtime through one pointer: the runtime itself. The runtime's
// state for one estimate key (EstimateState) derives from it, so that a job holds one pointer
// for both. A line of its own: the estimate state beside it is written for every run, this
// only when the state is made.
struct alignas(64) JobOrigin {
  explicit JobOrigin(RuntimeCore* c) noexcept : core{c} {}
  RuntimeCore* const core;
};

class JobRef;

struct Job : QueueItem, CancelState {
  // `scheduled`: the job waits for a later start (a delay, a retry's backoff) in the runtime's
  // schedule, which runs each of its attempts as a job of its own and publishes its outcome.
  enum class Phase : std::uint8_t { pending, queued, running, finished, scheduled };

  // A fresh record from the pool, holding one reference (the returned one); with
  // `on_outcome` in its tail if that is not empty.
  static JobRef make(OutcomeCallback&& on_outcome);

  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // For threads that block on the outcome; made by the first of them.
  struct Waiters {
    std::mutex mu;
    std::condition_variable published;
  };
  // What only some jobs have, made by the first that needs it (extras()): a job without any
  // carries one null pointer instead. The parts set at submit are written before the job is
  // visible to other threads; `waiters` and `outcome` are made later, see publish().
  struct Extras {
    Extras() noexcept = default;
    Extras(const Extras&) = delete;
    Extras& operator=(const Extras&) = delete;
    ~Extras() { delete waiters.load(std::memory_order_acquire); }

    // An awaitable job's (then `handler` is empty; see awaitable_runner.hpp).
    std::unique_ptr<AwaitableRun> awaitable;
    std::string idempotency_key;
    // The run time its submitter expected (JobSpec::expected), when it named one: read when
    // its run is recorded against its estimate key.
    Duration expected{};
    CancelRegistration parent_link;  // reset when the outcome is published
    // A waiter installs `waiters` and then reads done_; publish sets done_ and then reads
    // `waiters` (all seq_cst), so at least one of them sees the other.
    std::atomic<Waiters*> waiters{nullptr};
    // Made when the outcome is published, and only if a handle may read it. Written before
    // done_ is set, never after.
    std::optional<Outcome> outcome;
  };

  // --- Written when the job is made.
  JobId id = 0;
  Duration budget{};
  TimePoint enqueued_at{};
  // Its estimate key's state (an EstimateState), which lives as long as the runtime; the
  // runtime outlives every unfinished job (its destructor waits for all outcomes), so core()
  // may be called only while the job is unfinished.
  JobOrigin* origin = nullptr;
  RuntimeCore* core() const noexcept { return origin->core; }
  // --- Written when the job starts (under the runtime's lock, by a worker on another core
  // than the submitter's): beside `phase` and `started_`, so that a start writes one line of
  // the record fewer.
  TimePoint started_at;
  Phase phase = Phase::pending;        // guarded by the runtime
  bool deadline_signalled = false;     // guarded by the runtime: the timer cancelled it
  bool overrun_reported = false;       // guarded by the runtime: on_overrun was told of it
  std::atomic<bool> done_{false};      // the outcome is published
  std::atomic<bool> started_{false};   // the handler was handed to a worker (for observers)
  // A scheduled job (Phase::scheduled) that waits for its start now (for observers).
  std::atomic<bool> waiting_{false};
  // One attempt of a scheduled job: its outcome goes to that job, which is the one counted.
  bool attempt_ = false;
 private:
  bool has_callback_ = false;          // this is a JobWithCallback

 public:
  std::uint32_t worker;                // its run slot (a blocking job's: its worker's index)

 private:
  // Callers between pin_core() and unpin_core(). A pinner increments it and then reads done_;
  // publish sets done_ and then waits for it to be zero (all seq_cst), so either the pinner
  // sees the job finished, or publish waits until the pinner has registered with the runtime.
  // Here, beside `worker`: no padding.
  std::atomic<std::uint32_t> pins_{0};

 public:
  // The kind, held by the runtime (its table of kinds), which outlives the job's every read of
  // it: each happens before its outcome is out.
  const std::string* kind_name = nullptr;
  std::string_view kind() const noexcept { return *kind_name; }

 private:
  std::atomic<Extras*> extras_{nullptr};  // see Extras and extras()

 public:
  JobHandler handler;  // last: its tail padding (none with 8-byte alignment) ends the record
  // Made by the first caller, on any thread (compare-and-swap); never replaced.
  Extras& extras();
  // Null if nothing made it yet. Acquire: pairs with the exchange in extras().
  Extras* extras_if_made() const noexcept { return extras_.load(std::memory_order_acquire); }
  AwaitableRun* awaitable() const noexcept {
    const Extras* e = extras_if_made();
    return e != nullptr ? e->awaitable.get() : nullptr;
  }
  // JobSpec::expected, or zero.
  Duration expected() const noexcept {
    const Extras* e = extras_if_made();
    return e != nullptr ? e->expected : Duration::zero();
  }
  std::string_view idempotency_key() const noexcept {
    const Extras* e = extras_if_made();
    return e != nullptr ? std::string_view{e->idempotency_key} : std::string_view{};
  }

  // Trivially set up (two words, with the record's reference count); only a registration
  // allocates (see cancel.hpp).
  CancelState& cancel_state() noexcept { return *this; }
  // Cancels a started job. True for the first cancellation before the handler returned.
  bool cancel(CancelCause cause) noexcept { return cancel_state().cancel(cause); }
  // Records the cause only (see CancelState::signal); the caller runs the callbacks later.
  bool signal(CancelCause cause) noexcept { return cancel_state().signal(cause); }
  // Called when the handler has returned: no cancellation is accepted from here on. Returns
  // the cause of one accepted before.
  CancelCause close_cancel() noexcept { return cancel_state().close(); }
  // A token that holds a reference to the record. Call it while a reference is held.
  CancelToken token() noexcept {
    add_ref();
    return CancelAccess::token(CancelStateRef::adopt(this, &destroy));
  }
  // The last reference went: ends the record and returns it to the pool.
  static void destroy(CancelState& state) noexcept;

  // Stores the outcome (unless `kept` is false: nobody can read it any more, as no handle
  // refers to the job), wakes waiters, then runs `on_outcome`. Call exactly once, holding no
  // lock of the runtime. Before it returns (and so before the runtime can be destroyed) it
  // waits for callers of `enter()` that saw the job unfinished to have left `enter()`.
  // `on_outcome` runs inside a CallbackScope of `core`.
  void publish(Outcome&& outcome, bool kept = true);
  bool done() const noexcept { return done_.load(std::memory_order_acquire); }
  // For callers outside the runtime (JobHandle::cancel, a parent token's callback) that must
  // reach `core` while the runtime may be being destroyed. Returns `core` if the job is not
  // finished, holding it steady until `unpin_core()`; nullptr (nothing to undo) once the
  // outcome is published. Between the two calls the caller must register itself with the
  // runtime (which then outlives it), and do nothing slow.
  RuntimeCore* pin_core() noexcept;
  void unpin_core() noexcept;
  // Blocks until published.
  Outcome wait();
  std::optional<Outcome> wait_until(Deadline until);
  std::optional<Outcome> outcome() const;

 private:
  friend struct JobWithCallback;
  // User-provided, so that making a job does not zero-fill all of it first (make()).
  Job() noexcept {}
  ~Job();
  // The callback in the tail, or null.
  OutcomeCallback* on_outcome() noexcept;

  Waiters& waiters();
  // Once done() (and only for a job whose outcome was kept).
  const Outcome& published_outcome() const noexcept { return *extras_if_made()->outcome; }

};

// A job with an outcome callback: the record and, right after it, the callback (run once by
// publish()). Made and destroyed only by Job::make and Job::destroy.
struct JobWithCallback : Job {
  explicit JobWithCallback(OutcomeCallback&& callback) noexcept : on_outcome{std::move(callback)} {
    has_callback_ = true;
  }
  OutcomeCallback on_outcome;
};

inline OutcomeCallback* Job::on_outcome() noexcept {
  return has_callback_ ? &static_cast<JobWithCallback*>(this)->on_outcome : nullptr;
}

// A counted reference to a job (see Job's lifetime above). Copying takes a reference, moving
// passes one on.
class JobRef {
 public:
  JobRef() noexcept = default;
  // Takes a new reference to `job` (which someone holds one to already).
  explicit JobRef(Job* job) noexcept : job_{job} {
    if (job_ != nullptr) job_->add_ref();
  }
  // Takes over a reference the caller holds.
  static JobRef adopt(Job* job) noexcept {
    JobRef r;
    r.job_ = job;
    return r;
  }
  JobRef(const JobRef& other) noexcept : JobRef{other.job_} {}
  JobRef(JobRef&& other) noexcept : job_{std::exchange(other.job_, nullptr)} {}
  JobRef& operator=(JobRef other) noexcept {
    std::swap(job_, other.job_);
    return *this;
  }
  ~JobRef() { reset(); }

  void reset() noexcept {
    if (Job* j = std::exchange(job_, nullptr); j != nullptr && j->drop_ref()) Job::destroy(*j);
  }
  // Gives the reference up without dropping it (the caller now holds it: see adopt()).
  Job* release() noexcept { return std::exchange(job_, nullptr); }
  Job* get() const noexcept { return job_; }
  Job* operator->() const noexcept { return job_; }
  Job& operator*() const noexcept { return *job_; }
  explicit operator bool() const noexcept { return job_ != nullptr; }
  // References to the job: this one, the runtime's, handles', tokens'.
  std::uint32_t use_count() const noexcept { return job_ != nullptr ? job_->use_count() : 0; }

 private:
  Job* job_ = nullptr;
};

}  // namespace sandglass::detail
