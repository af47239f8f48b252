// job_context.hpp — `JobContext`, what a handler gets to cooperate with its deadline and with
// cancellation, and `Cancelled`, the exception a checkpoint throws.
//
//   rt.submit({.kind = "crunch", .budget = 200ms}, [](sandglass::JobContext& ctx) {
//     for (auto& chunk : chunks) {
//       ctx.checkpoint();                        // throws Cancelled once cancelled
//       process(chunk);
//     }
//     ctx.on_cancel([&]() noexcept { child.kill(); });   // reach the real work
//     ctx.commit();                              // from here on, cancellation no longer aborts
//     write_result();
//   });
//
// A checkpoint is one atomic load; it never reads the clock (the runtime's timer cancels the
// token with cause `deadline` when the deadline passes).
//
// Commit points: `commit()` throws `Cancelled` if cancellation arrived before it; after it,
// `checkpoint()` no longer throws and callbacks registered with `on_cancel` no longer run. If a
// cancellation arrives after the commit point, the outcome is `completed` with reason
// `completed_after_cancel`.
//
// Thread safety: a context belongs to the handler's thread; only `cancelled()`, `cause()`,
// `deadline()`, `remaining()` and `token()` may be called from other threads.
#pragma once

#include <sandglass/budget_policy.hpp>
#include <sandglass/cancel.hpp>
#include <sandglass/deadline.hpp>
#include <sandglass/job_spec.hpp>
#include <sandglass/reason.hpp>

#include <atomic>
#include <exception>
#include <stdexcept>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

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
// outcome is `failed` with that reason and `what()` as its error.
class JobFailed : public std::runtime_error {
 public:
  JobFailed(Reason reason, const std::string& message)
      : std::runtime_error{message}, reason_{reason} {}
  Reason reason() const noexcept { return reason_; }

 private:
  Reason reason_;
};

class JobContext;

// What a job runs. It may throw; the worker records the exception as the job's error.
using JobHandler = std::function<void(JobContext&)>;

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
  // std::condition_variable_any's stop_token wait: no thread and no timer of its own.
  void sleep_until(Deadline until);
  void sleep_for(Duration timeout) { sleep_until(Deadline::after(timeout)); }

  // What this job may pass on to a dependency now: min(remaining - reserve, caps), or reason
  // deadline_exceeded_before_dispatch when that is below the minimum useful budget.
  ChildBudget child_budget(ChildBudgetCaps caps = {}) const noexcept {
    return policy_->child_budget(deadline_, caps);
  }

  // Runs `callback` once when the job is cancelled before its commit point (at once if it
  // already is). Registrations last until the handler returns.
  template <CancelCallback F>
  void on_cancel(F&& callback) {
    registrations_.push_back(token_.on_cancel(
        [this, fn = std::forward<F>(callback)]() mutable noexcept {
          // Pairs with the store in commit(): either commit() sees the cancellation and throws,
          // or this callback sees the commit and stays quiet.
          if (!committed_.load(std::memory_order_seq_cst)) fn();
        }));
  }

  // Marks the commit point. Throws `Cancelled` if the job was cancelled before it.
  void commit();
  bool committed() const noexcept { return committed_.load(std::memory_order_relaxed); }

  // The job's result, carried into `Outcome::result`.
  void set_result(std::string result) { result_ = std::move(result); }
  std::string take_result() noexcept { return std::move(result_); }

 private:
  [[noreturn]] void throw_cancelled() const;
  void throw_if_not_committed() const;

  JobId id_;
  std::string_view kind_;
  std::string_view idempotency_key_;
  Deadline deadline_;
  CancelToken token_;
  const BudgetPolicy* policy_;
  std::atomic<bool> committed_{false};
  std::string result_;
  std::vector<CancelRegistration> registrations_;  // last: deregistered before the rest goes
};

}  // namespace sandglass
