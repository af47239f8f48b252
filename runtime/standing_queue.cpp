#include "runtime/standing_queue.hpp"

#include <algorithm>

namespace sandglass::detail {

StandingQueue::StandingQueue(Duration fixed_target) noexcept
    : fixed_{fixed_target},
      target_ns_{(fixed_target > Duration::zero() ? fixed_target : kMinTarget).count()} {}

void StandingQueue::on_run(Duration run_time) noexcept {
  if (!adaptive()) return;
  // Weight 1/64: a few long runs move it little, a lasting change within a hundred runs.
  constexpr double kWeight = 1.0 / 64;
  const auto run_ns = static_cast<double>(std::max(run_time, Duration::zero()).count());
  mean_run_ns_ = has_run_ ? mean_run_ns_ + kWeight * (run_ns - mean_run_ns_) : run_ns;
  has_run_ = true;
  const double wanted_ns =
      std::min(static_cast<double>(kRunsOfTarget) * mean_run_ns_, static_cast<double>(Duration::max().count() / 4));
  const Duration wanted = std::max(Duration{static_cast<Duration::rep>(wanted_ns)}, Duration{kMinTarget});
  // Published when it moved by more than an eighth: submitters read its line.
  const Duration published = target();
  if (wanted > published + published / 8 || wanted < published - published / 8) {
    target_ns_.store(wanted.count(), std::memory_order_relaxed);
  }
}

void StandingQueue::on_start(Duration sojourn, TimePoint now) noexcept {
  const Duration t = target();
  if (sojourn < t) {
    above_ = false;
    set_standing(false);
    return;
  }
  if (!above_) {
    above_ = true;
    above_since_ = now;
    return;
  }
  if (now - above_since_ >= std::max(t * kIntervalTargets, Duration{kMinInterval})) set_standing(true);
}

void StandingQueue::on_empty() noexcept {
  above_ = false;
  set_standing(false);
}

void StandingQueue::set_standing(bool standing) noexcept {
  if (standing_.load(std::memory_order_relaxed) != standing) {
    standing_.store(standing, std::memory_order_relaxed);
  }
}

}  // namespace sandglass::detail
