#include <sandglass/circuit_breaker.hpp>

#include <algorithm>
#include <array>
#include <utility>

namespace sandglass {

std::string_view to_string(BreakerState state) noexcept {
  constexpr std::array<std::string_view, 3> kNames = {"closed", "open", "half_open"};
  const auto index = static_cast<std::size_t>(state);
  return index < kNames.size() ? kNames[index] : std::string_view{"unknown"};
}

std::string CircuitBreakerOptions::validate() const {
  if (failure_threshold < 1) return "failure_threshold: must be at least 1";
  if (cooldown < Duration::zero()) return "cooldown: must not be negative";
  return {};
}

CircuitBreaker::Permit::Permit(Permit&& other) noexcept
    : breaker_{std::exchange(other.breaker_, nullptr)},
      probe_{other.probe_},
      epoch_{other.epoch_},
      retry_after_{other.retry_after_} {}

CircuitBreaker::Permit& CircuitBreaker::Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    if (breaker_) breaker_->record(*this, Result::abandoned);
    breaker_ = std::exchange(other.breaker_, nullptr);
    probe_ = other.probe_;
    epoch_ = other.epoch_;
    retry_after_ = other.retry_after_;
  }
  return *this;
}

CircuitBreaker::Permit::~Permit() {
  if (breaker_) breaker_->record(*this, Result::abandoned);
}

void CircuitBreaker::Permit::record_success() noexcept {
  if (breaker_) std::exchange(breaker_, nullptr)->record(*this, Result::success);
}

void CircuitBreaker::Permit::record_failure() noexcept {
  if (breaker_) std::exchange(breaker_, nullptr)->record(*this, Result::failure);
}

CircuitBreaker::CircuitBreaker(CircuitBreakerOptions options, NowFunction now)
    : options_{options},
      now_{now ? std::move(now) : NowFunction{[] { return Clock::now(); }}} {}

CircuitBreaker::Permit CircuitBreaker::try_acquire() {
  std::lock_guard lock{mu_};
  switch (state_) {
    case BreakerState::closed:
      return Permit{this, false, epoch_};
    case BreakerState::open: {
      const TimePoint now = now_();
      const TimePoint probe_at = saturating_add(opened_at_, options_.cooldown);
      if (now < probe_at) return Permit{saturating_sub(probe_at, now)};
      state_ = BreakerState::half_open;
      ++epoch_;
      probe_out_ = true;
      return Permit{this, true, epoch_};
    }
    case BreakerState::half_open:
      if (probe_out_) return Permit{options_.cooldown};
      probe_out_ = true;  // the previous probe was given back
      return Permit{this, true, epoch_};
  }
  return Permit{options_.cooldown};
}

BreakerState CircuitBreaker::state() const {
  std::lock_guard lock{mu_};
  return state_;
}

void CircuitBreaker::record(const Permit& permit, Result result) noexcept {
  std::lock_guard lock{mu_};
  // A permit of an earlier epoch was granted before the last state change: its result says
  // nothing about the dependency now. In an open epoch no permit is granted.
  if (permit.epoch_ != epoch_) return;
  if (state_ == BreakerState::closed) {
    if (result == Result::success) failures_ = 0;
    if (result == Result::failure && ++failures_ >= std::max(options_.failure_threshold, 1)) {
      open_locked(now_());
    }
  } else if (state_ == BreakerState::half_open) {
    // The one permit of a half-open epoch that is still out is the probe.
    if (result == Result::success) {
      state_ = BreakerState::closed;
      failures_ = 0;
      probe_out_ = false;
      ++epoch_;
    } else if (result == Result::failure) {
      open_locked(now_());
    } else {
      probe_out_ = false;
    }
  }
}

void CircuitBreaker::open_locked(TimePoint now) {
  state_ = BreakerState::open;
  opened_at_ = now;
  probe_out_ = false;
  ++epoch_;
}

}  // namespace sandglass
