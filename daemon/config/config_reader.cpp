#include "daemon/config/config_reader.hpp"

#include <arpa/inet.h>

#include <charconv>
#include <sstream>
#include <system_error>
#include <utility>

namespace sandglass::daemon::config {

std::string quote_string(std::string_view text) {
  std::string quoted = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (byte < 0x20 || byte == 0x7F) {
      quoted += fmt::format("\\u{:04X}", byte);
    } else {
      quoted += c;
    }
  }
  return quoted + '"';
}

std::string key_text(std::string_view name) {
  const bool bare = !name.empty() && std::ranges::all_of(name, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
  });
  return bare ? std::string{name} : quote_string(name);
}

std::string describe(const toml::node& node) {
  if (const toml::value<std::string>* text = node.as_string()) return quote_string(text->get());
  if (node.is_table()) return "a table";
  if (node.is_array()) return "an array";
  std::ostringstream out;
  node.visit([&out](const auto& value) { out << value; });
  return out.str();
}

bool is_ipv4(const std::string& host) {
  in_addr address{};
  return ::inet_pton(AF_INET, host.c_str(), &address) == 1;
}

bool is_ipv6(const std::string& host) {
  in6_addr address{};
  return ::inet_pton(AF_INET6, host.c_str(), &address) == 1;
}

std::optional<HostPort> parse_host_port(std::string_view text) {
  std::string host;
  std::string_view port;
  if (text.starts_with('[')) {
    const std::size_t close = text.find("]:");
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    if (!is_ipv6(host)) return std::nullopt;
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (!is_ipv4(host)) return std::nullopt;
  }
  unsigned value = 0;
  const char* end = port.data() + port.size();
  const auto [stop, error] = std::from_chars(port.data(), end, value);
  if (port.empty() || error != std::errc{} || stop != end || value > 65535) return std::nullopt;
  return HostPort{std::move(host), static_cast<std::uint16_t>(value)};
}


}  // namespace sandglass::daemon::config
