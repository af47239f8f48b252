#include "bearer_auth.hpp"

#include <algorithm>
#include <array>
#include <cctype>

namespace sandglass::daemon {
namespace {

constexpr std::string_view kScheme = "bearer";

bool starts_with_scheme(std::string_view value) noexcept {
  if (value.size() <= kScheme.size()) return false;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) != kScheme[i]) return false;
  }
  return value[kScheme.size()] == ' ';
}

}  // namespace

bool constant_time_equals(std::string_view expected, std::string_view given) noexcept {
  if (given.size() > kMaxAuthTokenBytes || expected.size() > kMaxAuthTokenBytes) return false;
  // Reads through volatile pointers, so the compiler can neither stop at the first difference
  // nor skip positions; every position past a string's end reads as 0 and counts through the
  // length difference below.
  const volatile unsigned char* e = reinterpret_cast<const unsigned char*>(expected.data());
  const volatile unsigned char* g = reinterpret_cast<const unsigned char*>(given.data());
  unsigned difference = static_cast<unsigned>(expected.size() ^ given.size());
  for (std::size_t i = 0; i < kMaxAuthTokenBytes; ++i) {
    const unsigned char a = i < expected.size() ? e[i] : 0;
    const unsigned char b = i < given.size() ? g[i] : 0;
    difference |= static_cast<unsigned>(a ^ b);
  }
  return difference == 0;
}

BearerAuth::Verdict BearerAuth::check(const HttpRequest& request) const noexcept {
  if (!required()) return Verdict::allowed;
  const auto is_authorization = [](const auto& header) { return header.first == "authorization"; };
  const auto count = std::ranges::count_if(request.headers, is_authorization);
  if (count == 0) return Verdict::missing;
  if (count > 1) return Verdict::invalid;
  std::string_view value = std::ranges::find_if(request.headers, is_authorization)->second;
  if (!starts_with_scheme(value)) return Verdict::missing;
  value.remove_prefix(kScheme.size());
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  return constant_time_equals(token_, value) ? Verdict::allowed : Verdict::invalid;
}

bool is_open_path(std::string_view path) noexcept {
  static constexpr std::array<std::string_view, 3> kOpen{"/healthz", "/readyz", "/metrics"};
  return std::ranges::find(kOpen, path) != kOpen.end();
}

}  // namespace sandglass::daemon
