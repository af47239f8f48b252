// [upstreams.NAME]: where the forward kind sends jobs, and its retry and breaker settings.
#include "daemon/config/config_reader.hpp"

#include <utility>

namespace sandglass::daemon::config {
namespace {

constexpr std::string_view kUrlForm = "a URL \"http://IP:PORT/path\"";

void set_url(UpstreamConfig& u, const Entry& e) {
  u.url = e.string(kUrlForm);
  constexpr std::string_view kScheme = "http://";
  if (!u.url.starts_with(kScheme)) e.reject(kUrlForm);
  const std::string_view rest = std::string_view{u.url}.substr(kScheme.size());
  const auto slash = rest.find('/');
  const std::optional<HostPort> address = parse_host_port(rest.substr(0, slash));
  if (!address || address->port == 0) e.reject(kUrlForm);
  u.host = address->host;
  u.port = address->port;
  u.target = slash == std::string_view::npos ? "/" : std::string{rest.substr(slash)};
}

constexpr Field<UpstreamConfig> kUpstreamFields[] = {
    {"url", set_url},
    {"cap_ms", [](UpstreamConfig& u, const Entry& e) { u.cap = e.ms(1); }},
    {"reserve_ms", [](UpstreamConfig& u, const Entry& e) { u.reserve = e.ms(0); }},
    {"max_attempts", [](UpstreamConfig& u, const Entry& e) { u.max_attempts = static_cast<int>(e.integer(1, 100)); }},
    {"base_backoff_ms", [](UpstreamConfig& u, const Entry& e) { u.base_backoff = e.ms(0); }},
    {"max_backoff_ms", [](UpstreamConfig& u, const Entry& e) { u.max_backoff = e.ms(0); }},
    {"jitter", [](UpstreamConfig& u, const Entry& e) {
       u.full_jitter = e.one_of(std::array<std::string_view, 2>{"full", "none"}) == "full";
     }},
    {"failure_threshold", [](UpstreamConfig& u, const Entry& e) { u.failure_threshold = static_cast<int>(e.integer(1, 1'000'000)); }},
    {"cooldown_ms", [](UpstreamConfig& u, const Entry& e) { u.cooldown = e.ms(1); }},
    {"max_response_bytes", [](UpstreamConfig& u, const Entry& e) { u.max_response_bytes = e.count(1, kMaxBytes); }},
};

}  // namespace

void read_upstreams(DaemonConfig& config, const Entry& upstreams) {
  for (auto&& [name, node] : upstreams.table()) {
    const Entry entry = upstreams.child(name.str(), node);
    if (name.str().empty()) throw ConfigError{upstreams.key(), "an upstream name must not be empty"};
    UpstreamConfig upstream;
    read_fields<UpstreamConfig>(upstream, entry, kUpstreamFields);
    if (upstream.url.empty()) throw ConfigError{entry.key() + ".url", "is required"};
    config.upstreams.insert_or_assign(std::string{name.str()}, std::move(upstream));
  }
}

}  // namespace sandglass::daemon::config
