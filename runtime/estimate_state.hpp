// estimate_state.hpp (private) — `EstimateState`, one estimate key's run times as the runtime
// keeps them: the estimator under its own lock, and the figures it last published for
// submitters to read without one.
//
//   state.record(run_time, ended_at, expected);       // a worker, after each run, before its outcome
//   EstimateState::Figures f = state.figures(now, expected);  // a submitter
//
// A job may state its own expected run time (JobSpec::expected). The state then keeps, beside
// the key's run times, the ratios actual ÷ expected of its hinted runs, and predicts a hinted
// job as its own size × those ratios: one long job of a key does not make its short ones look
// long, and a key whose hints run long (or short) is estimated so.
//
// Aging (ServiceTimeEstimator::age) is due at most eight times per sample lifetime. A worker
// that records a run ages the samples when it is due; a submitter ages them only when aging is
// overdue by more than the shortest period between checks (max_age / 8), after a pause without
// runs, and otherwise decides with the figures published last. So a submitter that comes
// first after the due time does not pay for the refresh, which at low load was one submit in
// twelve, before its job was queued and its worker woken, and after it too when the woken
// worker waited for the submitter's core (0.2-0.3 us on the p50 of submit -> start in
// sandglass-handoff-bench, more on its p95-p99). The figures that decide are at most that
// period staler than before, and never a pause's worth.
//
// Runs are recorded one by one, before their outcome is published. (Batches of up to 32 runs
// per worker were tried: they saved about 150 instructions per job, but with callback-only jobs
// a sample reached the estimate up to 31 runs late, and in the overload bench admission then
// took about three times the capacity: goodput 0.99 -> 0.80 and wasted work 0.01 -> 0.55 at
// 10x. Recording each run restored 0.99 / 0.003.)
//
// Thread safety: every member function may be called concurrently.
#pragma once

#include <sandglass/deadline.hpp>
#include <sandglass/runtime.hpp>
#include <sandglass/service_time_estimator.hpp>

#include "workers/job.hpp"

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>

namespace sandglass::detail {

// One estimate key's run times (JobSpec::estimate_key, else the kind). The estimator has its
// own lock, never taken under the runtime's: recording a run and aging samples stay out of the
// runtime's critical section, and submitters read the figures it last published without a lock.
// A JobOrigin: a job of the key holds a pointer to it (see job.hpp).
class EstimateState : public JobOrigin {
 public:
  struct Figures {
    Duration tail{};
    Duration central{};
    // Predicted from the job's own expected run time (JobSpec::expected) rather than from the
    // key's recent runs.
    bool from_expected = false;
  };
  // `e` keeps the key's run times; the ratios of hinted runs are kept by an estimator of the
  // same options, but whose samples age out after `e`'s max_age (a ratio has no run time to
  // scale its lifetime with).
  EstimateState(RuntimeCore* owner, std::string kind, ServiceTimeEstimator e);
  // The state of the key of `job`.
  static EstimateState& of(const Job& job) noexcept { return static_cast<EstimateState&>(*job.origin); }

  // The figures at `now` for a job that expects to run `expected` (zero: says nothing): with
  // a hint, `expected` × the key's ratio of actual to expected run time (its mean for the
  // central figure, its quantile for the tail; 1 while no hinted run is kept); without, the
  // key's run-time figures. Ages the samples first when that is overdue (the file comment)
  // and the estimator is free, else uses the figures published last.
  Figures figures(TimePoint now, Duration expected = Duration::zero());
  // What figures() gives for a key that has no runs (nor any state yet): the job's own
  // `expected` run time, else zero (unknown).
  static Figures without_runs(Duration expected) noexcept {
    if (expected <= Duration::zero()) return {};
    return {.tail = expected, .central = expected, .from_expected = true};
  }
  // Adds a run that took `run_time`, ended at `ended_at` and was expected to take `expected`
  // (zero: no hint), ages the samples when that is due, and publishes the new figures.
  void record(Duration run_time, TimePoint ended_at, Duration expected = Duration::zero());
  // How long from `now` until the figures a job got (hinted: the ratios; else the run times)
  // are forgotten, if no run renews them: when the samples behind them have all aged out.
  // Duration::max() if they never age. Takes the estimator's lock.
  Duration forgotten_in(TimePoint now, bool hinted);
  // One actual ÷ expected ratio as the ratio estimator keeps it: a duration of kRatioUnit per 1.
  static constexpr Duration kRatioUnit = std::chrono::milliseconds{1};
  // The estimator's mostly_short() as last published: half the key's recent runs or more took
  // at most RuntimeOptions::tiny_job. Without a lock; relaxed.
  bool mostly_tiny() const noexcept { return mostly_tiny_.load(std::memory_order_relaxed); }
  // The estimate as of its last update, named `key`. Takes the estimator's lock.
  EstimateSnapshot snapshot(const std::string& key);

 private:
  void publish_figures() noexcept;  // requires estimator_mu_
  void age(TimePoint now);          // if the estimator is free

  const std::string kind_;  // the kind of the job that first used the key
  // How long past due a submitter leaves aging to the workers. Read under estimator_mu_ only:
  // submitters read age_overdue_ns_, on the figures' line (a read of this one, beside the
  // mutex every run takes, cost 3-5 % of the hand-off's rate, measured with sandglass-handoff-bench).
  const Duration age_grace_;
  std::mutex estimator_mu_;
  ServiceTimeEstimator estimator_;  // guarded by estimator_mu_
  // Hinted runs' actual ÷ expected run time, in kRatioUnit per 1; guarded by estimator_mu_.
  ServiceTimeEstimator ratios_;
  // On a line of their own: submitters read them for every job, and the estimator beside them
  // is written for every run. Relaxed: each is a figure on its own; a reader that must see a run's sample (a waiter on
  // that job's outcome) is ordered by the outcome's publication, which comes after record().
  alignas(64) std::atomic<Duration::rep> tail_ns_{0};
  std::atomic<Duration::rep> central_ns_{0};
  // The ratio figures, in ns of kRatioUnit (zero: no hinted run kept, a ratio of 1).
  std::atomic<Duration::rep> ratio_tail_{0};
  std::atomic<Duration::rep> ratio_central_{0};
  std::atomic<TimePoint::rep> age_overdue_ns_{TimePoint::max().time_since_epoch().count()};
  // Read by workers after each run (RuntimeCore, "Tiny jobs"); unlike the mean, one preempted
  // run does not change it.
  std::atomic<bool> mostly_tiny_{false};
};

}  // namespace sandglass::detail
