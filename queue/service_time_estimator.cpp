#include <sandglass/service_time_estimator.hpp>

#include <algorithm>
#include <cmath>

namespace sandglass {

ServiceTimeEstimator::ServiceTimeEstimator(ServiceTimeEstimatorOptions options)
    : options_{options} {
  options_.window = std::max<std::size_t>(options_.window, 1);
  options_.refresh_every = std::max<std::size_t>(options_.refresh_every, 1);
  options_.quantile = std::clamp(options_.quantile, 0.0, 1.0);
  options_.max_age = std::max(options_.max_age, Duration::zero());
  if (!(options_.age_in_runs >= 0)) options_.age_in_runs = 0;
  scratch_.reserve(options_.window);
}

Duration ServiceTimeEstimator::sample_lifetime() const noexcept {
  // Computed when asked (by `age`, about once per refresh), not on every record.
  const double typical_ns = recorded_ == 0 ? 0.0 : std::exp(log_typical_);
  const double scaled = typical_ns * options_.age_in_runs;
  return scaled >= static_cast<double>(Duration::max().count())
             ? Duration::max()
             : std::max(options_.max_age, Duration{static_cast<Duration::rep>(scaled)});
}

void ServiceTimeEstimator::record(Duration run_time, TimePoint now) {
  run_time = std::max(run_time, Duration::zero());
  const bool filling = window_.size() < options_.window;
  if (!filling) window_.pop_front();
  window_.push_back({now, run_time});
  ++recorded_;
  // A slow geometric mean of all runs: a burst of outliers moves it little (eight runs 25 times
  // as long as usual lengthen it by half), so they cannot keep themselves alive.
  constexpr double kWeight = 1.0 / 64;
  const double log_run = std::log(std::max(static_cast<double>(run_time.count()), 1000.0));
  log_typical_ = recorded_ == 1 ? log_run : log_typical_ + kWeight * (log_run - log_typical_);
  // Until the window is full every sample matters, the one that fills it included; afterwards
  // refresh every few records.
  if (filling || ++since_refresh_ >= options_.refresh_every) refresh();
}

void ServiceTimeEstimator::age(TimePoint now) {
  if (window_.empty() || now < next_age_check_) return;
  const Duration lifetime = sample_lifetime();
  const TimePoint oldest_kept =
      lifetime == Duration::max() ? TimePoint::min() : saturating_add(now, -lifetime);
  // When the oldest sample's time is up.
  auto due = [&] { return saturating_add(saturating_add(window_.front().at, lifetime), Duration{1}); };
  if (window_.front().at >= oldest_kept) {
    next_age_check_ = due();  // until then aging costs one comparison
    return;
  }
  while (!window_.empty() && window_.front().at < oldest_kept) window_.pop_front();
  refresh();
  // Recompute from aging at most eight times per lifetime.
  next_age_check_ = saturating_add(now, lifetime / 8);
  if (!window_.empty()) next_age_check_ = std::max(next_age_check_, due());
}

void ServiceTimeEstimator::refresh() {
  since_refresh_ = 0;
  if (window_.empty()) {
    central_ = median_ = tail_ = Duration::zero();
    return;
  }
  scratch_.clear();
  for (const Sample& s : window_) scratch_.push_back(s.run_time);
  // Nearest-rank percentiles: the smallest sample with at least `q` of samples <= it.
  auto rank_of = [&](double q) {
    const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(scratch_.size())));
    return rank == 0 ? std::size_t{0} : std::min(rank, scratch_.size()) - 1;
  };
  const std::size_t median_at = rank_of(0.5);
  const std::size_t tail_at = rank_of(options_.quantile);
  std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(median_at),
                   scratch_.end());
  median_ = scratch_[median_at];
  // The mean, for sums of work: over many jobs the median underestimates a skewed kind.
  Duration::rep sum = 0;
  for (const Duration d : scratch_) {
    if (__builtin_add_overflow(sum, d.count(), &sum)) sum = Duration::max().count();
  }
  central_ = Duration{sum / static_cast<Duration::rep>(scratch_.size())};
  if (tail_at > median_at) {
    std::nth_element(scratch_.begin() + static_cast<std::ptrdiff_t>(median_at) + 1,
                     scratch_.begin() + static_cast<std::ptrdiff_t>(tail_at), scratch_.end());
  } else if (tail_at < median_at) {
    std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(tail_at),
                     scratch_.begin() + static_cast<std::ptrdiff_t>(median_at));
  }
  tail_ = scratch_[tail_at];
  next_age_check_ = TimePoint::min();
}

}  // namespace sandglass
