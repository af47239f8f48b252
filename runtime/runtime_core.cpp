#include "runtime/runtime_core.hpp"

#include "runtime/implausible_message.hpp"
#include "workers/callback_scope.hpp"
#include "workers/job_pool.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <string>
#include <stdexcept>

#if defined(__linux__)
#include <pthread.h>
#include <sys/prctl.h>
#endif

namespace sandglass::detail {
namespace {

constexpr Duration kTimerLongestSleep = std::chrono::milliseconds{100};
// See "Tiny jobs" in runtime_core.hpp: a worker stands by for at most this, and only while the
// worker it relies on has not run its job for longer. So a tiny job that runs long (a
// misestimate) holds the queue for at most twice this after it started.
constexpr Duration kStandByAtMost = std::chrono::microseconds{200};

DeadlineQueueOptions queue_options(const RuntimeOptions& o) {
  // Bulkhead groups are numbered in kind_limits' order (see the constructor).
  std::vector<std::size_t> limits;
  for (const auto& [kind, limit] : o.kind_limits) limits.push_back(limit);
  return {.capacity = o.capacity,
          .workers = o.workers,
          .min_useful = o.budget.min_useful,
          .drop_if_cannot_finish = o.drop_if_cannot_finish,
          .group_limits = std::move(limits)};
}

Job& job_of(QueueItem* item) { return static_cast<Job&>(*item); }

// A running job past its deadline, as reported at `now`. Requires the runtime's lock.
Overrun overrun_of(const Job& job, TimePoint now) {
  return {.worker = job.worker, .id = job.id, .kind = std::string{job.kind()}, .deadline = job.deadline,
          .started_at = job.started_at, .past_deadline = -job.deadline.slack(now)};
}

// Tells runtimes apart in the per-thread caches (an address may be reused).
std::atomic<std::uint64_t> g_next_serial{1};
// Runtimes alive: the last one to go gives the job pool's spare blocks back to malloc.
std::atomic<std::size_t> g_live_runtimes{0};

}  // namespace

RuntimeCore::RuntimeCore(RuntimeOptions options)
    : options_{std::move(options)},
      idle_{options_.workers},
      queue_{queue_options(options_)},
      slots_(options_.workers),
      standing_by_(options_.workers, 0),
      worker_jobs_(options_.workers, nullptr),
      slot_ends_{std::make_unique<SlotEnd[]>(options_.workers)},
      schedule_{*this, options_.retry_budget, options_.retry_random},
      serial_{g_next_serial.fetch_add(1, std::memory_order_relaxed)},
      standing_{options_.queue_delay_target},
      outcome_counts_{std::make_unique<OutcomeCounts[]>(options_.workers + 1)} {
  g_live_runtimes.fetch_add(1, std::memory_order_relaxed);
  // Bulkhead kinds get their groups up front so that pop() never grows a vector under load.
  std::lock_guard lock{kinds_mu_};
  for (const auto& [kind, limit] : options_.kind_limits) {
    KindState& ks = kind_state_locked(kind);
    groups_.push_back(&ks);
    ks.group = static_cast<std::uint32_t>(groups_.size());
    ks.limit = limit;
  }
  can_start_ = [this](std::uint32_t group) {
    const KindState& ks = *groups_[group - 1];
    return ks.running < ks.limit;
  };
}

RuntimeCore::~RuntimeCore() {
  // Jobs are all finished (the Runtime shut down); callers that reached the runtime through a
  // job before it finished may still be inside cancel_from_outside.
  {
    Lock lock{mu_};
    drained_.wait(lock, [&] { return outside_calls_ == 0; });
  }
  // Acq_rel: the last one sees every other runtime's end. Jobs still referenced by handles
  // return their blocks to the pool later, which is fine.
  if (g_live_runtimes.fetch_sub(1, std::memory_order_acq_rel) == 1) JobPool::release_unused();
}

Load RuntimeCore::load_for(const KindState& ks, TimePoint now) const {
  const bool worker_idle = running_count_ < slots_.size();
  const bool slot_free = ks.group == 0 || ks.running < ks.limit;
  if (worker_idle && slot_free) return {};
  // One step per worker (not per job): the work the running jobs still need, spread over the
  // workers (or the group's slots) as the queued work is.
  Duration all{};
  Duration group{};
  for (const RunSlot& slot : slots_) {
    if (slot.job == nullptr) continue;
    const Duration left = std::max(saturating_sub(slot.expected_end, now), Duration::zero());
    auto add = [](Duration sum, Duration d) {
      return d >= Duration::max() / 2 - sum ? Duration::max() / 2 : sum + d;
    };
    all = add(all, left);
    if (slot.group == ks.group) group = add(group, left);
  }
  return {.busy_for = worker_idle ? Duration::zero()
                                  : all / static_cast<Duration::rep>(options_.workers),
          .group_busy_for = slot_free ? Duration::zero()
                                      : group / static_cast<Duration::rep>(std::max<std::size_t>(ks.limit, 1))};
}

void RuntimeCore::start_threads() {
  pool_.emplace(options_.workers, *this, options_.budget);
  callbacks_.emplace(1);
#if defined(__linux__)
  boost::asio::post(*callbacks_, [] { pthread_setname_np(pthread_self(), "sg-callbacks"); });
#endif
  timer_ = std::thread{[this] { timer_loop(); }};
}

KindState& RuntimeCore::kind_state_locked(const std::string& kind) {
  auto [it, made] = kinds_.try_emplace(kind);
  if (made) it->second.name = &it->first;  // a map's keys stay where they are
  return it->second;
}

EstimateState& RuntimeCore::estimate_state_locked(const std::string& key, const std::string& kind) {
  auto it = estimates_.find(std::string_view{key});
  if (it == estimates_.end()) {
    const ServiceTimeEstimatorOptions estimator{.quantile = options_.estimate_quantile,
                                                .window = options_.estimate_window,
                                                .max_age = options_.estimate_max_age,
                                                .age_in_runs = options_.estimate_age_in_runs,
                                                .short_run = options_.tiny_job};
    it = estimates_.try_emplace(key, this, kind, ServiceTimeEstimator{estimator}).first;
  }
  return it->second;
}

RuntimeCore::Resolved RuntimeCore::resolve(const std::string& kind, const std::string& estimate_key) {
  // Producers mostly submit one kind after another: a one-entry cache per thread spares them
  // the hashes and the lock.
  thread_local struct {
    std::uint64_t runtime = 0;
    std::string kind;
    std::string estimate_key;
    Resolved states;
  } last;
  if (last.runtime == serial_ && last.kind == kind && last.estimate_key == estimate_key) {
    return last.states;
  }
  std::lock_guard lock{kinds_mu_};
  KindState& ks = kind_state_locked(kind);
  EstimateState& es = estimate_state_locked(estimate_key.empty() ? kind : estimate_key, kind);
  last.runtime = serial_;
  last.kind = kind;
  last.estimate_key = estimate_key;
  last.states = {.kind = &ks, .estimate = &es};
  return last.states;
}

JobHandle RuntimeCore::submit(JobSpec&& spec, JobHandler&& handler, OutcomeCallback&& on_outcome,
                              std::unique_ptr<AwaitableRun> awaitable) {
  if (awaitable) {
    if (!awaitable->handler.fn) throw std::invalid_argument{"submit: awaitable handler is empty"};
    if (!awaitable->handler.executor) {
      throw std::invalid_argument{"submit: awaitable handler has no executor"};
    }
  } else if (!handler) {
    throw std::invalid_argument{"submit: handler is empty"};
  }
  if (spec.kind.empty()) {
    throw std::invalid_argument{
        "submit: kind is empty (name what the job does; estimates and limits go by it)"};
  }
  if (static_cast<std::size_t>(spec.priority) >= kPriorityCount) {
    throw std::invalid_argument{"submit: priority is not one of critical, high, normal, sheddable"};
  }
  if (spec.retry && spec.retry->max_attempts < 1) {
    throw std::invalid_argument{"submit: retry.max_attempts must be at least 1"};
  }
  if (spec.retry && spec.retry->backoff < Duration::zero()) {
    throw std::invalid_argument{"submit: retry.backoff must not be negative"};
  }
  // Every submission that got this far takes an id: ids count submissions (stats()).
  const JobId id = next_id_.fetch_add(1, std::memory_order_relaxed);
  if (StartSchedule::wanted(spec)) {
    JobRef job = Job::make(std::move(on_outcome));
    job->id = id;
    const Resolved states = resolve(spec.kind, spec.estimate_key);
    job->kind_name = states.kind->name;
    job->origin = states.estimate;
    job->priority = spec.priority;
    if (spec.expected > Duration::zero()) job->extras().expected = spec.expected;
    if (!spec.idempotency_key.empty()) job->extras().idempotency_key = spec.idempotency_key;
    schedule_.submit(job, std::move(spec), std::move(handler), std::move(awaitable), Clock::now());
    return JobHandle{std::move(job)};
  }
  return JobHandle{submit_job(id, std::move(spec), std::move(handler), std::move(on_outcome),
                              std::move(awaitable), false)};
}

JobRef RuntimeCore::submit_job(JobId id, JobSpec&& spec, JobHandler&& handler,
                               OutcomeCallback&& on_outcome,
                               std::unique_ptr<AwaitableRun> awaitable, bool attempt) {
  // Recycled records (see job_pool.hpp): no lock, and no cross-thread free into malloc.
  JobRef job = Job::make(std::move(on_outcome));
  job->id = id;
  job->attempt_ = attempt;
  const Resolved states = resolve(spec.kind, spec.estimate_key);
  KindState& ks = *states.kind;
  EstimateState& es = *states.estimate;
  job->kind_name = ks.name;
  job->origin = &es;  // also the runtime (core()), which everything below may reach
  if (!spec.idempotency_key.empty()) job->extras().idempotency_key = std::move(spec.idempotency_key);
  if (spec.expected > Duration::zero()) job->extras().expected = spec.expected;
  const std::string& estimate_key = spec.estimate_key.empty() ? spec.kind : spec.estimate_key;
  job->priority = spec.priority;
  job->handler = std::move(handler);
  if (awaitable) job->extras().awaitable = std::move(awaitable);

  // The budget: the earlier of `budget` and `deadline`, defaulted and clamped by the policy.
  TimePoint now = Clock::now();  // later only when admit_lock_free stamps the job again
  std::optional<Duration> requested = spec.budget;
  if (spec.deadline) {
    const Duration until_deadline = spec.deadline->slack(now);
    requested = requested ? std::min(*requested, until_deadline) : until_deadline;
  }
  job->budget = options_.budget.grant(requested).budget;
  stamp(*job, now);

  if (spec.parent.cancelled()) {
    // Nobody upstream wants the result any more: do not let it take a queue slot.
    job->phase = Job::Phase::finished;
    finish_unstarted(*job, State::cancelled, Reason::cancelled_in_queue, CancelCause::upstream, {},
                     now);
    return job;
  }
  if (spec.parent.can_be_cancelled()) {
    // Registered before the job becomes visible to workers, who reset the registration when
    // they publish its outcome. A parent cancelled before admission finds the job pending
    // (the callback then does nothing): the check after admission covers that. The callback
    // holds no reference, as the job owns the registration: publish() resets it (and waits
    // for a running callback) before the job can go.
    job->extras().parent_link = spec.parent.on_cancel([j = job.get()]() noexcept {
      cancel_from_outside(*j, CancelCause::upstream);
    });
  }

  // Admitted upstream (JobSpec::admitted): no prediction here, as for a key with no samples.
  const EstimateState::Figures figures =
      spec.admitted ? EstimateState::Figures{} : es.figures(now, spec.expected);
  // Not yet visible to any other thread (a parent's callback reads them only once queued).
  job->estimate = figures.tail;
  job->work = figures.central;
  job->group = ks.group;
  // The standing-queue rule (standing_queue.hpp): one relaxed load while no queue stands. The
  // measured margin is added to every predicted finish (prediction_error.hpp).
  const Duration start_within = standing_.standing() ? standing_.target() : Duration::max();
  const Duration margin = prediction_error_.margin();
  // A job with a parent takes the lock: the parent's callback may look at it from now on.
  if (!spec.parent.can_be_cancelled() &&
      admit_lock_free(job, now, !spec.deadline, start_within, margin)) {
    return job;
  }
  Admission admission;
  JobRef shed;
  std::string rejection;  // why, for deadline_implausible
  Duration retry_after{};  // and when it would be admitted
  bool wake_worker = false;
  bool wake_timer = false;
  {
    Lock lock = lock_hot_path();
    const std::uint64_t spliced = queue_.spliced_total();
    for (;;) {
      // Behind its class's order (see admit_lock_free): a submitter of an equal budget that
      // was preempted between its clock reading and here would overtake the run's whole tail,
      // which then goes into the tree. A reading taken now is later than that of every claim
      // so far.
      if (!spec.deadline && may_restamp(queue_.behind_class_order(job->priority, job->deadline))) {
        now = Clock::now();
        stamp(*job, now);
      }
      Load load = load_for(ks, now);
      load.start_within = start_within;
      load.margin = margin;
      if (std::optional<Admission> decided = queue_.try_admit(*job, now, load)) {
        admission = *decided;
        break;
      }
      // A lock-free submitter stopped between its reservation and its push: waited for
      // without the lock, so that workers and the timer go on meanwhile. What try_admit
      // linked from the inbox may have been looked for by a worker that went to sleep.
      const bool linked = queue_.spliced_total() != spliced;
      lock.unlock();
      if (linked) idle_.wake_one();
      std::this_thread::yield();
      lock = lock_hot_path();
      now = Clock::now();
    }
    if (admission.reason == Reason::deadline_implausible) {
      const Duration hint = figures.from_expected ? spec.expected : Duration::zero();
      rejection = implausible_message(admission.predicted_start, now, job->estimate + margin,
                                      job->deadline, estimate_key, hint);
      retry_after = fits_after(admission.predicted_start, now, job->estimate + margin, job->deadline);
    } else if (admission.beyond_target) {
      rejection = standing_queue_message(admission.predicted_start, now, start_within);
      // Admitted once it would start within the target: the work ahead of it less the target.
      retry_after = std::max(saturating_sub(admission.predicted_start, now) - start_within, Duration::zero());
    }
    if (admission.admitted()) {
      job->phase = Job::Phase::queued;
      job->add_ref();  // the runtime's, while queued or running (retire() takes it back)
      raise_peak(queue_.size());
      // A spinning worker takes this job (and wakes another if more are waiting).
      wake_worker = !spinning_.load(std::memory_order_seq_cst);
      // The timer removes it at its latest useful start (see DeadlineQueue::next_drop_time).
      wake_timer = wake_timer_for(drop_time_of(*job));
    } else {
      job->phase = Job::Phase::finished;
      // admit() linked the inbox: a worker may have gone to sleep without those jobs.
      wake_worker = queue_.spliced_total() != spliced;
    }
    if (admission.shed != nullptr) {
      shed = retire(job_of(admission.shed));
    }
  }
  // Told after unlocking, so the woken worker does not run into the lock we hold.
  if (wake_worker) idle_.wake_one();
  if (wake_timer) timer_wake_.notify_one();
  if (shed) finish_unstarted(*shed, State::rejected, Reason::shed, CancelCause::none);
  if (!admission.admitted()) {
    // Ended at the reading it was decided at: no queue wait, its whole budget left, and no
    // clock reading more on the path a rejection takes under overload.
    if (admission.reason == Reason::deadline_implausible && job->estimate > job->budget) {
      // No queue that drains makes it fit: only an estimate that changes. Taken after
      // unlocking (the estimator has its own lock).
      retry_after = es.forgotten_in(now, figures.from_expected);
    }
    finish_unstarted(*job, State::rejected, admission.reason, CancelCause::none,
                     std::move(rejection), now, retry_after);
  } else if (spec.parent.cancelled()) {
    cancel(*job, CancelCause::upstream);  // a no-op if the callback got there first
  }
  return job;
}

bool RuntimeCore::cancel(Job& job, CancelCause cause) {
  Lock lock{mu_};
  // A scheduled job's phase is set before it is visible and never changes; it is read under
  // the lock all the same, since other jobs' phases change under it. The schedule is called
  // without the runtime's lock (the lock order: the runtime's, then the schedule's, and the
  // schedule may cancel a running attempt, which takes the runtime's).
  if (job.phase == Job::Phase::scheduled) {
    lock.unlock();
    return schedule_.cancel(job, cause);
  }
  if (job.phase == Job::Phase::queued) {
    const std::uint64_t spliced = queue_.spliced_total();
    queue_.remove(job);
    JobRef ref = retire(job);
    notify_if_drained();
    // It may have been its group's unparked item: a worker unparks the next one. Or remove()
    // linked the inbox, which a worker about to sleep no longer sees.
    const bool wake_worker = (job.group != 0 || queue_.spliced_total() != spliced) && !queue_.empty();
    lock.unlock();
    if (wake_worker) idle_.wake_one();
    finish_unstarted(job, State::cancelled, Reason::cancelled_in_queue, cause);
    return true;
  }
  if (job.phase == Job::Phase::running) {
    lock.unlock();
    return job.cancel(cause);
  }
  return false;
}

bool RuntimeCore::cancel_from_outside(Job& job, CancelCause cause) {
  RuntimeCore* core = job.pin_core();
  if (core == nullptr) return false;  // finished: the runtime may be gone
  {
    std::lock_guard lock{core->mu_};
    ++core->outside_calls_;  // from here on the destructor waits for us
  }
  job.unpin_core();
  const bool cancelled = core->cancel(job, cause);
  std::lock_guard lock{core->mu_};
  if (--core->outside_calls_ == 0) core->drained_.notify_all();
  return cancelled;  // touches nothing of the core after the unlock
}

Job* RuntimeCore::next_job(std::size_t worker, Job* finished, Outcome&& outcome) noexcept {
  std::vector<DroppedJob> dropped_jobs;
  FinishedRun run{.job = finished};
  IdlePolicy idle;
  if (finished != nullptr) {
    run.ended_at = saturating_add(finished->started_at, outcome.timings.run_time);
    idle.may_stand_by = tiny(*finished) && outcome.timings.run_time <= options_.tiny_job;
  }
  queue_.prefetch_inbox();  // its lines arrive while we wait for the lock
  Lock lock = lock_hot_path();
  if (finished != nullptr) record_run(run, outcome);
  worker_jobs_[worker] = nullptr;
  for (;;) {
    const TimePoint now = Clock::now();  // under the lock: what take() drops and mark_running() stamps
    const bool stand_by = idle.may_stand_by && !stop_workers_ && !queue_.empty() &&
                          another_worker_drains(worker, now);
    const Taken taken = take(worker, now, stand_by, dropped_jobs);
    if (taken.job != nullptr || run.job != nullptr || !dropped_jobs.empty()) {
      // Outcomes are published outside the lock, and before this worker may sleep.
      if (!dropped_jobs.empty()) notify_if_drained();
      lock.unlock();
      publish_after_take(taken, run, std::move(outcome), dropped_jobs, worker);
      if (taken.job != nullptr && taken.job->awaitable() != nullptr) {
        // It keeps its slot, not this thread: start it on its executor and look for more.
        // The runtime's reference keeps it: only finish_detached (after the launch) takes it.
        const JobRef ref{taken.job};
        launch_awaitable(ref, *this, options_.budget);
      } else if (taken.job != nullptr) {
        return taken.job;  // alive through the runtime's reference while it runs (FinishedRun)
      }
      lock = lock_hot_path();
      continue;
    }
    if (stop_workers_) return nullptr;
    wait_for_work(worker, stand_by, idle, lock);
  }
}

void RuntimeCore::record_run(FinishedRun& run, const Outcome& outcome) {
  Job& job = *run.job;
  run.sample = record_finished(job, outcome, run.self);
  if (run.sample) {
    standing_.on_run(outcome.timings.run_time);
    prediction_error_.on_finish(job.predicted_start(), job.started_at, job.estimate,
                                outcome.timings.run_time, run.ended_at);
  }
}

RuntimeCore::Taken RuntimeCore::take(std::size_t worker, TimePoint now, bool stand_by,
                                     std::vector<DroppedJob>& dropped_jobs) {
  thread_local std::vector<DroppedItem> dropped;
  Taken taken{.wake_standing = slots_.size()};
  // A job starts only into a free run slot (jobs that hold no thread keep theirs).
  QueueItem* item = !stand_by && running_count_ < slots_.size() ? queue_.take(now, dropped, can_start_)
                                                                : nullptr;
  take_dropped(dropped, now, dropped_jobs);
  // Nothing left to start: no queue stands (it drained).
  if (item == nullptr && !stand_by && running_count_ < slots_.size() && queue_.linked_size() == 0) {
    standing_.on_empty();
  }
  if (item == nullptr) return taken;
  Job& job = job_of(item);
  taken.job = &job;
  mark_running(job, now, worker, taken.wake_timer);
  if (job.awaitable() == nullptr) worker_jobs_[worker] = &job;
  // More work than this worker: pass the wake-up on (submitters skip it while one spins).
  // The linked items count, not the reservations (size(), whose line every submitter
  // writes): a submitter that skipped its wake-up because this worker spun pushed before
  // the worker stopped spinning, so take()'s splice linked its job; later ones wake a worker
  // themselves (see admit_lock_free).
  taken.wake_another = queue_.linked_size() > 0;
  // A job that is not tiny holds this worker: one standing by takes the queued ones.
  if (taken.wake_another && standing_by_count_ > 0 && !tiny(job)) {
    taken.wake_standing = static_cast<std::size_t>(
        std::find(standing_by_.begin(), standing_by_.end(), 1) - standing_by_.begin());
    standing_by_[taken.wake_standing] = 0;
    --standing_by_count_;
  }
  // Under the lock (the queue's owner side): two plain stores, after the slot's end was
  // published (see mark_running()).
  queue_.release(job);
  return taken;
}

void RuntimeCore::publish_after_take(const Taken& taken, FinishedRun& run, Outcome&& outcome,
                                     std::vector<DroppedJob>& dropped_jobs,
                                     std::size_t worker) noexcept {
  if (taken.wake_another) idle_.wake_one();
  if (taken.wake_standing < slots_.size()) idle_.wake_standing_by(taken.wake_standing);
  if (taken.wake_timer) timer_wake_.notify_one();
  if (run.job != nullptr) {
    // Only the runtime's reference (now run.self) left: no handle can ask for the outcome.
    // Other references (the timer's, for a moment, a token) keep it, needlessly.
    const bool kept = run.self.use_count() > 1;
    // Before the outcome: whoever waits for it, or its callback, then sees the sample in the
    // estimate. Every run at once, not in batches (see estimate_state.hpp).
    if (run.sample) {
      EstimateState::of(*run.job).record(outcome.timings.run_time, run.ended_at, run.job->expected());
    }
    publish(*run.job, std::move(outcome), kept, worker);
    run.job = nullptr;
    run.self.reset();  // after the outcome: its last reference may free the record
  }
  finish_dropped(dropped_jobs);
}

void RuntimeCore::wait_for_work(std::size_t worker, bool stand_by, IdlePolicy& idle, Lock& lock) {
  if (stand_by) {
    standing_by_[worker] = 1;
    ++standing_by_count_;
    ++stand_bys_;
    idle_.prepare_stand_by(worker);
    lock.unlock();
    const bool woken = idle_.stand_by(worker, kStandByAtMost);
    lock = lock_hot_path();
    if (standing_by_[worker] != 0) {  // nobody chose this worker (time ran out, or stopping)
      standing_by_[worker] = 0;
      --standing_by_count_;
    }
    // Woken for a job that is not tiny: take from the queue until the next tiny job.
    if (woken) idle.may_stand_by = false;
    return;
  }
  if (!idle.spun && !spinning_ && cores_ >= running_count_ + 2) {
    // One idle worker at a time spins briefly before it sleeps: at high rates the next job
    // arrives within microseconds, and a futex sleep plus wake-up costs more than that. Only
    // while a core is free for it (beside the running handlers and a submitter): on a busy
    // machine the spin would take the CPU from the very thread that would end it.
    idle.spun = true;
    // Pairs with the seq_cst load in submitters after their push (see IdleWorkers).
    spinning_.store(true, std::memory_order_seq_cst);
    const std::size_t seen = queue_.size();
    lock.unlock();
    spin_until_queue_changes(seen);
    lock = lock_hot_path();
    spinning_.store(false, std::memory_order_seq_cst);
    return;
  }
  idle.spun = false;
  // Marked idle under the lock: whoever changes the queue under it after this wakes us; a
  // lock-free submitter pushes to the inbox, which we look at once more (see IdleWorkers).
  idle_.prepare(worker);
  lock.unlock();
  if (queue_.inbox_empty()) {
    idle_.sleep(worker);
  } else {
    idle_.withdraw(worker);
  }
  lock = lock_hot_path();
}

void RuntimeCore::finish_detached(JobRef job, Outcome&& outcome) noexcept {
  const TimePoint end = saturating_add(job->started_at, outcome.timings.run_time);
  bool sample = false;
  bool wake_worker = false;
  JobRef self;  // dropped after unlocking (`job` holds another reference)
  {
    Lock lock = lock_hot_path();
    sample = record_finished(*job, outcome, self);
    if (sample) {
      standing_.on_run(outcome.timings.run_time);
      prediction_error_.on_finish(job->predicted_start(), job->started_at, job->estimate,
                                  outcome.timings.run_time, end);
    }
    // A slot is free: a worker may start what waits for one.
    wake_worker = !queue_.empty();
  }
  if (wake_worker) idle_.wake_one();
  if (sample) {
    EstimateState::of(*job).record(outcome.timings.run_time, end, job->expected());
  }
  publish(*job, std::move(outcome));
  // Shutdown returns only once this outcome is out (no thread of ours to join covers it).
  std::lock_guard lock{mu_};
  if (--detached_ == 0) drained_.notify_all();
}

void RuntimeCore::mark_running(Job& job, TimePoint now, std::size_t worker, bool& wake_timer) {
  // The worker's own slot when free (always, unless jobs that hold no thread took it).
  std::size_t slot = worker < slots_.size() && slots_[worker].job == nullptr ? worker : 0;
  while (slots_[slot].job != nullptr) ++slot;
  job.phase = Job::Phase::running;
  // `now` was read under the lock, but a lock-free submitter may have pushed the job into the
  // inbox after that reading (take() splices it): it cannot have started before it was queued,
  // and queue_wait + run_time + remaining_at_end = budget holds only with a wait of zero or more.
  job.started_at = std::max(now, job.enqueued_at);
  standing_.on_start(job.started_at - job.enqueued_at, job.started_at);
  prediction_error_.on_start(job.predicted_start(), job.started_at);
  job.worker = static_cast<std::uint32_t>(slot);
  job.started_.store(true, std::memory_order_release);  // pairs with JobHandle::progress
  if (job.group != 0) ++groups_[job.group - 1]->running;  // see KindState::running
  ++running_count_;
  if (job.awaitable() != nullptr) ++detached_;
  // The tail estimate, less what has run: for a kind of fixed length that is what is left; for
  // a memoryless one (exponential run times) it stays near the mean on average.
  slots_[slot] = {.job = &job, .expected_end = saturating_add(job.started_at, job.estimate), .group = job.group};
  // Published here, then the queue's reservation given back by the caller (next_job, under
  // the lock): a lock-free admission counts the job in one of the two (see
  // DeadlineQueue::take). Relaxed, because the release orders it: DeadlineQueue::release is a
  // release store of the job's class's released work (when it counts any) and of the
  // released places, after this store in program order; an admitter reads the released places
  // (before its reservation) and the released work of its class and those above (acquire
  // loads) before it reads the slot ends in busy_bound. If one of those reads sees the
  // release, it synchronises with it and busy_bound sees this end (or a later one: the slot
  // freed, or a newer job's end, which is then the truth). If none does, the job's work is
  // still counted as queued work ahead of the admitter (its class is at or above the
  // admitter's: the released work it read leaves it in), or it is of a lower class, which the
  // exact rule would not count as queued either and which the admitter's reads then precede;
  // a job that counts no work has an end of `now` and adds nothing to busy_bound. So the bound
  // holds as with a seq_cst store, but the critical section waits at no full fence for its
  // stores to the job's lines, and the release takes no locked instruction.
  slot_ends_[slot].ns.store(slots_[slot].expected_end.time_since_epoch().count(),
                            std::memory_order_relaxed);
  wake_timer = wake_timer_for(job.deadline);
}

bool RuntimeCore::record_finished(Job& job, const Outcome& outcome, JobRef& self) {
  slots_[job.worker].job = nullptr;
  slot_ends_[job.worker].ns.store(TimePoint::min().time_since_epoch().count(), std::memory_order_relaxed);
  --running_count_;
  job.phase = Job::Phase::finished;
  self = JobRef::adopt(&job);  // the runtime's reference, now the caller's to drop
  if (job.group != 0) --groups_[job.group - 1]->running;
  // The group's slot is free: this worker's next pop unparks the group's next item itself.
  // Completed and failed runs are whole samples; a run stopped by its deadline is a lower
  // bound worth keeping (dropping it would teach the estimator that the kind is fast).
  // Runs cut short by the caller, upstream or shutdown say nothing about the kind, and neither
  // does an awaitable job whose executor never started it (expired_in_queue).
  notify_if_drained();
  return outcome.state == State::completed || outcome.state == State::failed ||
         (outcome.cause == CancelCause::deadline && outcome.state != State::expired);
}

Deadline RuntimeCore::overrun_due(const Job& job) const noexcept {
  return Deadline::after(options_.overrun_after, job.deadline.time_point());
}

Deadline RuntimeCore::visit_overdue(TimePoint now, std::vector<JobRef>& overdue,
                                    std::vector<Overrun>& overruns) {
  const bool report = static_cast<bool>(options_.on_overrun);
  Deadline next = Deadline::never();
  for (const RunSlot& slot : slots_) {
    if (slot.job == nullptr) continue;
    Job& job = *slot.job;
    if (!job.deadline.expired(now)) {
      next = earlier(next, job.deadline);
      continue;
    }
    if (!job.deadline_signalled) {
      job.deadline_signalled = true;
      overdue.push_back(JobRef{&job});
    }
    if (!report || job.overrun_reported) continue;
    const Deadline due = overrun_due(job);
    if (due.expired(now)) {
      job.overrun_reported = true;
      overruns.push_back(overrun_of(job, now));
    } else {
      next = earlier(next, due);
    }
  }
  // Reported earliest deadline first, as `overruns()` lists them.
  std::sort(overruns.begin(), overruns.end(),
            [](const Overrun& a, const Overrun& b) { return a.deadline < b.deadline; });
  return next;
}

void RuntimeCore::timer_loop() {
#if defined(__linux__)
  // The timer sleeps until the earliest deadline, and the kernel may wake a sleeping thread up
  // to its timer slack late (50 µs by default); every deadline signal would inherit that. The
  // timer wakes about once per deadline, so a tight slack costs little.
  constexpr unsigned long kTimerSlackNs = 10'000;
  prctl(PR_SET_TIMERSLACK, kTimerSlackNs);
  pthread_setname_np(pthread_self(), "sg-timer");
#endif
  std::vector<DroppedItem> dropped;
  std::vector<DroppedJob> expired;
  std::vector<JobRef> overdue;
  std::vector<Overrun> overruns;
  std::vector<JobRef> due_starts;
  Lock lock{mu_};
  while (!stop_timer_) {
    const TimePoint now = Clock::now();
    const std::uint64_t spliced = queue_.spliced_total();
    queue_.expire(now, dropped);
    // expire() linked the inbox: a worker that looked at it meanwhile saw it empty and may
    // sleep (it marked itself idle before, so this finds it). Lock-free: fine under mu_.
    if (queue_.spliced_total() != spliced) idle_.wake_one();
    take_dropped(dropped, now, expired);
    schedule_.take_due(now, due_starts);
    const Deadline next = earlier(earlier(queue_.next_drop_time(), visit_overdue(now, overdue, overruns)),
                                  schedule_.next_start());
    if (!expired.empty() || !overdue.empty() || !overruns.empty() || !due_starts.empty()) {
      notify_if_drained();
      // What left may have been a group's unparked item: a worker unparks the next one.
      const bool wake_worker = !expired.empty() && !queue_.empty();
      lock.unlock();
      if (wake_worker) idle_.wake_one();
      dispatch_from_timer(expired, overdue, overruns);
      if (!due_starts.empty()) {
        // Admission may publish a rejection (user code): on the callback thread.
        boost::asio::post(*callbacks_, [this, due = std::move(due_starts)] {
          const CallbackScope scope{this};
          for (const JobRef& job : due) schedule_.start_attempt(job);
        });
        due_starts.clear();
      }
      lock.lock();
      continue;
    }
    if (stop_timer_) break;
    // Never longer than kTimerLongestSleep: a job due later than that needs no wake-up.
    // Seq_cst: pairs with the load in admit_lock_free after its push.
    const TimePoint until = std::min(next.time_point(), saturating_add(now, kTimerLongestSleep));
    timer_sleeps_until_.store(until.time_since_epoch().count(), std::memory_order_seq_cst);
    timer_wake_.wait_until(lock, until, [&] {
      return stop_timer_ || timer_sleeps_until_.load(std::memory_order_relaxed) < until.time_since_epoch().count();
    });
    // Awake: nobody needs to wake us. Stored before the next look at the inbox (expire), so a
    // submitter that pushes after that look sees it.
    timer_sleeps_until_.store(TimePoint::min().time_since_epoch().count(), std::memory_order_seq_cst);
  }
}

void RuntimeCore::dispatch_from_timer(std::vector<DroppedJob>& expired,
                                      std::vector<JobRef>& overdue,
                                      std::vector<Overrun>& overruns) {
  // The deadline signal proper, here and at once: checkpoints see it now. A job already
  // cancelled (or whose handler just returned) keeps what it had; its callbacks ran elsewhere.
  std::erase_if(overdue, [](const JobRef& job) {
    return !job->signal(CancelCause::deadline);
  });
  if (overdue.empty() && expired.empty() && overruns.empty()) return;
  // The rest runs user code: on the callback thread. Cancellation callbacks first (they wake
  // sleeping handlers and reach the real work), then outcomes, then reports.
  boost::asio::post(*callbacks_, [this, overdue = std::move(overdue),
                                  expired = std::move(expired),
                                  overruns = std::move(overruns)]() mutable {
    const CallbackScope scope{this};
    for (auto& job : overdue) job->cancel_state().run_callbacks();
    finish_dropped(expired);
    for (const Overrun& o : overruns) options_.on_overrun(o);
  });
  // Moved from: empty them for the next round, whatever the moves left behind.
  overdue.clear();
  expired.clear();
  overruns.clear();
}

void RuntimeCore::stop_admitting() {
  {
    Lock lock{mu_};
    closing_ = true;
    queue_.close();
  }
  schedule_.close();
}

void RuntimeCore::wake_timer_at(TimePoint at) {
  bool wake = false;
  {
    Lock lock{mu_};
    wake = wake_timer_for(Deadline::at(at));
  }
  if (wake) timer_wake_.notify_one();
}

void RuntimeCore::end_drain() {
  {
    Lock lock{mu_};
    drain_cut_ = true;
  }
  drained_.notify_all();
}

void RuntimeCore::refuse_from_callback(const char* what) const {
  if (CallbackScope::inside(this)) {
    throw std::logic_error{std::string{what} +
                           " called from a handler or callback of the same Runtime: it would "
                           "wait for that code to return; call it from another thread"};
  }
}

void RuntimeCore::shutdown_until(Deadline drain_deadline) {
  refuse_from_callback("Runtime::shutdown");
  std::lock_guard shutdown_lock{shutdown_mu_};
  if (shut_down_) return;
  {
    Lock lock{mu_};
    closing_ = true;
    queue_.close();
  }
  schedule_.close();  // what waits for a later start ends now; no retry starts from here on
  std::vector<JobRef> left_in_queue;
  std::vector<JobRef> still_running;
  for (;;) {
    Lock lock{mu_};
    closing_ = true;
    queue_.close();
    auto drained = [&] { return drain_cut_ || (queue_.empty() && running_count_ == 0); };
    if (drain_deadline.is_never()) {
      drained_.wait(lock, drained);
    } else {
      drained_.wait_until(lock, drain_deadline.time_point(), drained);
    }
    std::optional<std::vector<QueueItem*>> left = queue_.try_take_all();
    if (!left) {
      // A submitter between its reservation and its push: waited for without the lock (see
      // submit), then drained again.
      lock.unlock();
      std::this_thread::yield();
      continue;
    }
    for (QueueItem* item : *left) left_in_queue.push_back(retire(job_of(item)));
    for (const RunSlot& slot : slots_) {
      if (slot.job != nullptr) still_running.push_back(JobRef{slot.job});
    }
    break;
  }
  for (auto& job : left_in_queue) {
    finish_unstarted(*job, State::cancelled, Reason::cancelled_in_queue, CancelCause::shutdown);
  }
  for (auto& job : still_running) job->cancel(CancelCause::shutdown);
  {
    // Handlers see the cancellation at their next checkpoint; wait for them to return.
    Lock lock{mu_};
    drained_.wait(lock, [&] { return running_count_ == 0 && detached_ == 0; });
    stop_workers_ = true;
    stop_timer_ = true;
  }
  idle_.wake_all();
  timer_wake_.notify_all();
  // A core that was never started (a test that plays its worker) has no threads to join.
  if (pool_) pool_->join();
  if (timer_.joinable()) timer_.join();
  if (callbacks_) callbacks_->join();  // after the timer: it runs what the timer handed over
  shut_down_ = true;
}

std::vector<Overrun> RuntimeCore::overruns() const {
  std::vector<Overrun> out;
  std::lock_guard lock{mu_};
  const TimePoint now = Clock::now();
  for (const Job* job : overrunning(now)) out.push_back(overrun_of(*job, now));
  return out;
}

std::vector<EstimateSnapshot> RuntimeCore::estimates() {
  std::vector<EstimateSnapshot> out;
  {
    std::lock_guard lock{kinds_mu_};  // entries are never removed: the references stay valid
    out.reserve(estimates_.size());
    for (auto& [key, state] : estimates_) out.push_back(state.snapshot(key));
  }
  std::sort(out.begin(), out.end(),
            [](const EstimateSnapshot& a, const EstimateSnapshot& b) { return a.key < b.key; });
  return out;
}

void RuntimeCore::record_outside_run(const JobSpec& spec, Duration run_time) {
  if (spec.kind.empty()) throw std::invalid_argument{"record_run: kind is empty"};
  EstimateState* state = nullptr;
  {
    std::lock_guard lock{kinds_mu_};  // entries are never removed: the pointer stays valid
    state = &estimate_state_locked(spec.estimate_key.empty() ? spec.kind : spec.estimate_key, spec.kind);
  }
  state->record(run_time, Clock::now(), spec.expected);
}

RunEstimate RuntimeCore::estimate(const JobSpec& spec) {
  EstimateState* state = nullptr;
  {
    std::lock_guard lock{kinds_mu_};  // entries are never removed: the pointer stays valid
    const auto it = estimates_.find(std::string_view{spec.estimate_key.empty() ? spec.kind : spec.estimate_key});
    if (it != estimates_.end()) state = &it->second;
  }
  const EstimateState::Figures f = state != nullptr ? state->figures(Clock::now(), spec.expected)
                                                    : EstimateState::without_runs(spec.expected);
  return {.central = f.central, .tail = f.tail};
}

std::vector<const Job*> RuntimeCore::overrunning(TimePoint now) const {
  std::vector<const Job*> due;
  for (const RunSlot& slot : slots_) {
    if (slot.job != nullptr && overrun_due(*slot.job).expired(now)) due.push_back(slot.job);
  }
  std::sort(due.begin(), due.end(),
            [](const Job* a, const Job* b) { return a->deadline < b->deadline; });
  return due;
}

RuntimeStats RuntimeCore::stats() const {
  RuntimeStats s;
  s.submitted = next_id_.load(std::memory_order_relaxed) - 1;
  for (std::size_t i = 0; i < kReasonCount; ++i) {
    for (std::size_t row = 0; row <= options_.workers; ++row) {
      s.outcomes[i] += outcome_counts_[row].by_reason[i].load(std::memory_order_relaxed);
    }
  }
  std::lock_guard lock{mu_};
  const std::uint64_t spliced = queue_.spliced_total();
  queue_.splice();
  if (queue_.spliced_total() != spliced) idle_.wake_one();  // as in timer_loop
  s.queued = queue_.size();
  for (std::size_t i = 0; i < kPriorityCount; ++i) {
    s.queued_by_priority[i] = queue_.size(static_cast<Priority>(i));
  }
  s.running = running_count_;
  s.peak_queued = peak_queued_.load(std::memory_order_relaxed);
  s.overrunning = overrunning(Clock::now()).size();
  s.stand_bys = stand_bys_;
  s.standing_queue = standing_.standing();
  s.start_error_tail = prediction_error_.start_tail();
  s.run_error_tail = prediction_error_.run_tail();
  s.prediction_margin = prediction_error_.margin();
  s.queue_delay_target = standing_.target();
  return s;
}

void RuntimeCore::take_dropped(std::vector<DroppedItem>& dropped, TimePoint now, std::vector<DroppedJob>& out) {
  for (const DroppedItem& d : dropped) {
    Job& job = job_of(d.item);
    prediction_error_.on_drop(job.predicted_start(), now);
    out.push_back({retire(job), d.reason});
  }
  dropped.clear();
}

JobRef RuntimeCore::retire(Job& job) {
  job.phase = Job::Phase::finished;
  return JobRef::adopt(&job);  // the runtime's reference
}

void RuntimeCore::finish_dropped(std::vector<DroppedJob>& dropped) {
  for (auto& [job, reason] : dropped) {
    finish_unstarted(*job, State::expired, reason, CancelCause::none);
  }
  dropped.clear();
}

void RuntimeCore::spin_until_queue_changes(std::size_t seen) const {
  constexpr auto kSpinFor = std::chrono::microseconds{20};
  const TimePoint until = Clock::now() + kSpinFor;
  for (unsigned i = 1; queue_.size() == seen && queue_.inbox_empty(); ++i) {
    if (i % 64 == 0 && Clock::now() >= until) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

bool RuntimeCore::tiny(const Job& job) noexcept {
  return job.awaitable() == nullptr && EstimateState::of(job).mostly_tiny();
}

bool RuntimeCore::another_worker_drains(std::size_t worker, TimePoint now) const {
  for (std::size_t other = 0; other < worker_jobs_.size(); ++other) {
    if (other == worker || standing_by_[other] != 0 || idle_.marked(other)) continue;
    // Awake: between jobs, or in one that has not run longer than a worker stands by (one that
    // has may take long: a misestimate, or a job that is not tiny).
    const Job* running = worker_jobs_[other];
    if (running == nullptr || now - running->started_at <= kStandByAtMost) return true;
  }
  return false;
}

RuntimeCore::Lock RuntimeCore::lock_hot_path() {
  // Critical sections here last a few hundred nanoseconds; sleeping in the kernel on a busy
  // mutex costs microseconds. Try for a moment before blocking.
  for (int i = 0; i < 64; ++i) {
    if (mu_.try_lock()) return Lock{mu_, std::adopt_lock};
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  return Lock{mu_};
}

bool RuntimeCore::wake_timer_for(Deadline deadline) {
  const TimePoint::rep t = deadline.time_point().time_since_epoch().count();
  if (t >= timer_sleeps_until_.load(std::memory_order_relaxed)) return false;
  timer_sleeps_until_.store(t, std::memory_order_relaxed);
  return true;
}

Deadline RuntimeCore::drop_time_of(const Job& job) const noexcept {
  return options_.drop_if_cannot_finish
             ? Deadline::at(saturating_add(job.deadline.time_point(), Duration{1} - job.estimate))
             : job.deadline;
}

bool RuntimeCore::may_restamp(Duration behind) noexcept {
  // Further behind, it is a job of a shorter budget than one queued (a later clock reading
  // would not help; a rejection, say, should not pay for one); within this, a submitter that
  // was preempted for a time slice or two between its clock reading and its claim.
  constexpr Duration kRestampWithin = std::chrono::milliseconds{10};
  return behind > Duration::zero() && behind <= kRestampWithin;
}

void RuntimeCore::stamp(Job& job, TimePoint now) noexcept {
  job.enqueued_at = now;
  job.deadline = Deadline::after(job.budget, now);
}

void RuntimeCore::raise_peak(std::size_t queued) noexcept {
  std::size_t peak = peak_queued_.load(std::memory_order_relaxed);
  while (queued > peak &&
         !peak_queued_.compare_exchange_weak(peak, queued, std::memory_order_relaxed)) {
  }
}

bool RuntimeCore::admit_lock_free(JobRef& job, TimePoint& now, bool restamp, Duration start_within,
                                  Duration margin) {
  const DeadlineQueue::BusyBound busy{&RuntimeCore::busy_bound, this};
  // Submitters of equal budgets read the clock in one order and claim in another: the one
  // that comes second is behind its class's order and would take the lock, and one preempted
  // for a while would overtake more of the run than it may join (the run's tail then goes to
  // the tree). Stamped again, its budget counts from a clock reading taken while it is
  // admitted, as before, only a later one: every job keeps deadline = enqueued_at + budget,
  // and a reading taken after the claim that raised the order is later than the one that
  // claim used.
  constexpr int kRestamps = 3;
  for (int restamps = 0;; ++restamps) {
    // A job the queue will decline (a rejection, most often) costs no reference count change.
    if (queue_.lock_free_may_admit(*job, now, busy, start_within, margin)) {
      // Published by the push: the worker that links the job reads them under mu_.
      job->phase = Job::Phase::queued;
      job->add_ref();  // the runtime's (see submit)
      if (queue_.claim_lock_free(*job, now, busy, start_within, margin)) break;
      job->phase = Job::Phase::pending;
      (void)job->drop_ref();  // never the last: `job` holds one
    }
    if (!restamp || restamps == kRestamps ||
        !may_restamp(queue_.behind_class_order(job->priority, job->deadline))) {
      return false;
    }
    // Still behind after this: a job of a longer budget came first (the locked path overtakes
    // it), or this thread was preempted again; either way the next round decides.
    now = Clock::now();
    stamp(*job, now);
  }
  // From here a worker may already run it; `job` (ours) keeps it alive, and what is read
  // below (deadline, estimate) no longer changes.
  raise_peak(queue_.size());
  // Seq_cst, after the push: pairs with the stores of a worker that stops spinning, and of
  // IdleWorkers::prepare.
  if (!spinning_.load(std::memory_order_seq_cst)) idle_.wake_one();
  // The timer removes the job at its drop time; if that is due before the timer wakes (or
  // the timer is awake and may already have looked at the inbox), tell it under its lock. A
  // drop time further away than the timer's longest sleep needs nothing.
  const Deadline drop = drop_time_of(*job);
  if (drop.time_point() < saturating_add(now, kTimerLongestSleep)) {
    const TimePoint::rep sleeps = timer_sleeps_until_.load(std::memory_order_seq_cst);
    if (sleeps == TimePoint::min().time_since_epoch().count() ||
        drop.time_point().time_since_epoch().count() < sleeps) {
      bool wake = false;
      {
        Lock lock{mu_};
        wake = wake_timer_for(drop);
      }
      if (wake) timer_wake_.notify_one();
    }
  }
  return true;
}

Duration RuntimeCore::busy_bound(const void* core, TimePoint now) noexcept {
  const auto& self = *static_cast<const RuntimeCore*>(core);
  Duration all{};
  for (std::size_t s = 0; s < self.options_.workers; ++s) {
    // Read after the queue's work (acquire loads there): see the store in mark_running().
    const TimePoint::rep end = self.slot_ends_[s].ns.load(std::memory_order_relaxed);
    if (end == TimePoint::min().time_since_epoch().count()) continue;
    const Duration left = TimePoint{Duration{end}} - now;
    if (left > Duration::zero()) all = left >= Duration::max() / 2 - all ? Duration::max() / 2 : all + left;
  }
  // What load_for says, but also while a worker is idle (an upper bound).
  return all / static_cast<Duration::rep>(self.options_.workers);
}

void RuntimeCore::notify_if_drained() {
  if (closing_ && queue_.empty() && running_count_ == 0) drained_.notify_all();
}

void RuntimeCore::finish_unstarted(Job& job, State state, Reason reason, CancelCause cause,
                                   std::string error, std::optional<TimePoint> at,
                                   Duration retry_after) {
  const TimePoint now = at ? *at : Clock::now();
  Outcome o;
  o.id = job.id;
  o.kind = job.kind();
  o.state = state;
  o.reason = reason;
  o.cause = cause;
  o.timings.budget = job.budget;
  o.timings.queue_wait = now - job.enqueued_at;
  o.timings.remaining_at_end = job.deadline.slack(now);
  o.error = std::move(error);
  o.retry_after = retry_after;
  publish(job, std::move(o));
}

void RuntimeCore::publish(Job& job, Outcome&& outcome, bool kept, std::size_t worker) {
  std::atomic<std::uint64_t>& count =
      outcome_counts_[std::min(worker, options_.workers)].by_reason[static_cast<std::size_t>(outcome.reason)];
  if (job.attempt_) {
    // One attempt of a scheduled job: that job's outcome is the one counted.
  } else if (worker < options_.workers) {
    // A worker's row has one writer, the worker itself: a load and a store, no locked
    // read-modify-write (readers only load).
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    count.fetch_add(1, std::memory_order_relaxed);
  }
  job.publish(std::move(outcome), kept);
}

}  // namespace sandglass::detail
