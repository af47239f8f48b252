#include "workers/job.hpp"

namespace sandglass::detail {

void Job::publish(Outcome outcome) {
  handler = nullptr;  // release what the handler captured as soon as the job is over
  {
    std::lock_guard lock{mu_};
    outcome_ = std::move(outcome);
    done_.store(true, std::memory_order_release);
  }
  published_.notify_all();
  if (on_outcome) {
    OutcomeCallback callback = std::move(on_outcome);
    callback(*outcome_);  // outcome_ no longer changes; reading it without the lock is safe
  }
}

Outcome Job::wait() {
  std::unique_lock lock{mu_};
  published_.wait(lock, [&] { return outcome_.has_value(); });
  return *outcome_;
}

std::optional<Outcome> Job::wait_until(Deadline until) {
  std::unique_lock lock{mu_};
  if (until.is_never()) {
    published_.wait(lock, [&] { return outcome_.has_value(); });
  } else {
    published_.wait_until(lock, until.time_point(), [&] { return outcome_.has_value(); });
  }
  return outcome_;
}

std::optional<Outcome> Job::outcome() const {
  if (!done()) return std::nullopt;
  std::lock_guard lock{mu_};
  return outcome_;
}

}  // namespace sandglass::detail
