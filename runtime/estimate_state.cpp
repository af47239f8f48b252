#include "runtime/estimate_state.hpp"

namespace sandglass::detail {

EstimateState::Figures EstimateState::figures(TimePoint now) {
  if (now.time_since_epoch().count() >= age_overdue_ns_.load(std::memory_order_relaxed)) {
    age(now);
  }
  return {.tail = Duration{tail_ns_.load(std::memory_order_relaxed)},
          .central = Duration{central_ns_.load(std::memory_order_relaxed)}};
}

void EstimateState::age(TimePoint now) {
  std::unique_lock lock{estimator_mu_, std::try_to_lock};
  if (lock.owns_lock()) {
    estimator_.age(now);
    publish_figures();
  }
}

void EstimateState::record(Duration run_time, TimePoint ended_at) {
  std::lock_guard lock{estimator_mu_};
  estimator_.record(run_time, ended_at);
  estimator_.age(ended_at);
  publish_figures();
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
  publish(age_overdue_ns_,
          saturating_add(estimator_.next_age_check(), age_grace_).time_since_epoch().count());
  publish(mostly_tiny_, estimator_.mostly_short());
}

}  // namespace sandglass::detail
