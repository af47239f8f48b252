#include "runtime/start_schedule.hpp"

#include "runtime/estimate_state.hpp"
#include "runtime/runtime_core.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace sandglass::detail {
namespace {

AttemptRecord record_of(const Outcome& o) {
  return {.state = o.state, .reason = o.reason, .error = o.error, .run_time = o.timings.run_time,
          .committed = o.committed};
}

// The scheduled job's handler ran: it counts as started from its first attempt on.
void mark_started(Job& job) noexcept {
  if (job.started_.load(std::memory_order_relaxed)) return;
  job.started_at = Clock::now();
  job.started_.store(true, std::memory_order_release);  // pairs with JobHandle::progress
}

}  // namespace

StartSchedule::StartSchedule(RuntimeCore& core, RetryBudgetOptions retry_budget,
                             std::function<double()> random)
    : core_{core}, retry_budget_options_{retry_budget}, random_{std::move(random)} {}

bool StartSchedule::wanted(const JobSpec& spec) noexcept {
  return spec.delay > Duration::zero() || (spec.retry && spec.retry->max_attempts > 1);
}

void StartSchedule::submit(JobRef job, JobSpec&& spec, JobHandler&& handler,
                           std::unique_ptr<AwaitableRun> awaitable, TimePoint now) {
  const BudgetPolicy& policy = core_.options().budget;
  // The budget counts from the start: deadline = submit + delay + budget.
  const TimePoint start = saturating_add(now, std::max(spec.delay, Duration::zero()));
  std::optional<Duration> requested = spec.budget;
  if (spec.deadline) {
    const Duration until_deadline = spec.deadline->slack(start);
    requested = requested ? std::min(*requested, until_deadline) : until_deadline;
  }
  const BudgetGrant grant = policy.grant(requested);
  job->budget = grant.budget;
  job->enqueued_at = start;
  job->deadline = Deadline::after(grant.budget, start);
  job->phase = Job::Phase::scheduled;  // before the job is visible: never changes again

  auto plan = std::make_shared<Plan>();
  plan->job = job;
  plan->handler = std::move(handler);
  plan->awaitable = std::move(awaitable);
  plan->max_attempts = spec.retry ? std::max(spec.retry->max_attempts, 1) : 1;
  plan->backoff = spec.retry ? spec.retry->backoff : Duration::zero();
  const CancelToken parent = std::move(spec.parent);
  plan->spec = std::move(spec);
  plan->spec.budget.reset();
  plan->spec.deadline = job->deadline;
  plan->spec.parent = {};  // the scheduled job holds the link: it cancels its attempt
  plan->spec.idempotency_key.clear();
  plan->spec.retry.reset();
  plan->spec.delay = Duration::zero();

  if (parent.can_be_cancelled() && !parent.cancelled()) {
    // Before the job is in the table: a cancellation that comes first finds nothing to cancel,
    // and the check below covers it. Reset when the outcome is published (Job::publish).
    job->extras().parent_link = parent.on_cancel([j = job.get()]() noexcept {
      RuntimeCore::cancel_from_outside(*j, CancelCause::upstream);
    });
  }
  std::optional<Reason> refused;
  CancelCause cause = CancelCause::none;
  if (grant.reason == Reason::budget_too_small) refused = Reason::budget_too_small;
  if (parent.cancelled()) {
    refused = Reason::cancelled_in_queue;
    cause = CancelCause::upstream;
  }
  {
    std::lock_guard lock{mu_};
    if (!refused && closed_) refused = Reason::shutting_down;
    if (!refused) {
      auto [budget, made] = retry_budgets_.try_emplace(plan->spec.kind, retry_budget_options_);
      plan->retry_budget = &budget->second;
      if (plan->max_attempts > 1) plan->retry_budget->record_request();
      plans_.emplace(job.get(), plan);
      if (start > now) {
        job->waiting_.store(true, std::memory_order_relaxed);
        wait_until(*plan, start);
      } else {
        plan->stage = Stage::starting;  // its first attempt is submitted below, on this thread
      }
    }
  }
  if (refused) {
    Ending ending{.plan = plan, .outcome = unstarted(*job, *refused, cause, start)};
    publish(ending);
    return;
  }
  if (start > now) {
    wake_timer_for(start);
  } else {
    start_attempt(job);
  }
  // Cancelled between the check above and the registration's taking effect.
  if (parent.cancelled()) cancel(*job, CancelCause::upstream);
}

void StartSchedule::wait_until(Plan& plan, TimePoint at) {
  plan.stage = Stage::waiting;
  plan.start_at = at;
  plan.heap_seq = next_seq_++;
  heap_.push_back({.at = at, .seq = plan.heap_seq, .job = plan.job.get()});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

Deadline StartSchedule::next_start() const {
  std::lock_guard lock{mu_};
  return heap_.empty() ? Deadline::never() : Deadline::at(heap_.front().at);
}

void StartSchedule::take_due(TimePoint now, std::vector<JobRef>& due) {
  std::lock_guard lock{mu_};
  while (!heap_.empty() && heap_.front().at <= now) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const Entry entry = heap_.back();
    heap_.pop_back();
    auto it = plans_.find(entry.job);
    // Stale: the plan was cancelled, closed or finished since.
    if (it == plans_.end() || it->second->stage != Stage::waiting ||
        it->second->heap_seq != entry.seq) {
      continue;
    }
    it->second->stage = Stage::starting;
    due.push_back(it->second->job);
  }
}

void StartSchedule::start_attempt(const JobRef& job) {
  PlanPtr plan;
  std::optional<Ending> ending;
  {
    std::lock_guard lock{mu_};
    auto it = plans_.find(job.get());
    if (it == plans_.end() || it->second->stage != Stage::starting) return;
    plan = it->second;
    if (plan->cancel_cause != CancelCause::none) {
      ending = finish(plan, unstarted(*job, Reason::cancelled_in_queue, plan->cancel_cause, Clock::now()),
                      plan->attempts.empty() ? RetryStop::none : RetryStop::cancelled);
    } else {
      plan->stage = Stage::attempting;
    }
  }
  job->waiting_.store(false, std::memory_order_relaxed);
  if (ending) {
    publish(*ending);
    return;
  }
  JobSpec spec = plan->spec;
  OutcomeCallback ended = [this, plan](const Outcome& o) { attempt_ended(plan, o); };
  JobRef attempt = plan->awaitable
                       ? core_.submit_job(job->id, std::move(spec), {}, std::move(ended),
                                          attempt_awaitable(plan), true)
                       : core_.submit_job(job->id, std::move(spec), attempt_handler(plan),
                                          std::move(ended), nullptr, true);
  CancelCause cancel_now = CancelCause::none;
  {
    std::lock_guard lock{mu_};
    // Not when it ended already (a rejection ends it inside submit_job).
    if (plan->stage == Stage::attempting && !attempt->done()) {
      plan->attempt = attempt;
      cancel_now = plan->cancel_cause;  // a cancel that came while it was being submitted
    }
  }
  if (cancel_now != CancelCause::none) core_.cancel(*attempt, cancel_now);
}

JobHandler StartSchedule::attempt_handler(const PlanPtr& plan) {
  return [plan](JobContext& ctx) {
    mark_started(*plan->job);
    plan->handler(ctx);
  };
}

std::unique_ptr<AwaitableRun> StartSchedule::attempt_awaitable(const PlanPtr& plan) {
  return std::make_unique<AwaitableRun>(AwaitableHandler{
      .executor = plan->awaitable->handler.executor,
      .fn = [plan](JobContext& ctx) {
        mark_started(*plan->job);
        return plan->awaitable->handler.fn(ctx);
      }});
}

void StartSchedule::attempt_ended(const PlanPtr& plan, const Outcome& o) {
  const Job& job = *plan->job;
  const TimePoint now = Clock::now();
  // Read before taking mu_ (the estimator has a lock of its own): what another attempt needs.
  const Duration attempt_estimate = EstimateState::of(job).figures(now, job.expected()).tail;
  const Duration reserve = core_.options().budget.reserve;
  JobRef attempt;  // dropped after unlocking
  std::optional<Ending> ending;
  TimePoint retry_at{};
  {
    std::lock_guard lock{mu_};
    if (plan->stage != Stage::attempting) return;
    attempt = std::move(plan->attempt);
    if (o.started()) plan->attempts.push_back(record_of(o));
    const bool failed = o.state == State::failed && o.reason != Reason::node_lost;
    if (!failed) {
      if (!o.started() && plan->last_failure) {
        // The retry did not run: refused at admission, or dropped or cancelled while queued.
        if (o.state == State::rejected) {
          ending = finish(plan, *plan->last_failure,
                          o.reason == Reason::shutting_down ? RetryStop::shutting_down
                                                            : RetryStop::rejected);
        } else {
          ending = finish(plan, o, o.state == State::cancelled ? RetryStop::cancelled : RetryStop::none);
        }
      } else {
        ending = finish(plan, o, RetryStop::none);
      }
    } else {
      const int ran = static_cast<int>(plan->attempts.size());
      RetryStop stop = RetryStop::none;
      Duration wait{};
      if (o.cause != CancelCause::none || plan->cancel_cause != CancelCause::none) {
        stop = RetryStop::cancelled;
      } else if (o.committed) {
        stop = RetryStop::committed;
      } else if (ran >= plan->max_attempts) {
        stop = RetryStop::attempts_exhausted;
      } else if (closed_) {
        stop = RetryStop::shutting_down;
      } else {
        const RetryPolicy policy{{.max_attempts = plan->max_attempts,
                                  .base_backoff = plan->backoff,
                                  .max_backoff = std::max(plan->backoff, Duration{std::chrono::hours{1}}),
                                  .reserve = reserve},
                                 random_};
        wait = policy.backoff(ran);
        // The admission rule for the next attempt: it starts after the wait and must finish,
        // at its key's tail estimate, with the reserve left.
        const TimePoint finish_at = saturating_add(saturating_add(saturating_add(now, wait), attempt_estimate), reserve);
        if (finish_at > job.deadline.time_point()) {
          stop = RetryStop::retry_skipped_budget;
        } else if (!plan->retry_budget->try_withdraw()) {
          stop = RetryStop::retry_budget_exhausted;
        }
      }
      if (stop == RetryStop::none) {
        plan->last_failure = o;
        retry_at = saturating_add(now, wait);
        plan->job->waiting_.store(true, std::memory_order_relaxed);
        wait_until(*plan, retry_at);
      } else {
        Outcome last = o;
        if (stop == RetryStop::retry_skipped_budget) {
          last.state = State::failed;
          last.reason = Reason::retry_skipped_budget;
        }
        ending = finish(plan, std::move(last), stop);
      }
    }
  }
  if (ending) {
    publish(*ending);
  } else {
    wake_timer_for(retry_at);
  }
}

bool StartSchedule::cancel(Job& job, CancelCause cause) {
  JobRef attempt;
  std::optional<Ending> ending;
  {
    std::lock_guard lock{mu_};
    auto it = plans_.find(&job);
    if (it == plans_.end()) return false;
    const PlanPtr plan = it->second;
    if (plan->cancel_cause != CancelCause::none) return false;
    plan->cancel_cause = cause;
    if (plan->stage == Stage::waiting) {
      ending = finish(plan, unstarted(job, Reason::cancelled_in_queue, cause, Clock::now()),
                      plan->attempts.empty() ? RetryStop::none : RetryStop::cancelled);
    } else if (plan->stage == Stage::attempting) {
      attempt = plan->attempt;  // null while start_attempt submits it: it cancels it then
    }
    // Starting: start_attempt sees the cause and ends it unstarted.
  }
  if (ending) publish(*ending);
  if (attempt) core_.cancel(*attempt, cause);
  return true;
}

void StartSchedule::close() {
  std::vector<Ending> endings;
  {
    std::lock_guard lock{mu_};
    if (closed_) return;
    closed_ = true;
    std::vector<PlanPtr> waiting;
    for (auto& [job, plan] : plans_) {
      if (plan->stage == Stage::waiting) waiting.push_back(plan);
    }
    const TimePoint now = Clock::now();
    for (const PlanPtr& plan : waiting) {
      if (plan->last_failure) {
        endings.push_back(finish(plan, *plan->last_failure, RetryStop::shutting_down));
      } else {
        endings.push_back(finish(plan, unstarted(*plan->job, Reason::shutting_down,
                                                 CancelCause::none, now),
                                 RetryStop::none));
      }
    }
    heap_.clear();
  }
  for (Ending& ending : endings) publish(ending);
}

StartSchedule::Ending StartSchedule::finish(const PlanPtr& plan, Outcome outcome, RetryStop stop) {
  plan->stage = Stage::finished;
  plans_.erase(plan->job.get());
  const Job& job = *plan->job;
  outcome.id = job.id;
  outcome.timings.budget = job.budget;
  if (!plan->attempts.empty()) {
    // The job's time, not its last attempt's: every run, and the waits around them.
    Duration ran{};
    for (const AttemptRecord& a : plan->attempts) ran += a.run_time;
    const TimePoint end = saturating_add(job.deadline.time_point(), -outcome.timings.remaining_at_end);
    outcome.timings.run_time = ran;
    outcome.timings.queue_wait = std::max(end - job.enqueued_at - ran, Duration::zero());
  }
  outcome.attempts = std::move(plan->attempts);
  outcome.retry_stop = stop;
  plan->last_failure.reset();
  return {.plan = plan, .outcome = std::move(outcome)};
}

Outcome StartSchedule::unstarted(const Job& job, Reason reason, CancelCause cause, TimePoint at) {
  Outcome o;
  o.id = job.id;
  o.kind = std::string{job.kind()};
  o.state = state_of(reason);
  o.reason = reason;
  o.cause = cause;
  o.timings.budget = job.budget;
  o.timings.queue_wait = std::max(at - job.enqueued_at, Duration::zero());
  o.timings.remaining_at_end = job.deadline.slack(at);
  return o;
}

void StartSchedule::publish(Ending& ending) {
  Job& job = *ending.plan->job;
  job.waiting_.store(false, std::memory_order_relaxed);
  core_.publish(job, std::move(ending.outcome));
}

void StartSchedule::wake_timer_for(TimePoint at) { core_.wake_timer_at(at); }

}  // namespace sandglass::detail
