#include "cli/duration_arg.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <utility>

namespace sandglass::cli {
namespace {

// Longest suffix first, so that "ms" is not read as "m" followed by junk.
constexpr std::array<std::pair<std::string_view, std::int64_t>, 4> kUnitsMs{
    {{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}}};
// A year: beyond any budget or delay the daemon grants, and far from overflowing.
constexpr std::int64_t kMostMs = 366LL * 24 * 3'600'000;

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  for (const auto& [unit, unit_ms] : kUnitsMs) {
    if (!text.ends_with(unit)) continue;
    const std::string_view digits = text.substr(0, text.size() - unit.size());
    std::int64_t count = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || count < 0 ||
        count > kMostMs / unit_ms) {
      return std::nullopt;
    }
    return std::chrono::milliseconds{count * unit_ms};
  }
  return std::nullopt;
}

std::string duration_error(std::string_view flag, std::string_view text) {
  return std::string{flag} + ": \"" + std::string{text} +
         "\" is not a duration (a whole number and a unit: e.g. 500ms, 1s, 2m, 1h)";
}

}  // namespace sandglass::cli
