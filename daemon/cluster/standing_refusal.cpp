#include "daemon/cluster/standing_refusal.hpp"

#include "runtime/implausible_message.hpp"

#include <charconv>
#include <cstdint>

namespace sandglass::daemon::cluster {

std::optional<StandingRefusal> standing_refusal(std::string_view verdict) {
  constexpr std::string_view kPrefix = "standing_queue ";
  if (!verdict.starts_with(kPrefix)) return std::nullopt;
  verdict.remove_prefix(kPrefix.size());
  std::int64_t start_us = 0;
  std::int64_t target_us = 0;
  const char* end = verdict.data() + verdict.size();
  const auto first = std::from_chars(verdict.data(), end, start_us);
  if (first.ec != std::errc{} || first.ptr == end || *first.ptr != ' ') return std::nullopt;
  if (std::from_chars(first.ptr + 1, end, target_us).ec != std::errc{}) return std::nullopt;
  const Duration start = std::chrono::microseconds{start_us};
  const Duration target = std::chrono::microseconds{target_us};
  const TimePoint now = Clock::now();
  return StandingRefusal{.error = detail::standing_queue_message(now + start, now, target),
                         .retry_after = std::max(start - target, Duration::zero())};
}

}  // namespace sandglass::daemon::cluster
