#include <sandglass/service_time_estimator.hpp>

#include <algorithm>
#include <array>
#include <cmath>

namespace sandglass {

ServiceTimeEstimator::ServiceTimeEstimator(ServiceTimeEstimatorOptions options)
    : options_{options} {
  options_.window = std::max<std::size_t>(options_.window, 1);
  options_.refresh_every = std::max<std::size_t>(options_.refresh_every, 1);
  options_.quantile = std::clamp(options_.quantile, 0.0, 1.0);
  options_.max_age = std::max(options_.max_age, Duration::zero());
  options_.short_run = std::max(options_.short_run, Duration::zero());
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

TimePoint ServiceTimeEstimator::forgets_all_at() const noexcept {
  const Duration lifetime = sample_lifetime();
  if (window_.empty() || lifetime == Duration::max()) return TimePoint::max();
  return saturating_add(window_.back().at, lifetime);
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

std::size_t ServiceTimeEstimator::rank_of(double q) const noexcept {
  // Nearest-rank percentiles: the smallest sample with at least `q` of samples <= it.
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(scratch_.size())));
  return rank == 0 ? std::size_t{0} : std::min(rank, scratch_.size()) - 1;
}

std::size_t ServiceTimeEstimator::select(std::size_t at) const noexcept {
  // A high quantile is one of the few largest samples: one pass that keeps them (a sample
  // rarely enters, so its branch predicts well) instead of a selection, whose partitioning
  // branches mispredict about half the time.
  constexpr std::size_t kFewLargest = 8;
  const std::size_t above = scratch_.size() - at;  // samples from the quantile's rank up
  if (above > kFewLargest) {
    std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(at),
                     scratch_.end());
    return at;
  }
  std::array<std::size_t, kFewLargest> largest{};  // indices, smallest value first
  std::size_t kept = 0;
  for (std::size_t i = 0; i < scratch_.size(); ++i) {
    if (kept < above) {
      std::size_t j = kept++;
      for (; j > 0 && scratch_[largest[j - 1]] > scratch_[i]; --j) largest[j] = largest[j - 1];
      largest[j] = i;
    } else if (scratch_[i] > scratch_[largest[0]]) {
      std::size_t j = 0;
      for (; j + 1 < above && scratch_[largest[j + 1]] < scratch_[i]; ++j) largest[j] = largest[j + 1];
      largest[j] = i;
    }
  }
  return largest[0];
}

Duration ServiceTimeEstimator::median() const noexcept {
  if (median_due_) {
    median_due_ = false;
    const std::size_t at = rank_of(0.5);
    std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(at),
                     scratch_.end());
    median_ = scratch_[at];
  }
  return median_;
}

void ServiceTimeEstimator::refresh() {
  since_refresh_ = 0;
  if (window_.empty()) {
    central_ = median_ = tail_ = Duration::zero();
    median_due_ = false;
    mostly_short_ = false;
    return;
  }
  scratch_.clear();
  for (const Sample& s : window_) scratch_.push_back(s.run_time);
  // The mean, for sums of work: over many jobs the median underestimates a skewed kind.
  Duration::rep sum = 0;
  std::size_t short_runs = 0;
  for (const Duration d : scratch_) {
    if (__builtin_add_overflow(sum, d.count(), &sum)) sum = Duration::max().count();
    if (d <= options_.short_run && options_.short_run > Duration::zero()) ++short_runs;
  }
  mostly_short_ = 2 * short_runs >= scratch_.size();
  central_ = Duration{sum / static_cast<Duration::rep>(scratch_.size())};
  tail_ = scratch_[select(rank_of(options_.quantile))];
  median_due_ = true;  // median() selects it from scratch_ when asked (the runtime never asks)
  next_age_check_ = TimePoint::min();
}

}  // namespace sandglass
