#include <sandglass/service_time_estimator.hpp>

#include <algorithm>
#include <cmath>

namespace sandglass {

ServiceTimeEstimator::ServiceTimeEstimator(ServiceTimeEstimatorOptions options)
    : options_{options} {
  options_.window = std::max<std::size_t>(options_.window, 1);
  options_.refresh_every = std::max<std::size_t>(options_.refresh_every, 1);
  options_.quantile = std::clamp(options_.quantile, 0.0, 1.0);
  window_.reserve(options_.window);
  scratch_.reserve(options_.window);
}

void ServiceTimeEstimator::record(Duration run_time) {
  run_time = std::max(run_time, Duration::zero());
  const bool filling = window_.size() < options_.window;
  if (filling) {
    window_.push_back(run_time);
  } else {
    window_[next_] = run_time;
  }
  next_ = (next_ + 1) % options_.window;
  ++count_;
  // Until the window is full every sample matters, the one that fills it included; afterwards
  // refresh every few records.
  if (filling || ++since_refresh_ >= options_.refresh_every) refresh();
}

void ServiceTimeEstimator::refresh() {
  since_refresh_ = 0;
  scratch_.assign(window_.begin(), window_.end());
  // Nearest-rank percentile: the smallest sample with at least `quantile` of samples <= it.
  const auto rank = static_cast<std::size_t>(
      std::ceil(options_.quantile * static_cast<double>(scratch_.size())));
  const std::size_t index = rank == 0 ? 0 : rank - 1;
  std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(index),
                   scratch_.end());
  estimate_ = scratch_[index];
}

}  // namespace sandglass
