// saturating_ns.hpp (private) — nanosecond arithmetic that saturates instead of overflowing,
// shared by the queue's locked and lock-free admission (deadline_queue.cpp, admission_inbox.cpp).
#pragma once

#include <cstdint>
#include <limits>

namespace sandglass::detail {

// "Never" and "no bound": larger than any slack or deadline in nanoseconds.
inline constexpr std::int64_t kInf = std::numeric_limits<std::int64_t>::max();

// a + b, clamped to [int64 min, kInf].
inline std::int64_t add_sat(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? kInf : std::numeric_limits<std::int64_t>::min();
  }
  return sum;
}

}  // namespace sandglass::detail
