// runtime_core.hpp (private) — `RuntimeCore`, the state behind a `Runtime`: the queue, the
// run slots, per-kind estimates and bulkheads, the worker pool and the deadline timer, all
// guarded by one mutex.
//
// Submission: most jobs are admitted without the lock, through the queue's inbox (see
// DeadlineQueue, "The inbox"); the rest (rejections, shedding, jobs that overtake queued work,
// bulkhead kinds, jobs with a parent token) take mu_ and are decided there, exactly. Workers
// link the inbox when they look for work. An idle worker sleeps on IdleWorkers, which a
// submitter without the lock can wake; the one lock left per job is the worker's.
//
// Run slots: a job runs in one of `workers` slots, which admission and the timer look at
// instead of a set of running jobs. A slot is not a thread: a worker prefers its own index, so
// a blocking job's slot is the worker that runs it; a job that does not hold a thread while it
// runs keeps its slot all the same.
//
// Tiny jobs: a run of jobs shorter than the hand-off itself goes faster through one worker
// than through two that take the lock and the queue's lines in turn (with no-op jobs on two
// cores: 1.38 against 1.00 M jobs/s with sandglass-handoff-bench). So a worker whose last
// job was tiny (RuntimeOptions::tiny_job: its own run and most of its estimate key's recent
// ones) stands by instead of taking the next one while another worker is awake and drains the
// queue: between jobs, or in one that has not run longer than kStandByAtMost. Standing by, it
// sleeps unmarked (submitters wake the idle workers, not it) for at most kStandByAtMost, then
// looks again. A worker that starts a job that is not tiny while more are queued wakes one
// that stands by; so does shutdown. The queue, its order and admission do not change: only how
// many workers take from it. When a job estimated tiny runs long, a worker standing by takes
// over the queue at most 2 × kStandByAtMost after that job started.
//
// One timer thread serves every job. It sleeps until the earliest deadline of any queued or
// running job (for a queued job with drop_if_cannot_finish: its latest useful start, the
// deadline − the kind's tail estimate), or for at most kTimerLongestSleep (100 ms), so that a job
// due later than that never has to wake it. Awake, it removes queued jobs whose deadline passed
// (expired_in_queue) or that can no longer finish (too_late_to_start) and signals running ones
// with cause `deadline`;
// with an `on_overrun` callback it also wakes when a cancelled job that still runs becomes
// overrunning. Submitting or starting a job wakes it only when that job's deadline is earlier
// than the one it sleeps for. The timer runs no user code: it records the deadline on the job's
// token (what checkpoints read) and hands the rest — the token's on_cancel callbacks, expired
// jobs' outcomes and their callbacks, overrun reports — to one callback thread, in that order,
// so a slow callback delays other callbacks but never a deadline signal.
//
// Delayed starts and retries (JobSpec::delay, JobSpec::retry) live in the StartSchedule: the
// timer also sleeps until its earliest start and hands the due ones to the callback thread,
// which submits their attempts here as ordinary jobs.
//
// Thread safety: every public member function may be called concurrently.
#pragma once

#include <sandglass/deadline_queue.hpp>
#include <sandglass/runtime.hpp>
#include <sandglass/service_time_estimator.hpp>

#include "runtime/estimate_state.hpp"
#include "runtime/idle_workers.hpp"
#include "runtime/prediction_error.hpp"
#include "runtime/standing_queue.hpp"
#include "runtime/start_schedule.hpp"
#include "workers/awaitable_runner.hpp"
#include "workers/job.hpp"
#include "workers/worker_pool.hpp"

#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace sandglass::detail {

// What the runtime knows about one kind of job: its bulkhead.
struct KindState {
  const std::string* name = nullptr;  // the kind: the key in the runtime's table of kinds
  std::uint32_t group = 0;  // bulkhead group, zero when the kind is unlimited
  std::size_t limit = 0;    // most running at once (when group != 0)
  // Running jobs of a bulkhead kind (group != 0); guarded by the runtime's mutex. Not counted
  // for other kinds: their state stays read-only once made, so the submitters that read
  // `name` and `group` for every job do not lose the cache line to workers writing this.
  std::size_t running = 0;
};

class RuntimeCore final : public JobSource {
 public:
  explicit RuntimeCore(RuntimeOptions options);
  ~RuntimeCore() override;

  // Starts the worker and timer threads; call once, right after construction. A core not
  // started admits and hands out jobs to whoever calls next_job (a test that plays a worker,
  // with no timer), and shuts down as a started one does.
  void start_threads();

  // Exactly one of `handler` and `awaitable` is set.
  // Takes what it keeps from the arguments (references: the caller's parameters are moved
  // from once, not twice).
  JobHandle submit(JobSpec&& spec, JobHandler&& handler, OutcomeCallback&& on_outcome,
                   std::unique_ptr<AwaitableRun> awaitable = nullptr);
  // Cancels a queued job (it leaves the queue) or signals a running one. True if this call
  // cancelled it.
  bool cancel(Job& job, CancelCause cause);
  // As `cancel`, for callers outside the runtime's own threads (JobHandle::cancel, a parent
  // token's callback): safe while the runtime is being destroyed, and false once the job has
  // ended (its handler returned, or its outcome is published).
  static bool cancel_from_outside(Job& job, CancelCause cause);
  // Throws std::logic_error when called from user code this runtime runs (a handler, an
  // outcome callback, a callback on the callback thread): `what` would wait for itself.
  void refuse_from_callback(const char* what) const;
  void shutdown_until(Deadline drain_deadline);
  void stop_admitting();
  void end_drain();
  RuntimeStats stats() const;
  std::vector<Overrun> overruns() const;
  std::vector<EstimateSnapshot> estimates();
  // Runtime::record_run (a run measured elsewhere) and Runtime::estimate. Each takes kinds_mu_
  // for the look-up.
  void record_outside_run(const JobSpec& spec, Duration run_time);
  RunEstimate estimate(const JobSpec& spec);
  const RuntimeOptions& options() const noexcept { return options_; }

  Job* next_job(std::size_t worker, Job* finished, Outcome&& outcome) noexcept override;
  void finish_detached(JobRef job, Outcome&& outcome) noexcept override;

 private:
  friend class StartSchedule;
  using Lock = std::unique_lock<std::mutex>;

  // Admits or rejects a job that is not scheduled (see submit) with id `id`. `attempt`: it is
  // one attempt of a scheduled job (Job::attempt_), which publishes the outcome that counts.
  JobRef submit_job(JobId id, JobSpec&& spec, JobHandler&& handler, OutcomeCallback&& on_outcome,
                    std::unique_ptr<AwaitableRun> awaitable, bool attempt);
  // Tells the timer about a scheduled start at `at` (takes mu_).
  void wake_timer_at(TimePoint at);

  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };

  struct DroppedJob {
    JobRef job;
    Reason reason;
  };

  void timer_loop();
  // Hands what the timer found to the callback thread: runs the on_cancel callbacks of `overdue`
  // (already signalled), publishes `expired`, reports `overruns`. Without mu_.
  void dispatch_from_timer(std::vector<DroppedJob>& expired,
                           std::vector<JobRef>& overdue,
                           std::vector<Overrun>& overruns);
  // Walks the run slots: cancels the jobs whose deadline passed at `now` and that were not yet
  // signalled (into `overdue`) and, when overruns are reported, collects those due for a
  // report (into `overruns`). Returns the earliest time the timer must wake for a running job.
  // Requires mu_. O(slots).
  Deadline visit_overdue(TimePoint now, std::vector<JobRef>& overdue,
                         std::vector<Overrun>& overruns);
  // When `job` (running, past its deadline) counts as overrunning.
  Deadline overrun_due(const Job& job) const noexcept;
  // A worker between jobs (next_job) takes the next one, runs nothing itself, and publishes
  // what it finished: three steps, each below in one place, and an idle policy for when the
  // queue has nothing it may start.
  //
  // The run a worker just finished: recorded under mu_, its outcome published after unlocking.
  struct FinishedRun {
    Job* job = nullptr;  // null: none (or already published)
    // When the run ended: its sample's time. Not the `now` of the take: the lock may be
    // contended, or the thread preempted, for longer than a queued job has left.
    TimePoint ended_at{};
    bool sample = false;  // its run time is a sample for its estimate key
    // The runtime's own reference, taken out under mu_ (record_finished) and dropped after the
    // outcome is out. The worker holds none of its own while a job runs: the runtime's keeps it
    // alive, and only this worker takes it back (two reference count changes fewer per job).
    JobRef self;
  };
  // What one take under mu_ decided, for after unlocking.
  struct Taken {
    Job* job = nullptr;        // started (mark_running): run it, or launch it if awaitable
    bool wake_another = false;  // more queued than this worker: pass the wake-up on
    bool wake_timer = false;    // as wake_timer_for says
    std::size_t wake_standing = static_cast<std::size_t>(-1);  // a worker standing by to wake
  };
  // A worker's idle policy between jobs while nothing may start: stand by when its last job
  // was tiny and another worker drains the queue (see "Tiny jobs"), else spin once while a
  // core is free, else sleep until woken.
  struct IdlePolicy {
    bool may_stand_by = false;  // its last job was tiny (cleared when woken for a long one)
    bool spun = false;          // it spun since it last slept
  };
  // Take: records `run` (requires mu_).
  void record_run(FinishedRun& run, const Outcome& outcome);
  // Take: starts the earliest startable queued job into a free slot, unless `stand_by`;
  // collects what the queue dropped into `dropped_jobs`. Requires mu_.
  Taken take(std::size_t worker, TimePoint now, bool stand_by, std::vector<DroppedJob>& dropped_jobs);
  // Publish: after unlocking, the wake-ups `taken` asked for, `run`'s outcome and the dropped
  // jobs' outcomes.
  void publish_after_take(const Taken& taken, FinishedRun& run, Outcome&& outcome,
                          std::vector<DroppedJob>& dropped_jobs, std::size_t worker) noexcept;
  // Idle: waits as `idle` says, then returns holding `lock` again for the next take.
  void wait_for_work(std::size_t worker, bool stand_by, IdlePolicy& idle, Lock& lock);
  // Marks a taken job running in a free run slot (`worker`'s own if free); requires mu_ and a
  // free slot. The caller gives back the job's queue
  // reservation (DeadlineQueue::release) afterwards, with or without mu_.
  // `wake_timer`: as wake_timer_for says.
  void mark_running(Job& job, TimePoint now, std::size_t worker, bool& wake_timer);
  // The running jobs whose overrun is due at `now`, earliest deadline first; requires mu_.
  std::vector<const Job*> overrunning(TimePoint now) const;
  // The bookkeeping when a handler returned: run slot, bulkhead; requires mu_. Moves the
  // runtime's own reference to the job into `self`, for the caller to drop after unlocking.
  // True if the run is a sample for its kind's estimate (the caller records it after
  // unlocking).
  bool record_finished(Job& job, const Outcome& outcome, JobRef& self);
  // The state of `kind`, and that of estimate key `key` (for a job of `kind`), made on first
  // use; require kinds_mu_. The references live as long as this.
  KindState& kind_state_locked(const std::string& kind);
  EstimateState& estimate_state_locked(const std::string& key, const std::string& kind);
  struct Resolved {
    KindState* kind = nullptr;
    EstimateState* estimate = nullptr;
  };
  // The states of a job's kind and estimate key (empty: the kind). Takes kinds_mu_ (never
  // under mu_) unless this thread resolved the same pair of this runtime last.
  Resolved resolve(const std::string& kind, const std::string& estimate_key);
  // What running work means for a newcomer of `ks` at `now`: zero when a worker (and a slot of
  // its group) is idle, else the running jobs' expected rest ÷ workers (÷ the group's limit for
  // the group's own jobs). Requires mu_. O(workers).
  Load load_for(const KindState& ks, TimePoint now) const;
  // Marks a job that left the queue without running as finished and hands over the runtime's
  // reference to it; requires mu_.
  JobRef retire(Job& job);
  // Marks items the queue dropped at `now` as finished, records each as a missed prediction
  // (PredictionError::on_drop) and takes their references; requires mu_.
  void take_dropped(std::vector<DroppedItem>& dropped, TimePoint now, std::vector<DroppedJob>& out);
  // Publishes `expired` outcomes for them and clears the vector. Must not hold mu_.
  void finish_dropped(std::vector<DroppedJob>& dropped);
  // Admits `job` without mu_ if the queue's lock-free path takes it (see DeadlineQueue's
  // "The inbox"), then wakes a worker and, if its drop time is due before the timer wakes,
  // the timer. False: nothing happened; admit under mu_.
  // `restamp`: the job's deadline is `now` + its budget and may be stamped again, with `now`,
  // at a later clock reading when a concurrent submitter of its class claimed a later
  // deadline first (see DeadlineQueue::behind_class_order); false for a job whose deadline
  // the caller gave.
  // `start_within`: the standing-queue rule's limit (Load::start_within).
  // `margin`: the measured margin (Load::margin).
  bool admit_lock_free(JobRef& job, TimePoint& now, bool restamp, Duration start_within,
                       Duration margin);
  // Admits `job` at `now`: its deadline is `now` + its budget (when the caller gave none, a
  // later `now` may stamp it again before it is queued; see admit_lock_free).
  static void stamp(Job& job, TimePoint now) noexcept;
  // True if a job `behind` its class's order (DeadlineQueue::behind_class_order) is worth a
  // second clock reading: behind by a little.
  static bool may_restamp(Duration behind) noexcept;
  // Raises peak_queued_ to `queued`.
  void raise_peak(std::size_t queued) noexcept;
  // An upper bound of what the running jobs still need ÷ workers, from the published slot
  // ends, for DeadlineQueue::BusyBound. Without mu_.
  static Duration busy_bound(const void* core, TimePoint now) noexcept;
  // True if a job of `job`'s kind typically takes less than the hand-off (see "Tiny jobs").
  static bool tiny(const Job& job) noexcept;
  // True if a worker other than `worker` is awake (not idle, not standing by) and comes back to
  // the queue soon: it is between jobs, or its job has not run longer than a worker stands by.
  // Requires mu_. O(workers).
  bool another_worker_drains(std::size_t worker, TimePoint now) const;
  // Locks mu_ on the submit and dequeue paths: spins briefly before blocking.
  Lock lock_hot_path();
  // Returns once the queue's size differs from `seen` or its inbox has something, or after a
  // few microseconds. Without mu_.
  void spin_until_queue_changes(std::size_t seen) const;
  // True if the timer sleeps past `deadline`: the caller then notifies timer_wake_ after
  // unlocking (so the timer does not wake into the lock we hold). Requires mu_.
  [[nodiscard]] bool wake_timer_for(Deadline deadline);
  // When the timer must wake for a queued job: its drop time (see DeadlineQueue::next_drop_time).
  Deadline drop_time_of(const Job& job) const noexcept;
  void notify_if_drained();                // requires mu_
  // Publishes an outcome for a job that never ran, as of `at` (default: a clock reading now),
  // with Outcome::retry_after `retry_after`. Must not hold mu_.
  void finish_unstarted(Job& job, State state, Reason reason, CancelCause cause,
                        std::string error = {}, std::optional<TimePoint> at = {},
                        Duration retry_after = {});
  // `kept`: see Job::publish. `worker`: the publishing worker's index, whose row of counts it
  // adds to (anyone else: the shared row).
  void publish(Job& job, Outcome&& outcome, bool kept = true,
               std::size_t worker = static_cast<std::size_t>(-1));

  const RuntimeOptions options_;

  // Cache lines: mu_ and what it guards that workers write for every job (running_count_,
  // the run slots) are written by whoever holds it; what submitters touch without the lock
  // for every job (idle_, spinning_, the timer's sleep, next_id_, peak_queued_) sits on lines
  // of its own, so that neither side takes a line from the other it does not need.
  alignas(64) mutable std::mutex mu_;
  std::size_t running_count_ = 0;                     // slots taken; guarded by mu_
  std::size_t detached_ = 0;  // awaitable jobs started, outcome not yet published; guarded
  bool closing_ = false;                              // guarded by mu_
  bool drain_cut_ = false;                            // guarded by mu_; end_drain was called
  bool stop_workers_ = false;                         // guarded by mu_
  bool stop_timer_ = false;                           // guarded by mu_
  // A job may start, or workers should stop (stats() may wake one). Read by submitters.
  alignas(64) mutable IdleWorkers idle_;
  std::condition_variable timer_wake_;  // an earlier deadline exists, or the timer should stop
  std::condition_variable drained_;     // queue and running set became empty while closing
  // Guarded by mu_, but for its lock-free admission (mutable: stats() links its inbox).
  mutable DeadlineQueue queue_;
  // A run slot: the job in it (null: free), when it is expected to end (start + tail estimate)
  // and its group.
  struct RunSlot {
    Job* job = nullptr;
    TimePoint expected_end{};
    std::uint32_t group = 0;
  };
  std::vector<RunSlot> slots_;                        // `workers` of them; guarded by mu_
  // Workers standing by (see "Tiny jobs"), by index, and how many; guarded by mu_.
  std::vector<std::uint8_t> standing_by_;
  std::size_t standing_by_count_ = 0;
  std::uint64_t stand_bys_ = 0;  // since start (RuntimeStats::stand_bys); guarded by mu_
  // The job each worker's thread runs (null: between jobs; awaitable jobs hold no thread);
  // guarded by mu_.
  std::vector<const Job*> worker_jobs_;
  // Each slot's expected_end as published for busy_bound (ns since the clock's epoch; min():
  // free). Written under mu_ before the started job's queue reservation is released (so a
  // lock-free admission sees the job in the queue or here; see mark_running()); relaxed.
  struct alignas(64) SlotEnd {
    std::atomic<TimePoint::rep> ns{TimePoint::min().time_since_epoch().count()};
  };
  std::unique_ptr<SlotEnd[]> slot_ends_;
  // Jobs that wait for a later start; its own mutex (taken after mu_, never before).
  StartSchedule schedule_;
  std::mutex kinds_mu_;  // guards kinds_ and estimates_; never taken under mu_
  std::unordered_map<std::string, KindState, StringHash, std::equal_to<>> kinds_;
  // Run-time estimates per estimate key (JobSpec::estimate_key, else the kind).
  std::unordered_map<std::string, EstimateState, StringHash, std::equal_to<>> estimates_;
  const std::uint64_t serial_;  // tells this runtime from others in the per-thread caches
  std::vector<KindState*> groups_;                    // by group - 1; guarded by mu_
  std::function<bool(std::uint32_t)> can_start_;      // reads groups_; called under mu_
  const std::size_t cores_ = std::max(1u, std::thread::hardware_concurrency());

  // Read by submitters for every job, written rarely (when a worker starts or stops spinning,
  // when the timer sleeps or wakes).
  // An idle worker spins: submitters need not wake one. Written under mu_; relaxed, a hint.
  alignas(64) std::atomic<bool> spinning_{false};
  // Until when the timer sleeps (min(): awake). Written under mu_; a lock-free submitter reads
  // it after pushing its job (seq_cst, pairs with the timer's store before it looks at the
  // inbox a last time): either the timer sees the job, or the submitter sees it asleep.
  std::atomic<TimePoint::rep> timer_sleeps_until_{TimePoint::max().time_since_epoch().count()};

  // Workers report starts, runs and an empty queue under mu_; submitters read whether a queue
  // stands, and its target, without it (see standing_queue.hpp).
  StandingQueue standing_;
  // The margin for the runtime's own prediction error: workers record under mu_, submitters
  // read it without (see prediction_error.hpp).
  PredictionError prediction_error_;

  // Written by submitters: apart from what workers write.
  alignas(64) std::atomic<JobId> next_id_{1};  // less one: the submissions so far
  std::atomic<std::size_t> peak_queued_{0};  // raised by submitters; relaxed, a statistic
  // Outcomes published, by reason: a row per worker (so that workers do not take one cache
  // line from each other for every job; only its worker writes it, without a read-modify-write)
  // and a last, shared row for everyone else. Relaxed,
  // and added to before the outcome is published: a reader that saw an outcome (acquire) sees
  // it counted. stats() sums the rows.
  struct alignas(64) OutcomeCounts {
    std::array<std::atomic<std::uint64_t>, kReasonCount> by_reason{};
  };
  alignas(64) std::unique_ptr<OutcomeCounts[]> outcome_counts_;  // read for every outcome
  std::size_t outside_calls_ = 0;                     // in cancel_from_outside; guarded by mu_

  std::mutex shutdown_mu_;  // serialises shutdown_until
  bool shut_down_ = false;  // guarded by shutdown_mu_
  std::optional<WorkerPool> pool_;
  std::thread timer_;
  // The callback thread: user code the timer found due runs here (see the file comment).
  std::optional<boost::asio::thread_pool> callbacks_;
};

}  // namespace sandglass::detail
