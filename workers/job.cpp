#include "workers/job.hpp"

namespace sandglass::detail {

void Job::publish(Outcome&& outcome) {
  handler = nullptr;     // release what the handler captured as soon as the job is over
  parent_link.reset();   // the parent may outlive the runtime; blocks while its callback runs
  outcome_.emplace(std::move(outcome));
  // Dekker hand-shake with wait_until(): we store done_ then read waiters_, a waiter increments
  // waiters_ then reads done_ (all seq_cst), so at least one of us sees the other. The release
  // half of this store also publishes outcome_ to whoever acquires done_.
  done_.store(true, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) != 0) {
    { std::lock_guard lock{mu_}; }  // a waiter between its check and its sleep holds mu_
    published_.notify_all();
  }
  if (on_outcome) {
    OutcomeCallback callback = std::move(on_outcome);
    callback(*outcome_);
  }
}

Outcome Job::wait() { return *wait_until(Deadline::never()); }

std::optional<Outcome> Job::wait_until(Deadline until) {
  if (!done()) {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    std::unique_lock lock{mu_};
    auto published = [&] { return done_.load(std::memory_order_seq_cst); };
    if (until.is_never()) {
      published_.wait(lock, published);
    } else {
      published_.wait_until(lock, until.time_point(), published);
    }
    waiters_.fetch_sub(1, std::memory_order_relaxed);
    if (!done()) return std::nullopt;
  }
  return outcome_;
}

std::optional<Outcome> Job::outcome() const {
  if (!done()) return std::nullopt;
  return outcome_;
}

}  // namespace sandglass::detail
