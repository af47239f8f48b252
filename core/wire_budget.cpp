#include <sandglass/wire_budget.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <string>

namespace sandglass {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

std::string_view trim_whitespace(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Decimal digits to an integer, saturating at kMax.
std::int64_t parse_digits(std::string_view digits) {
  std::int64_t value = 0;
  for (char c : digits) {
    if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, c - '0', &value)) {
      return kMax;
    }
  }
  return value;
}

// `count` units of `unit_ns` nanoseconds, saturating.
Duration saturating_units(std::int64_t count, std::int64_t unit_ns) {
  std::int64_t ns = 0;
  if (__builtin_mul_overflow(count, unit_ns, &ns)) return Duration::max();
  return std::chrono::duration_cast<Duration>(std::chrono::nanoseconds{ns});
}

WireBudget error(std::string_view header, std::string_view what, std::string_view value) {
  std::string message{header};
  message += ": ";
  message += what;
  message += ", got '";
  // Quote at most 32 bytes of the value; control bytes and non-ASCII are shown as '?'.
  for (char c : value.substr(0, 32)) message += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (value.size() > 32) message += "...";
  message += "'";
  return WireBudget{std::nullopt, std::move(message)};
}

struct GrpcUnit {
  char symbol;
  std::int64_t ns;
};
// Finest first, so formatting picks the most precise unit that fits in 8 digits.
constexpr std::array<GrpcUnit, 6> kGrpcUnits = {{{'n', 1},
                                                 {'u', 1'000},
                                                 {'m', 1'000'000},
                                                 {'S', 1'000'000'000},
                                                 {'M', 60'000'000'000},
                                                 {'H', 3'600'000'000'000}}};
constexpr std::int64_t kGrpcMaxValue = 99'999'999;

std::int64_t non_negative_ns(Duration budget) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(budget).count();
  return ns < 0 ? 0 : ns;
}

}  // namespace

WireBudget parse_request_timeout_ms(std::string_view raw) {
  const std::string_view value = trim_whitespace(raw);
  if (value.empty()) return error(kRequestTimeoutHeader, "expected integer milliseconds", raw);
  for (char c : value) {
    if (!is_digit(c)) {
      return error(kRequestTimeoutHeader, "expected a non-negative integer of milliseconds", raw);
    }
  }
  return WireBudget{saturating_units(parse_digits(value), 1'000'000), {}};
}

std::string format_request_timeout_ms(Duration budget) {
  return std::to_string(non_negative_ns(budget) / 1'000'000);
}

WireBudget parse_grpc_timeout(std::string_view raw) {
  const std::string_view value = trim_whitespace(raw);
  std::size_t digits = 0;
  while (digits < value.size() && is_digit(value[digits])) ++digits;
  if (digits == 0) return error(kGrpcTimeoutHeader, "expected 1 to 8 digits and a unit", raw);
  if (digits > 8) return error(kGrpcTimeoutHeader, "at most 8 digits are allowed", raw);
  if (digits == value.size()) {
    return error(kGrpcTimeoutHeader, "missing unit (one of H M S m u n)", raw);
  }
  if (digits + 1 != value.size()) {
    return error(kGrpcTimeoutHeader, "expected exactly one unit (one of H M S m u n) after the digits", raw);
  }
  for (const GrpcUnit& unit : kGrpcUnits) {
    if (unit.symbol == value.back()) {
      return WireBudget{saturating_units(parse_digits(value.substr(0, digits)), unit.ns), {}};
    }
  }
  return error(kGrpcTimeoutHeader, "unknown unit (expected one of H M S m u n)", raw);
}

std::string format_grpc_timeout(Duration budget) {
  const std::int64_t ns = non_negative_ns(budget);
  for (const GrpcUnit& unit : kGrpcUnits) {
    // Rounds down: the budget on the wire never exceeds the one we hold.
    if (ns / unit.ns <= kGrpcMaxValue) return std::to_string(ns / unit.ns) + unit.symbol;
  }
  return std::to_string(kGrpcMaxValue) + 'H';
}

}  // namespace sandglass
