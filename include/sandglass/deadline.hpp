// deadline.hpp — `Deadline`, an absolute point on the steady clock by which work must be done,
// and saturating time arithmetic.
//
//   auto d = sandglass::Deadline::after(250ms);
//   if (!d.expired()) call(d.remaining());
//
// Time rules: in-process time is always `std::chrono::steady_clock`. A deadline in the past is
// an expired deadline; `remaining()` is then zero, never negative. A negative budget gives an
// already expired deadline. Adding a duration saturates at the clock's range instead of
// overflowing, so `Deadline::after(Duration::max())` is the same as `Deadline::never()`.
//
// Thread safety: `Deadline` is a value type. Distinct objects: safe. Shared objects: safe for
// concurrent reads.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <limits>

namespace sandglass {

using Clock = std::chrono::steady_clock;
using Duration = Clock::duration;
using TimePoint = Clock::time_point;

// `t + d`, clamped to [TimePoint::min(), TimePoint::max()].
constexpr TimePoint saturating_add(TimePoint t, Duration d) noexcept {
  Duration::rep sum = 0;
  if (__builtin_add_overflow(t.time_since_epoch().count(), d.count(), &sum)) {
    return d.count() > 0 ? TimePoint::max() : TimePoint::min();
  }
  return TimePoint{Duration{sum}};
}

// `a - b`, clamped to [Duration::min(), Duration::max()].
constexpr Duration saturating_sub(TimePoint a, TimePoint b) noexcept {
  Duration::rep diff = 0;
  if (__builtin_sub_overflow(a.time_since_epoch().count(), b.time_since_epoch().count(), &diff)) {
    return a > b ? Duration::max() : Duration::min();
  }
  return Duration{diff};
}

class Deadline {
 public:
  // A deadline that never expires.
  constexpr Deadline() noexcept = default;

  static constexpr Deadline never() noexcept { return Deadline{}; }
  static constexpr Deadline at(TimePoint t) noexcept { return Deadline{t}; }
  // `now + budget`, saturating. A negative budget is an expired deadline.
  static constexpr Deadline after(Duration budget, TimePoint now) noexcept {
    return Deadline{saturating_add(now, budget)};
  }
  static Deadline after(Duration budget) noexcept { return after(budget, Clock::now()); }

  constexpr TimePoint time_point() const noexcept { return at_; }
  constexpr bool is_never() const noexcept { return at_ == TimePoint::max(); }

  // Time left at `now`; zero once expired.
  constexpr Duration remaining(TimePoint now) const noexcept {
    return now >= at_ ? Duration::zero() : saturating_sub(at_, now);
  }
  Duration remaining() const noexcept { return remaining(Clock::now()); }

  // Time left at `now`, negative once expired (how late `now` is).
  constexpr Duration slack(TimePoint now) const noexcept { return saturating_sub(at_, now); }

  constexpr bool expired(TimePoint now) const noexcept { return now >= at_; }
  bool expired() const noexcept { return expired(Clock::now()); }

  friend constexpr auto operator<=>(const Deadline&, const Deadline&) noexcept = default;

 private:
  constexpr explicit Deadline(TimePoint t) noexcept : at_{t} {}

  TimePoint at_ = TimePoint::max();
};

// The earlier of two deadlines.
constexpr Deadline earlier(Deadline a, Deadline b) noexcept { return a < b ? a : b; }

}  // namespace sandglass
