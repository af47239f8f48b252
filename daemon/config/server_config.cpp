// [server]: the listen address, the HTTP limits and the I/O threads.
#include "daemon/config/config_reader.hpp"

namespace sandglass::daemon::config {
namespace {

constexpr std::string_view kListenForm =
    R"("HOST:PORT" with an IP address as HOST (IPv6 in brackets: "[::1]:8080") and PORT 0-65535)";

void set_listen(DaemonConfig& c, const Entry& e) {
  const std::optional<HostPort> address = parse_host_port(e.string(kListenForm));
  if (!address) e.reject(kListenForm);
  c.listen_host = address->host;
  c.listen_port = address->port;
}

}  // namespace

std::span<const Field<DaemonConfig>> server_fields() {
  static constexpr Field<DaemonConfig> kServerFields[] = {
    {"listen", set_listen},
    {"io_threads", [](DaemonConfig& c, const Entry& e) { c.io_threads = e.count(1, 256); }},
    {"max_body_bytes",
     [](DaemonConfig& c, const Entry& e) { c.limits.max_body_bytes = e.count(1, kMaxBytes); }},
    {"max_header_bytes",
     [](DaemonConfig& c, const Entry& e) { c.limits.max_header_bytes = e.count(1, 1 << 20); }},
    {"max_connections",
     [](DaemonConfig& c, const Entry& e) { c.limits.max_connections = e.count(1, 1'000'000); }},
    {"read_timeout_ms", [](DaemonConfig& c, const Entry& e) { c.limits.read_timeout = e.ms(1); }},
    {"write_timeout_ms", [](DaemonConfig& c, const Entry& e) { c.limits.write_timeout = e.ms(1); }},
    {"idle_timeout_ms", [](DaemonConfig& c, const Entry& e) { c.limits.idle_timeout = e.ms(1); }},
    {"max_json_depth",
     [](DaemonConfig& c, const Entry& e) { c.limits.max_json_depth = e.count(1, 1024); }},
    {"max_batch", [](DaemonConfig& c, const Entry& e) { c.limits.max_batch = e.count(1, 100'000); }},
    {"max_pending_body_bytes",
     [](DaemonConfig& c, const Entry& e) { c.limits.max_pending_body_bytes = e.count(1, kMaxBytes); }},
    {"auth_token_file", set_auth_token_file},
    {"max_delay_ms", [](DaemonConfig& c, const Entry& e) { c.limits.max_delay = e.ms(0); }},
};
  return kServerFields;
}

void validate_server(const DaemonConfig& c) {
  if (!is_ipv4(c.listen_host) && !is_ipv6(c.listen_host)) {
    throw ConfigError{"server.listen",
                      "the host must be an IP address, got " + quote_string(c.listen_host)};
  }
  check_at_least("server.io_threads", c.io_threads, 1);
  check_at_least("server.max_body_bytes", c.limits.max_body_bytes, 1);
  check_at_least("server.max_header_bytes", c.limits.max_header_bytes, 1);
  check_at_least("server.max_connections", c.limits.max_connections, 1);
  check_at_least("server.read_timeout_ms", c.limits.read_timeout.count(), 1);
  check_at_least("server.write_timeout_ms", c.limits.write_timeout.count(), 1);
  check_at_least("server.idle_timeout_ms", c.limits.idle_timeout.count(), 1);
  check_at_least("server.max_json_depth", c.limits.max_json_depth, 1);
  check_at_least("server.max_batch", c.limits.max_batch, 1);
  check_at_least("server.max_pending_body_bytes", c.limits.max_pending_body_bytes, 1);
}

}  // namespace sandglass::daemon::config
