// daemon_url.hpp — `DaemonUrl`, where the client finds sandglassd: `--url`, else the
// environment's SANDGLASS_URL, else http://127.0.0.1:8080.
//
//   auto url = parse_daemon_url("http://[::1]:9000");   // host "::1", port "9000"
//
// Only plain http:// with a host and an optional port (default 80) and an optional "/"; a path,
// query, user or another scheme is an error that says what is wrong.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <variant>

namespace sandglass::cli {

inline constexpr std::string_view kDefaultUrl = "http://127.0.0.1:8080";

struct DaemonUrl {
  std::string host;  // a name or an address, IPv6 without its brackets
  std::string port;  // digits
  std::string text;  // as given, for messages
};

// The URL, or a message saying what is wrong with it.
std::variant<DaemonUrl, std::string> parse_daemon_url(std::string_view text);

}  // namespace sandglass::cli
