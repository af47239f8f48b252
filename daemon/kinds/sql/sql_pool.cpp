#include "daemon/kinds/sql/sql_pool.hpp"

#include <utility>

namespace sandglass::daemon {

SqlPool::Lease::~Lease() {
  if (pool_ == nullptr) return;
  if (connection_ && !connection_->reusable()) connection_.reset();  // closed before the slot frees
  pool_->give_back(std::move(connection_));
}

std::optional<SqlPool::Lease> SqlPool::acquire_until(Deadline until, const CancelToken& token) {
  // The callback takes the mutex before notifying: either the waiter sees the cancellation
  // before it waits, or it is waiting and gets the notification. Registered before the lock is
  // taken and destroyed after it is released (its destructor waits for a running callback).
  const CancelRegistration wake = token.on_cancel([this]() noexcept {
    { const std::lock_guard lock{mu_}; }
    cv_.notify_all();
  });
  std::unique_ptr<SqlConnection> connection;
  {
    std::unique_lock lock{mu_};
    for (;;) {
      if (token.cancelled()) return std::nullopt;
      if (!idle_.empty()) {
        connection = std::move(idle_.back());
        idle_.pop_back();
        break;
      }
      if (leased_ < size_) break;
      if (until.is_never()) {
        cv_.wait(lock);
      } else if (cv_.wait_until(lock, until.time_point()) == std::cv_status::timeout) {
        return std::nullopt;
      }
    }
    ++leased_;
  }
  Lease lease{*this, std::move(connection)};
  if (lease.connection() != nullptr && !lease.connection()->reusable()) lease.drop();
  return lease;
}

void SqlPool::add_idle(std::unique_ptr<SqlConnection> connection) {
  {
    const std::lock_guard lock{mu_};
    if (idle_.size() + leased_ < size_) {
      idle_.push_back(std::move(connection));
    }
  }
  cv_.notify_one();
  // `connection` (still set when there was no room) closes here, outside the lock.
}

void SqlPool::give_back(std::unique_ptr<SqlConnection> connection) noexcept {
  {
    const std::lock_guard lock{mu_};
    --leased_;
    if (connection) idle_.push_back(std::move(connection));
  }
  cv_.notify_one();
}

std::size_t SqlPool::open() const {
  const std::lock_guard lock{mu_};
  return idle_.size() + leased_;
}

std::size_t SqlPool::in_use() const {
  const std::lock_guard lock{mu_};
  return leased_;
}

}  // namespace sandglass::daemon
