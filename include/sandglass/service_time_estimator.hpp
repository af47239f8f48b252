// service_time_estimator.hpp — `ServiceTimeEstimator`: how long one kind of job usually runs,
// learned from observed run times.
//
//   sandglass::ServiceTimeEstimator est;        // p90 over the last 128 runs
//   est.record(12ms);
//   Duration p90 = est.estimate();              // zero until the first sample
//
// Admission uses a high percentile, not the mean: a mean hides the slow tail that decides
// whether a job finishes in time. The percentile is recomputed from a fixed window of recent
// samples every few records, so `record` is O(1) amortised and `estimate` is O(1).
//
// Thread safety: none. Distinct objects: safe. Shared objects: unsafe.
#pragma once

#include <sandglass/deadline.hpp>

#include <cstddef>
#include <vector>

namespace sandglass {

struct ServiceTimeEstimatorOptions {
  double quantile = 0.9;        // in (0, 1]
  std::size_t window = 128;     // samples kept
  std::size_t refresh_every = 32;  // records between recomputations, once the window is full
};

class ServiceTimeEstimator {
 public:
  ServiceTimeEstimator() : ServiceTimeEstimator(ServiceTimeEstimatorOptions{}) {}
  explicit ServiceTimeEstimator(ServiceTimeEstimatorOptions options);

  // Adds one observed run time; negative values count as zero.
  void record(Duration run_time);
  // The configured quantile of the recent samples; zero when there are none.
  Duration estimate() const noexcept { return estimate_; }
  std::size_t samples() const noexcept { return count_; }

 private:
  void refresh();

  ServiceTimeEstimatorOptions options_;
  std::vector<Duration> window_;  // ring buffer
  std::vector<Duration> scratch_;
  std::size_t next_ = 0;
  std::size_t count_ = 0;
  std::size_t since_refresh_ = 0;
  Duration estimate_{};
};

}  // namespace sandglass
