// job_context.hpp — `JobContext`, what a handler gets to cooperate with its deadline and with
// cancellation, and `Cancelled`, the exception a checkpoint throws.
//
//   rt.submit({.kind = "crunch", .budget = 200ms}, [](sandglass::JobContext& ctx) {
//     for (auto& chunk : chunks) {
//       ctx.checkpoint();                        // throws Cancelled once cancelled
//       process(chunk);
//     }
//     {
//       Child child{command};
//       // Reaches the real work; deregistered when `stop` goes out of scope, before `child`.
//       auto stop = ctx.on_cancel([&]() noexcept { child.kill(); });
//       child.wait();
//     }
//     ctx.commit();                              // from here on, cancellation no longer aborts
//     write_result();
//   });
//
// A checkpoint is one atomic load; it never reads the clock (the runtime's timer cancels the
// token with cause `deadline` when the deadline passes).
//
// Commit points: a job is open, then either committed or cancelled, never both: `commit()` and
// the cancellation race for one atomic state (compare-and-swap on both sides), and exactly one
// wins. If the cancellation wins, `commit()` throws `Cancelled` and every callback registered
// with `on_cancel` and still registered when the cancellation reaches it runs, once. If
// `commit()` wins, `checkpoint()` no longer throws, those callbacks never run, and a
// cancellation that arrives later only shows in the outcome: `completed` with reason
// `completed_after_cancel` and `Outcome::committed` set. (A cancellation recorded on the token
// while no `on_cancel` callback is registered is seen by `commit()` directly.) Callbacks
// registered on `token()` directly do not care about the commit point.
//
// Recorded commit points: an executor whose jobs may run again elsewhere (a cluster node, whose
// job row decides whether a lost node's job is queued again) installs a `CommitRecorder` before
// the handler runs. `commit()` then asks it first, on the handler's thread, and passes the commit
// point only once the recorder says it is recorded; so no effect after a commit point can
// happen unrecorded. A recorder that refuses (the job is no longer the executor's to commit)
// has cancelled the job, and `commit()` throws `Cancelled`.
//
// Thread safety: a context belongs to the handler's thread; only `cancelled()`, `cause()`,
// `committed()`, `deadline()`, `remaining()` and `token()` may be called from other threads.
#pragma once

#include <sandglass/budget_policy.hpp>
#include <sandglass/cancel.hpp>
#include <sandglass/deadline.hpp>
#include <sandglass/job_spec.hpp>
#include <sandglass/move_only_function.hpp>
#include <sandglass/reason.hpp>

#include <atomic>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sandglass {

// Thrown by `checkpoint()` and `commit()` once the job is cancelled. Handlers should let it
// propagate; the worker turns it into a `cancelled` outcome.
class Cancelled : public std::exception {
 public:
  explicit Cancelled(CancelCause cause) noexcept : cause_{cause} {}
  CancelCause cause() const noexcept { return cause_; }
  const char* what() const noexcept override;

 private:
  CancelCause cause_;
};

// Thrown by a handler to fail with a specific reason instead of `handler_error`, e.g.
// `deadline_exceeded_before_dispatch` or `breaker_open` when it gave up on a dependency. The
// outcome is `failed` with that reason and `what()` as its error. The reason must be one whose
// state is `failed` (outcome.hpp): any other is a programming error, and the outcome is then
// `failed`, `handler_error`, with an error that names the reason.
class JobFailed : public std::runtime_error {
 public:
  JobFailed(Reason reason, const std::string& message)
      : std::runtime_error{message}, reason_{reason} {}
  Reason reason() const noexcept { return reason_; }

 private:
  Reason reason_;
};

class JobContext;

// Records a job's commit point before it counts (see the file comment). Not owned by the
// context; it must outlive the handler's run.
class CommitRecorder {
 public:
  // Called by `commit()` on the handler's thread while the job is open, before the commit point
  // is passed; may block (a database round trip). True: recorded; the commit point is passed
  // unless the job was cancelled meanwhile (then `commit()` throws, and the record stays: it
  // errs on the side of "may have committed"). False: it may not be passed; the recorder has
  // cancelled the job or will (from another thread), or the job's token was cancelled while it
  // waited. `commit()` then throws `Cancelled` with the token's cause, `caller` if it has none
  // yet.
  virtual bool record(const JobContext& ctx) = 0;

 protected:
  ~CommitRecorder() = default;
};

// What a job runs: any callable taking `JobContext&`, copyable or move-only (it may own a
// std::unique_ptr). It may throw; the worker records the exception as the job's error. The
// runtime destroys it once the job is over (on the thread that ended the job).
using JobHandler = MoveOnlyFunction<void(JobContext&)>;

class JobContext {
 public:
  // The runtime builds contexts; tests of handlers may build their own. The characters of
  // `kind` and `idempotency_key`, and `policy`, must outlive the context.
  JobContext(JobId id, std::string_view kind, Deadline deadline, CancelToken token,
             const BudgetPolicy& policy, std::string_view idempotency_key = {});
  JobContext(const JobContext&) = delete;
  JobContext& operator=(const JobContext&) = delete;
  ~JobContext();

  // Throws `Cancelled` if the job is cancelled and not committed. One atomic load.
  void checkpoint() const {
    if (token_.cancelled()) [[unlikely]] throw_if_not_committed();
  }
  bool cancelled() const noexcept { return token_.cancelled(); }
  CancelCause cause() const noexcept { return token_.cause(); }
  const CancelToken& token() const noexcept { return token_; }

  JobId id() const noexcept { return id_; }
  std::string_view kind() const noexcept { return kind_; }
  // The submitter's idempotency key (JobSpec::idempotency_key), to pass on to dependencies.
  std::string_view idempotency_key() const noexcept { return idempotency_key_; }
  Deadline deadline() const noexcept { return deadline_; }
  Duration remaining() const noexcept { return deadline_.remaining(); }

  // Blocks until `until` or until the job is cancelled, whichever comes first; then throws
  // `Cancelled` if it was cancelled (like a checkpoint). After the commit point cancellation no
  // longer interrupts it. A time in the past returns at once. Built on
  // std::condition_variable_any's stop_token wait: no thread and no timer of its own; it wakes
  // when the cancellation's callbacks run (for a deadline: on the runtime's callback thread,
  // right after the timer signalled it).
  void sleep_until(Deadline until);
  void sleep_for(Duration timeout) { sleep_until(Deadline::after(timeout)); }

  // What this job may pass on to a dependency now: min(remaining - reserve, caps), or reason
  // deadline_exceeded_before_dispatch when that is below the minimum useful budget.
  ChildBudget child_budget(ChildBudgetCaps caps = {}) const noexcept {
    return policy_->child_budget(deadline_, caps);
  }

  // Registers `callback` to run once when the job is cancelled before its commit point (at
  // once, on this thread, if it already is). Returns the registration: destroying it
  // deregisters the callback, and blocks while the callback runs on another thread, so
  // whatever the callback captures may be destroyed right after. Keep it alive for as long as
  // the work it reaches runs; it must not outlive this context. Usually called on the
  // cancelling thread: the caller's, or the runtime's callback thread for deadlines (never the
  // timer thread).
  template <CancelCallback F>
  [[nodiscard]] CancelRegistration on_cancel(F&& callback) {
    return token_.on_cancel([this, fn = std::forward<F>(callback)]() mutable noexcept {
      // Pairs with the exchange in commit(): both sides leave `open` by compare-and-swap, so
      // exactly one decides. Every callback of a cancellation that won runs.
      if (settle_cancelled()) fn();
    });
  }

  // Marks the commit point. Throws `Cancelled` if the job was cancelled before it (see the file
  // comment for the race). Calling it again after it succeeded does nothing.
  void commit();
  // True once `commit()` succeeded.
  bool committed() const noexcept {
    return phase_.load(std::memory_order_acquire) == Phase::committed;
  }
  // For executors, before the handler runs: `commit()` asks `recorder` first (nullptr: none).
  void record_commits_with(CommitRecorder* recorder) noexcept { recorder_ = recorder; }

  // The job's result, carried into `Outcome::result`.
  void set_result(std::string result) { result_ = std::move(result); }
  std::string take_result() noexcept { return std::move(result_); }

 private:
  enum class Phase : std::uint8_t { open, committed, cancelled };

  [[noreturn]] void throw_cancelled() const;
  void throw_if_not_committed() const;
  // Moves open → cancelled; true when the state is (now) cancelled, false when committed.
  bool settle_cancelled() noexcept;

  JobId id_;
  std::string_view kind_;
  std::string_view idempotency_key_;
  Deadline deadline_;
  CancelToken token_;
  const BudgetPolicy* policy_;
  CommitRecorder* recorder_ = nullptr;
  std::atomic<Phase> phase_{Phase::open};
  std::string result_;
};

}  // namespace sandglass
