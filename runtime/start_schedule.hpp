// start_schedule.hpp (private) — `StartSchedule`, the jobs of a runtime that wait for a later
// start: a delayed submission (JobSpec::delay) until its start, a retried one (JobSpec::retry)
// through its backoff.
//
// Such a job is a record of its own (the one its handles refer to, in Job::Phase::scheduled)
// and is never queued itself: each attempt is an ordinary job of the runtime, submitted at its
// start time through the normal admission, with the scheduled job's deadline and id. Until
// then it is no work ahead of anyone. The schedule keeps the start times in one min-heap that
// the runtime's timer serves (no thread or OS timer per job): the timer takes the due ones and
// has the callback thread submit their attempts. When an attempt ends, the schedule decides
// whether another one runs (see JobRetry) and otherwise publishes the scheduled job's one
// outcome, listing every attempt that ran. Its timings are the job's: run_time sums the
// attempts' runs, queue_wait is the rest of the time from its start (submit + delay) to its end
// (in the queue and between attempts), so queue_wait + run_time + remaining_at_end = budget.
//
// Exactly one outcome: a plan moves waiting → starting → attempting (→ waiting again for a
// retry) → finished under the schedule's mutex, and only the call that moves it to finished
// publishes.
//
// Thread safety: every member function may be called concurrently. Lock order: the runtime's
// mutex before the schedule's; the schedule never takes the runtime's mutex while it holds its
// own, and publishes outcomes holding neither.
#pragma once

#include <sandglass/job_spec.hpp>
#include <sandglass/outcome.hpp>
#include <sandglass/retry_policy.hpp>

#include "workers/awaitable_runner.hpp"
#include "workers/job.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace sandglass::detail {

class RuntimeCore;

class StartSchedule {
 public:
  // `core` owns this schedule and outlives it. `random` (may be empty) draws the backoff jitter.
  StartSchedule(RuntimeCore& core, RetryBudgetOptions retry_budget,
                std::function<double()> random);

  // True if `spec` asks for a delay or for more than one attempt.
  static bool wanted(const JobSpec& spec) noexcept;

  // Takes a job that `wanted` says is scheduled; `job` is made (id, kind, estimate state,
  // priority) but has no budget yet. Publishes a rejection at once when it cannot wait (the
  // schedule is closed, its budget is below the minimum useful, its parent was cancelled). A
  // job without a delay has its first attempt submitted here, on the caller's thread.
  void submit(JobRef job, JobSpec&& spec, JobHandler&& handler,
              std::unique_ptr<AwaitableRun> awaitable, TimePoint now);

  // The earliest start time waiting (never() when none).
  Deadline next_start() const;
  // Moves the jobs whose start is due at `now` into `due` (to be started with start_attempt).
  void take_due(TimePoint now, std::vector<JobRef>& due);
  // Submits the next attempt of `job` (taken by take_due). Without the runtime's mutex.
  void start_attempt(const JobRef& job);

  // Cancels a scheduled job: one waiting ends at once (cancelled_in_queue); a running attempt
  // is cancelled and no retry follows. True if this call cancelled it.
  bool cancel(Job& job, CancelCause cause);

  // From now on nothing waits: the jobs waiting end now (a delayed one rejected with
  // shutting_down, a retry with its last failure), and a retry that comes due later does not
  // happen. Idempotent. Without the runtime's mutex (it publishes).
  void close();

 private:
  enum class Stage : std::uint8_t { waiting, starting, attempting, finished };

  // One scheduled job. Guarded by mu_, but `handler` and `awaitable`, which only the one
  // attempt running at a time calls.
  struct Plan {
    JobRef job;
    JobSpec spec;  // what each attempt is submitted with (its deadline: the job's)
    JobHandler handler;
    std::unique_ptr<AwaitableRun> awaitable;
    int max_attempts = 1;
    Duration backoff{};
    RetryBudget* retry_budget = nullptr;  // the kind's
    Stage stage = Stage::waiting;
    TimePoint start_at{};
    std::uint64_t heap_seq = 0;           // its entry in the heap (older entries are stale)
    JobRef attempt;                       // while attempting
    CancelCause cancel_cause = CancelCause::none;
    std::vector<AttemptRecord> attempts;  // those that ran
    std::optional<Outcome> last_failure;  // the last attempt's, while a retry is due
  };
  using PlanPtr = std::shared_ptr<Plan>;

  struct Entry {
    TimePoint at;
    std::uint64_t seq;
    Job* job;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const noexcept { return a.at > b.at; }
  };

  // What to publish for a plan that finished (built under mu_, published without it).
  struct Ending {
    PlanPtr plan;
    Outcome outcome;
  };

  // The attempt of `plan` ended with `outcome` (its outcome callback).
  void attempt_ended(const PlanPtr& plan, const Outcome& outcome);
  // Puts `plan` in the heap at `at`; requires mu_.
  void wait_until(Plan& plan, TimePoint at);
  // Marks `plan` finished and takes it out of the table; requires mu_.
  Ending finish(const PlanPtr& plan, Outcome outcome, RetryStop stop);
  // An outcome for a job that never ran, as of `at`.
  static Outcome unstarted(const Job& job, Reason reason, CancelCause cause, TimePoint at);
  // Publishes an ending. Holding no lock.
  void publish(Ending& ending);
  // The attempt's handlers: they call the plan's.
  JobHandler attempt_handler(const PlanPtr& plan);
  std::unique_ptr<AwaitableRun> attempt_awaitable(const PlanPtr& plan);
  // Tells the runtime's timer about a start at `at`. Without mu_.
  void wake_timer_for(TimePoint at);

  RuntimeCore& core_;
  const RetryBudgetOptions retry_budget_options_;
  const std::function<double()> random_;
  mutable std::mutex mu_;
  std::unordered_map<const Job*, PlanPtr> plans_;             // guarded by mu_
  std::vector<Entry> heap_;                                   // guarded by mu_; a min-heap
  std::uint64_t next_seq_ = 1;                                // guarded by mu_
  bool closed_ = false;                                       // guarded by mu_
  std::unordered_map<std::string, RetryBudget> retry_budgets_;  // by kind; guarded by mu_
};

}  // namespace sandglass::detail
