// wire_budget.hpp — parse and format time budgets as they cross process boundaries.
//
// A budget travels as a remaining duration computed just before sending, never as a wall-clock
// time. Two headers are understood:
//   x-request-timeout-ms: 250        non-negative integer milliseconds
//   grpc-timeout: 250m               1–8 ASCII digits, then one unit of H M S m u n
//
//   auto b = sandglass::parse_grpc_timeout("2S");   // b.budget == 2s
//   auto e = sandglass::parse_grpc_timeout("2x");   // !e, e.error names the problem
//   headers["x-request-timeout-ms"] = sandglass::format_request_timeout_ms(child.budget);
//
// Time rules: absurdly large values saturate to `Duration::max()` and never overflow; the
// budget policy then clamps them. Formatting rounds down, so a propagated budget never grows;
// a negative duration formats as zero.
//
// Thread safety: pure functions.
#pragma once

#include <sandglass/deadline.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace sandglass {

inline constexpr std::string_view kRequestTimeoutHeader = "x-request-timeout-ms";
inline constexpr std::string_view kGrpcTimeoutHeader = "grpc-timeout";

// The result of parsing a wire budget: a duration, or an error that names the header and what
// is wrong with the value.
struct WireBudget {
  std::optional<Duration> budget;
  std::string error;

  explicit operator bool() const noexcept { return budget.has_value(); }
};

WireBudget parse_request_timeout_ms(std::string_view value);
std::string format_request_timeout_ms(Duration budget);

WireBudget parse_grpc_timeout(std::string_view value);
std::string format_grpc_timeout(Duration budget);

}  // namespace sandglass
