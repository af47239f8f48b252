#include "daemon/http/query_string.hpp"

#include <algorithm>

namespace sandglass::daemon {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::vector<QueryParameter> split_query(std::string_view query) {
  std::vector<QueryParameter> parameters;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    parameters.push_back({.name = pair.substr(0, eq),
                          .value = eq == std::string_view::npos ? std::string_view{}
                                                                : pair.substr(eq + 1)});
  }
  return parameters;
}

bool printable_name(std::string_view name) noexcept {
  return !name.empty() && std::ranges::all_of(name, [](char c) { return c > ' ' && c < 0x7F; });
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int hi = hex_digit(text[i + 1]);
      const int lo = hex_digit(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace sandglass::daemon
