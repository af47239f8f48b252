#include "daemon/cluster/node_lease.hpp"

#include <sandglass/cancel.hpp>

namespace sandglass::daemon::cluster {

void NodeLease::begin(std::string owner, TimePoint sent) {
  {
    std::lock_guard lock{mu_};
    owner_ = std::move(owner);
    acknowledged_ = sent;
    epoch_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
}

void NodeLease::end() {
  std::lock_guard lock{mu_};
  acknowledged_ = TimePoint{};
  epoch_.fetch_add(1, std::memory_order_release);
}

NodeLease::Incarnation NodeLease::incarnation() const {
  std::lock_guard lock{mu_};
  return {owner_, epoch_.load(std::memory_order_relaxed)};
}

std::string NodeLease::owner() const {
  std::lock_guard lock{mu_};
  return owner_;
}

void NodeLease::acknowledged(TimePoint sent) {
  {
    std::lock_guard lock{mu_};
    if (sent > acknowledged_) acknowledged_ = sent;
  }
  cv_.notify_all();
}

bool NodeLease::fresh(TimePoint now) const {
  std::lock_guard lock{mu_};
  return fresh_locked(now);
}

bool NodeLease::fresh_locked(TimePoint now) const {
  return now - acknowledged_ < options_.lease - options_.margin;
}

bool NodeLease::wait_fresh(const JobContext& ctx) {
  if (fresh(Clock::now())) return true;
  const CancelRegistration woken = ctx.token().on_cancel([this]() noexcept {
    { std::lock_guard lock{mu_}; }  // the waiter is waiting, or sees cancelled()
    cv_.notify_all();
  });
  std::unique_lock lock{mu_};
  cv_.wait(lock, [&] {
    return ctx.cancelled() || fresh_locked(Clock::now());
  });
  return !ctx.cancelled();
}

}  // namespace sandglass::daemon::cluster
