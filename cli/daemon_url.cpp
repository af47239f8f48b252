#include "cli/daemon_url.hpp"

#include <algorithm>
#include <charconv>

namespace sandglass::cli {
namespace {

constexpr std::string_view kScheme = "http://";

bool valid_port(std::string_view port) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  return !port.empty() && ec == std::errc{} && end == port.data() + port.size() && value >= 1 &&
         value <= 65535;
}

}  // namespace

std::variant<DaemonUrl, std::string> parse_daemon_url(std::string_view text) {
  if (!text.starts_with(kScheme)) {
    return std::string{"must start with http:// (e.g. "} + std::string{kDefaultUrl} + ")";
  }
  std::string_view rest = text.substr(kScheme.size());
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find_first_of("/?#@") != std::string_view::npos) {
    return std::string{"must be http://HOST[:PORT], without a path, query or user"};
  }
  DaemonUrl url{.port = "80", .text = std::string{text}};
  std::string_view port;
  if (rest.starts_with('[')) {  // [IPv6]:port
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return std::string{"has an IPv6 address without its ']'"};
    url.host = rest.substr(1, close - 1);
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty() && !after.starts_with(':'))
      return std::string{"has text after ']' that is not :PORT"};
    if (!after.empty()) port = after.substr(1);
    if (after == ":") return std::string{"has an empty port"};
  } else {
    const auto colon = rest.rfind(':');
    url.host = rest.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = rest.substr(colon + 1);
      if (port.empty()) return std::string{"has an empty port"};
    }
  }
  if (url.host.empty()) return std::string{"has no host"};
  if (!port.empty()) {
    if (!valid_port(port)) return std::string{"has a port that is not a number from 1 to 65535"};
    url.port = port;
  }
  return url;
}

}  // namespace sandglass::cli
