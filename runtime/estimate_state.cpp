#include "runtime/estimate_state.hpp"

#include <algorithm>

namespace sandglass::detail {

namespace {

ServiceTimeEstimatorOptions ratio_options(ServiceTimeEstimatorOptions o) {
  o.age_in_runs = 0;
  o.short_run = Duration::zero();
  return o;
}

// `d` × `ratio` (in EstimateState::kRatioUnit per 1), saturating.
Duration scaled_by(Duration d, Duration::rep ratio) noexcept {
  const double unit = static_cast<double>(Duration{EstimateState::kRatioUnit}.count());
  const double product = static_cast<double>(d.count()) * (static_cast<double>(ratio) / unit);
  return product >= static_cast<double>(Duration::max().count() / 2)
             ? Duration::max() / 2
             : Duration{static_cast<Duration::rep>(product)};
}

}  // namespace

EstimateState::EstimateState(RuntimeCore* owner, std::string kind, ServiceTimeEstimator e)
    : JobOrigin{owner},
      kind_{std::move(kind)},
      age_grace_{e.options().max_age / 8},
      estimator_{std::move(e)},
      ratios_{ratio_options(estimator_.options())} {}

EstimateState::Figures EstimateState::figures(TimePoint now, Duration expected) {
  if (now.time_since_epoch().count() >= age_overdue_ns_.load(std::memory_order_relaxed)) {
    age(now);
  }
  if (expected > Duration::zero()) {
    const Duration::rep unit = Duration{kRatioUnit}.count();
    const Duration::rep tail = ratio_tail_.load(std::memory_order_relaxed);
    const Duration::rep central = ratio_central_.load(std::memory_order_relaxed);
    return {.tail = scaled_by(expected, tail > 0 ? tail : unit),
            .central = scaled_by(expected, central > 0 ? central : unit),
            .from_expected = true};
  }
  return {.tail = Duration{tail_ns_.load(std::memory_order_relaxed)},
          .central = Duration{central_ns_.load(std::memory_order_relaxed)}};
}

void EstimateState::age(TimePoint now) {
  std::unique_lock lock{estimator_mu_, std::try_to_lock};
  if (lock.owns_lock()) {
    estimator_.age(now);
    ratios_.age(now);
    publish_figures();
  }
}

void EstimateState::record(Duration run_time, TimePoint ended_at, Duration expected) {
  std::lock_guard lock{estimator_mu_};
  estimator_.record(run_time, ended_at);
  estimator_.age(ended_at);
  if (expected > Duration::zero()) {
    // Ratios far beyond any real hint (a sleep of 1 ns that took a millisecond) are capped, so
    // that the product with a later hint stays finite.
    constexpr double kMostRatio = 1e6;
    const double ratio = std::min(static_cast<double>(std::max(run_time, Duration::zero()).count()) /
                                      static_cast<double>(expected.count()),
                                  kMostRatio);
    ratios_.record(Duration{static_cast<Duration::rep>(ratio * static_cast<double>(Duration{kRatioUnit}.count()))},
                   ended_at);
  }
  ratios_.age(ended_at);
  publish_figures();
}

Duration EstimateState::forgotten_in(TimePoint now, bool hinted) {
  std::lock_guard lock{estimator_mu_};
  const TimePoint at = (hinted ? ratios_ : estimator_).forgets_all_at();
  return at == TimePoint::max() ? Duration::max() : std::max(saturating_sub(at, now), Duration::zero());
}

EstimateSnapshot EstimateState::snapshot(const std::string& key) {
  std::lock_guard lock{estimator_mu_};
  return {.key = key,
          .kind = kind_,
          .mean = estimator_.central(),
          .tail = estimator_.tail(),
          .samples = estimator_.samples(),
          .kept = estimator_.kept()};
}

void EstimateState::publish_figures() noexcept {
  // Only what changed: a store of an unchanged figure would still take the cache line from
  // every submitter that reads it.
  auto publish = [](auto& to, auto value) {
    if (to.load(std::memory_order_relaxed) != value) to.store(value, std::memory_order_relaxed);
  };
  publish(tail_ns_, estimator_.tail().count());
  publish(central_ns_, estimator_.central().count());
  publish(ratio_tail_, ratios_.tail().count());
  publish(ratio_central_, ratios_.central().count());
  publish(age_overdue_ns_,
          saturating_add(std::min(estimator_.next_age_check(), ratios_.next_age_check()), age_grace_)
              .time_since_epoch()
              .count());
  publish(mostly_tiny_, estimator_.mostly_short());
}

}  // namespace sandglass::detail
