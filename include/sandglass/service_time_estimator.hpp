// service_time_estimator.hpp — `ServiceTimeEstimator`: how long one kind of job usually runs,
// learned from recent observed run times.
//
//   sandglass::ServiceTimeEstimator est;        // mean and p90 of recent runs
//   est.record(12ms, now);
//   est.age(later);                             // forgets samples that grew too old
//   Duration ahead = est.central();             // the mean: zero until the first sample
//   Duration fit = est.tail();                  // the quantile (p90 by default)
//
// Two roles, two figures. Work queued ahead of a job is a sum of many runs, so it is predicted
// with the mean (`central`): over many jobs, sums tend to the mean (the median would
// undercount a skewed kind such as exponential run times by a third). Whether the job itself
// finishes in time depends on its own run, so that is bounded by a high quantile (`tail`).
//
// Samples heal: the window keeps the last `window` samples, and a sample ages out once it is
// older than `max_age`, or `age_in_runs` × the kind's typical run time if that is longer (so a
// slow kind keeps enough samples, and a fast one forgets a stall quickly; see
// `sample_lifetime`). Rejected jobs never produce
// samples; aging is what stops a burst of slow runs from locking admission out at any
// quantile: once the slow samples are gone the estimate is whatever is left, or zero (unknown,
// which admission treats as "admit") when nothing is.
//
// The figures are recomputed from the window every `refresh_every` records (every record
// while the window fills) and when `age` drops samples, at most eight times per lifetime:
// `record` and `age` are O(1) amortised, the getters O(1).
//
// Thread safety: none. Distinct objects: safe. Shared objects: unsafe.
#pragma once

#include <sandglass/deadline.hpp>

#include <cstddef>
#include <deque>
#include <vector>

namespace sandglass {

struct ServiceTimeEstimatorOptions {
  double quantile = 0.9;           // of `tail`, in (0, 1]
  std::size_t window = 128;        // most samples kept
  std::size_t refresh_every = 32;  // records between recomputations, once the window is full
  // A sample ages out after the longer of `max_age` and `age_in_runs` × the typical run time.
  // Duration::max() (or age_in_runs 0 with max_age max) keeps samples until displaced.
  Duration max_age = std::chrono::milliseconds{20};
  double age_in_runs = 10;
  // What `mostly_short` compares with (zero: no sample is short).
  Duration short_run{};
};

class ServiceTimeEstimator {
 public:
  ServiceTimeEstimator() : ServiceTimeEstimator(ServiceTimeEstimatorOptions{}) {}
  explicit ServiceTimeEstimator(ServiceTimeEstimatorOptions options);

  // Adds one run time observed at `now`; negative values count as zero.
  void record(Duration run_time, TimePoint now);
  void record(Duration run_time) { record(run_time, Clock::now()); }
  // Drops samples too old at `now` (see the file comment). Call before reading the figures.
  void age(TimePoint now);

  // The mean of the kept samples; zero when there are none.
  Duration central() const noexcept { return central_; }
  // Their median; zero when there are none. Selected when first asked after a recomputation.
  Duration median() const noexcept;
  // True if at least half the kept samples took at most `short_run` (their median did, without
  // selecting it), as of the last recomputation.
  bool mostly_short() const noexcept { return mostly_short_; }
  // The configured quantile of the kept samples; zero when there are none.
  Duration tail() const noexcept { return tail_; }
  Duration estimate() const noexcept { return tail_; }  // the same as tail()
  // Samples recorded since construction, and those kept now.
  std::size_t samples() const noexcept { return recorded_; }
  std::size_t kept() const noexcept { return window_.size(); }
  // The earliest time at which `age` may change the figures; max() while no sample is kept.
  TimePoint next_age_check() const noexcept {
    return window_.empty() ? TimePoint::max() : next_age_check_;
  }
  // When every kept sample will have aged out if none is recorded meanwhile: the newest
  // one's time + sample_lifetime(); max() while none is kept or samples never age.
  TimePoint forgets_all_at() const noexcept;
  // How long a sample is kept: the longer of max_age and age_in_runs × the typical run time, a
  // slowly moving geometric mean of every run recorded (not of the window: after a stall the
  // window may hold only the slow runs it caused, which must not keep themselves alive).
  Duration sample_lifetime() const noexcept;
  const ServiceTimeEstimatorOptions& options() const noexcept { return options_; }

 private:
  struct Sample {
    TimePoint at;
    Duration run_time;
  };
  void refresh();
  std::size_t rank_of(double quantile) const noexcept;  // in scratch_
  // The index in scratch_ of the value at rank `at` of the sorted scratch_ (may reorder it).
  std::size_t select(std::size_t at) const noexcept;

  ServiceTimeEstimatorOptions options_;
  std::deque<Sample> window_;  // oldest first
  // The run times of the last recomputation (reordered by selections, never changed
  // otherwise): median() selects from them.
  mutable std::vector<Duration> scratch_;
  std::size_t recorded_ = 0;
  std::size_t since_refresh_ = 0;
  TimePoint next_age_check_ = TimePoint::min();
  Duration central_{};
  bool mostly_short_ = false;
  mutable Duration median_{};
  mutable bool median_due_ = false;  // scratch_ holds a recomputation median_ has not seen
  Duration tail_{};
  double log_typical_ = 0;  // ln of the typical run time in ns
};

}  // namespace sandglass
