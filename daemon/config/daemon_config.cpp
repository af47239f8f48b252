// daemon_config.cpp — DaemonConfig from TOML (toml++), command-line overrides, and validate().
//
// Each table of the file is a list of fields; a field's setter reads one node, checks its type
// and range, and names the dotted key when it throws. `apply_setting` feeds command-line text
// through the same setters, so a flag accepts exactly what its key accepts in the file.
#include <sandglass/daemon/daemon_config.hpp>

#include "daemon/api/bearer_auth.hpp"
#include "daemon/logging.hpp"
#include "daemon/config/sql_config_reader.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <sstream>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace sandglass::daemon {
namespace {

using std::chrono::milliseconds;

// The largest values any key takes: a week of milliseconds, 1 GiB, ten million jobs or records.
constexpr std::int64_t kMaxMs = std::int64_t{7} * 24 * 60 * 60 * 1000;
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 30;
constexpr std::int64_t kMaxCount = 10'000'000;
constexpr std::string_view kListenForm =
    R"("HOST:PORT" with an IP address as HOST (IPv6 in brackets: "[::1]:8080") and PORT 0-65535)";

// `text` in double quotes, with quotes, backslashes and control characters escaped.
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

// One key as a dotted key writes it: bare when TOML allows that, else quoted. So an empty key
// shows as "" (with a bare empty name, `[""]` gave an error naming no key; found by
// fuzz_daemon_config) and a name with a dot is not mistaken for two keys.
std::string key_text(std::string_view name) {
  const bool bare = !name.empty() && std::ranges::all_of(name, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
  });
  return bare ? std::string{name} : quote_string(name);
}

// How a value looks in an error message: strings double-quoted, numbers, booleans and dates as
// TOML writes them, tables and arrays by their kind.
std::string describe(const toml::node& node) {
  if (const toml::value<std::string>* text = node.as_string()) return quote_string(text->get());
  if (node.is_table()) return "a table";
  if (node.is_array()) return "an array";
  std::ostringstream out;
  node.visit([&out](const auto& value) { out << value; });
  return out.str();
}

template <typename Names>
std::string join(const Names& names) {
  std::string joined;
  for (std::string_view name : names) {
    if (!joined.empty()) joined += ", ";
    joined += name;
  }
  return joined;
}

std::int64_t ms_count(Duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

// One value being read: its dotted key, which errors name, and its node. The node must outlive
// the Entry.
class Entry {
 public:
  Entry(std::string key, const toml::node& node) : key_{std::move(key)}, node_{node} {}

  const std::string& key() const noexcept { return key_; }
  Entry child(std::string_view name, const toml::node& node) const {
    return Entry{key_ + "." + key_text(name), node};
  }

  // Throws "KEY: must be EXPECTED, got VALUE".
  [[noreturn]] void reject(std::string_view expected) const {
    throw ConfigError{key_, fmt::format("must be {}, got {}", expected, describe(node_))};
  }

  std::int64_t integer(std::int64_t min, std::int64_t max) const {
    const std::optional<std::int64_t> value = node_.value_exact<std::int64_t>();
    if (!value || *value < min || *value > max) {
      reject(fmt::format("an integer between {} and {}", min, max));
    }
    return *value;
  }
  std::size_t count(std::int64_t min, std::int64_t max) const {
    return static_cast<std::size_t>(integer(min, max));
  }
  // Whole milliseconds from `min_ms` to a week.
  milliseconds ms(std::int64_t min_ms) const { return milliseconds{integer(min_ms, kMaxMs)}; }

  bool boolean() const {
    if (const std::optional<bool> value = node_.value_exact<bool>()) return *value;
    reject("true or false");
  }
  // Accepts integers too: `estimate_quantile = 1` is as good as `1.0`.
  double fraction() const {
    const std::optional<double> value = node_.is_number() ? node_.value<double>() : std::nullopt;
    if (!value || !(*value > 0.0 && *value <= 1.0)) reject("a number greater than 0 and at most 1");
    return *value;
  }
  std::string string(std::string_view expected = "a string") const {
    if (std::optional<std::string> value = node_.value_exact<std::string>()) return *value;
    reject(expected);
  }
  template <std::size_t N>
  std::string one_of(const std::array<std::string_view, N>& names) const {
    std::optional<std::string> value = node_.value_exact<std::string>();
    if (!value || std::ranges::find(names, *value) == names.end()) reject("one of " + join(names));
    return *value;
  }
  const toml::table& table() const {
    if (const toml::table* table = node_.as_table()) return *table;
    reject("a table");
  }
  const toml::array& array(std::string_view expected) const {
    if (const toml::array* array = node_.as_array()) return *array;
    reject(expected);
  }

 private:
  std::string key_;
  const toml::node& node_;
};

// ---- HOST:PORT, shared by server.listen and --listen (through apply_setting) ----------------

bool is_ipv4(const std::string& host) {
  in_addr address{};
  return ::inet_pton(AF_INET, host.c_str(), &address) == 1;
}

bool is_ipv6(const std::string& host) {
  in6_addr address{};
  return ::inet_pton(AF_INET6, host.c_str(), &address) == 1;
}

struct HostPort {
  std::string host;  // without brackets
  std::uint16_t port = 0;
};

// "IPV4:PORT" or "[IPV6]:PORT"; nullopt for anything else. IP literals only, because the server
// binds with asio::ip::make_address, which resolves no names.
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

// ---- Field tables -------------------------------------------------------------------------

// One key of a table and how to store it into `Target`.
template <typename Target>
struct Field {
  std::string_view name;
  void (*set)(Target& target, const Entry& entry);
};

template <typename Target>
const Field<Target>* find_field(std::span<const Field<Target>> fields, std::string_view name) {
  const auto it = std::ranges::find(fields, name, &Field<Target>::name);
  return it == fields.end() ? nullptr : &*it;
}

// Reads every key of `table` into `target`; a key not in `fields` is an error.
template <typename Target>
void read_fields(Target& target, const Entry& table, std::span<const Field<Target>> fields) {
  for (auto&& [name, node] : table.table()) {
    const Entry entry = table.child(name.str(), node);
    const Field<Target>* field = find_field(fields, name.str());
    if (field == nullptr) {
      std::vector<std::string_view> known;
      for (const Field<Target>& f : fields) known.push_back(f.name);
      throw ConfigError{entry.key(), "unknown key; known keys here: " + join(known)};
    }
    field->set(target, entry);
  }
}

void set_listen(DaemonConfig& c, const Entry& e) {
  const std::optional<HostPort> address = parse_host_port(e.string(kListenForm));
  if (!address) e.reject(kListenForm);
  c.listen_host = address->host;
  c.listen_port = address->port;
}

// ---- server.auth_token_file: the bearer token, read when the key is read (bearer_auth.cpp) ---

constexpr std::string_view kAuthTokenKey = "server.auth_token_file";

// An empty path means no token (so a flag can turn off what the file set).
void set_auth_token_file(DaemonConfig& c, const Entry& e) {
  c.auth_token_file = e.string("a path to a file holding the token");
  c.auth_token = c.auth_token_file.empty() ? std::string{} : read_auth_token_file(c.auth_token_file);
}

constexpr Field<DaemonConfig> kServerFields[] = {
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
    {"auth_token_file", set_auth_token_file},
};

constexpr Field<DaemonConfig> kRuntimeFields[] = {
    {"workers", [](DaemonConfig& c, const Entry& e) { c.runtime.workers = e.count(1, 1024); }},
    {"capacity",
     [](DaemonConfig& c, const Entry& e) { c.runtime.capacity = e.count(1, kMaxCount); }},
    {"drain_timeout_ms", [](DaemonConfig& c, const Entry& e) { c.drain_timeout = e.ms(0); }},
    {"drop_if_cannot_finish",
     [](DaemonConfig& c, const Entry& e) { c.runtime.drop_if_cannot_finish = e.boolean(); }},
    {"estimate_quantile",
     [](DaemonConfig& c, const Entry& e) { c.runtime.estimate_quantile = e.fraction(); }},
    {"estimate_window",
     [](DaemonConfig& c, const Entry& e) { c.runtime.estimate_window = e.count(1, 1'000'000); }},
    {"estimate_max_age_ms",
     [](DaemonConfig& c, const Entry& e) { c.runtime.estimate_max_age = e.ms(0); }},
    {"overrun_after_ms",
     [](DaemonConfig& c, const Entry& e) { c.runtime.overrun_after = e.ms(1); }},
};

constexpr Field<DaemonConfig> kBudgetFields[] = {
    {"default_ms",
     [](DaemonConfig& c, const Entry& e) { c.runtime.budget.default_budget = e.ms(1); }},
    {"max_ms", [](DaemonConfig& c, const Entry& e) { c.runtime.budget.max_budget = e.ms(1); }},
    {"min_ms", [](DaemonConfig& c, const Entry& e) { c.runtime.budget.min_useful = e.ms(0); }},
    {"reserve_ms", [](DaemonConfig& c, const Entry& e) { c.runtime.budget.reserve = e.ms(0); }},
};

constexpr Field<DaemonConfig> kRecordsFields[] = {
    {"keep_ms", [](DaemonConfig& c, const Entry& e) { c.records.keep = e.ms(1); }},
    {"max_count",
     [](DaemonConfig& c, const Entry& e) { c.records.max_count = e.count(1, kMaxCount); }},
    {"max_bytes",
     [](DaemonConfig& c, const Entry& e) { c.records.max_bytes = e.count(1, kMaxBytes); }},
};

constexpr Field<DaemonConfig> kLogFields[] = {
    {"level", [](DaemonConfig& c, const Entry& e) { c.log_level = e.one_of(kLogLevels); }},
    {"format", [](DaemonConfig& c, const Entry& e) { c.log_format = e.one_of(kLogFormats); }},
};

// The tables with fixed keys; [kinds.NAME] and [commands.NAME] are read below.
struct Section {
  std::string_view name;
  std::span<const Field<DaemonConfig>> fields;
};
constexpr Section kSections[] = {{"server", kServerFields},
                                 {"runtime", kRuntimeFields},
                                 {"budget", kBudgetFields},
                                 {"records", kRecordsFields},
                                 {"log", kLogFields}};

const Section* find_section(std::string_view name) {
  const auto it = std::ranges::find(kSections, name, &Section::name);
  return it == std::end(kSections) ? nullptr : &*it;
}

// ---- [kinds.NAME] and [commands.NAME] -------------------------------------------------------

constexpr Field<std::size_t> kKindFields[] = {
    {"limit", [](std::size_t& limit, const Entry& e) { limit = e.count(1, kMaxCount); }},
};

void read_kinds(DaemonConfig& config, const Entry& kinds) {
  for (auto&& [name, node] : kinds.table()) {
    const Entry kind = kinds.child(name.str(), node);
    if (name.str().empty()) throw ConfigError{kinds.key(), "a kind name must not be empty"};
    std::size_t limit = 0;  // `limit` takes 1 and more: 0 means it was not given
    read_fields<std::size_t>(limit, kind, kKindFields);
    if (limit == 0) {
      throw ConfigError{kind.key() + ".limit",
                        "is missing (the most jobs of this kind that may run at once)"};
    }
    config.runtime.kind_limits.insert_or_assign(std::string{name.str()}, limit);
  }
}

constexpr std::string_view kArgvForm = "a non-empty array of strings, the first an absolute path";

void read_argv(CommandConfig& command, const Entry& e) {
  const toml::array& items = e.array(kArgvForm);
  command.argv.clear();
  for (std::size_t i = 0; i < items.size(); ++i) {
    command.argv.push_back(Entry{fmt::format("{}[{}]", e.key(), i), items[i]}.string());
  }
}

void read_env(CommandConfig& command, const Entry& e) {
  command.env.clear();
  for (auto&& [name, node] : e.table()) {
    command.env.insert_or_assign(std::string{name.str()}, e.child(name.str(), node).string());
  }
}

constexpr Field<CommandConfig> kCommandFields[] = {
    {"argv", read_argv},
    {"env", read_env},
    {"working_directory",
     [](CommandConfig& c, const Entry& e) { c.working_directory = e.string("an absolute path"); }},
    {"max_output_bytes",
     [](CommandConfig& c, const Entry& e) { c.max_output_bytes = e.count(0, kMaxBytes); }},
    {"kill_grace_ms", [](CommandConfig& c, const Entry& e) { c.kill_grace = e.ms(0); }},
    {"allow_stdin", [](CommandConfig& c, const Entry& e) { c.allow_stdin = e.boolean(); }},
};

// What a command must satisfy on its own; for the file and for configs built in code.
void check_command(const std::string& key, const CommandConfig& command) {
  if (command.argv.empty()) {
    throw ConfigError{key + ".argv", fmt::format("is missing or empty; must be {}", kArgvForm)};
  }
  if (!command.argv.front().starts_with('/')) {
    throw ConfigError{key + ".argv",
                      "argv[0] must be an absolute path (there is no PATH search), got " +
                          quote_string(command.argv.front())};
  }
  if (!command.working_directory.starts_with('/')) {
    throw ConfigError{key + ".working_directory",
                      "must be an absolute path, got " + quote_string(command.working_directory)};
  }
  for (const auto& [name, value] : command.env) {
    if (name.empty() || name.find('=') != std::string::npos) {
      throw ConfigError{key + ".env." + name, "a variable name must be non-empty and without '='"};
    }
  }
  if (command.kill_grace < milliseconds::zero()) {
    throw ConfigError{key + ".kill_grace_ms",
                      fmt::format("must not be negative, got {}", ms_count(command.kill_grace))};
  }
}

void read_commands(DaemonConfig& config, const Entry& commands) {
  for (auto&& [name, node] : commands.table()) {
    const Entry entry = commands.child(name.str(), node);
    if (name.str().empty()) throw ConfigError{commands.key(), "a command name must not be empty"};
    CommandConfig command;
    read_fields<CommandConfig>(command, entry, kCommandFields);
    check_command(entry.key(), command);
    config.commands.insert_or_assign(std::string{name.str()}, std::move(command));
  }
}

// ---- [upstreams.NAME] -------------------------------------------------------------------------

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

void read_root(DaemonConfig& config, const toml::table& root) {
  for (auto&& [name, node] : root) {
    const Entry entry{key_text(name.str()), node};
    if (name.str() == "kinds") {
      read_kinds(config, entry);
    } else if (name.str() == "commands") {
      read_commands(config, entry);
    } else if (name.str() == "upstreams") {
      read_upstreams(config, entry);
    } else if (name.str() == "databases") {
      read_databases(config, node);
    } else if (name.str() == "queries") {
      read_queries(config, node);
    } else if (const Section* section = find_section(name.str())) {
      read_fields<DaemonConfig>(config, entry, section->fields);
    } else {
      std::vector<std::string_view> known;
      for (const Section& s : kSections) known.push_back(s.name);
      known.insert(known.end(), {"kinds", "commands", "upstreams", "databases", "queries"});
      throw ConfigError{entry.key(), "unknown key; known tables: " + join(known)};
    }
  }
}

// ---- validate() helpers ---------------------------------------------------------------------

template <typename Number>
void check_at_least(std::string_view key, Number value, std::type_identity_t<Number> min) {
  if (value < min) {
    throw ConfigError{std::string{key}, fmt::format("must be at least {}, got {}", min, value)};
  }
}

template <std::size_t N>
void check_one_of(std::string_view key, const std::string& value,
                  const std::array<std::string_view, N>& names) {
  if (std::ranges::find(names, value) == names.end()) {
    throw ConfigError{std::string{key},
                      fmt::format("must be one of {}, got {}", join(names), quote_string(value))};
  }
}

// RuntimeOptions::validate() names a C++ field ("budget.max_budget: ..."); this names its key.
ConfigError runtime_options_error(const std::string& error) {
  static constexpr std::pair<std::string_view, std::string_view> kKeys[] = {
      {"workers", "runtime.workers"},
      {"capacity", "runtime.capacity"},
      {"estimate_quantile", "runtime.estimate_quantile"},
      {"estimate_window", "runtime.estimate_window"},
      {"estimate_max_age", "runtime.estimate_max_age_ms"},
      {"overrun_after", "runtime.overrun_after_ms"},
      {"budget.min_useful", "budget.min_ms"},
      {"budget.default_budget", "budget.default_ms"},
      {"budget.max_budget", "budget.max_ms"},
      {"budget.reserve", "budget.reserve_ms"},
  };
  const std::size_t colon = error.find(": ");
  if (colon == std::string::npos) return ConfigError{"runtime", error};
  const std::string field = error.substr(0, colon);
  const std::string message = error.substr(colon + 2);
  for (const auto& [name, key] : kKeys) {
    if (field == name) return ConfigError{std::string{key}, message};
  }
  constexpr std::string_view kKindPrefix = "kind_limits.";
  if (field.starts_with(kKindPrefix)) {
    return ConfigError{"kinds." + field.substr(kKindPrefix.size()) + ".limit", message};
  }
  return ConfigError{"runtime", error};
}

}  // namespace

void DaemonConfig::validate() const {
  if (!is_ipv4(listen_host) && !is_ipv6(listen_host)) {
    throw ConfigError{"server.listen",
                      "the host must be an IP address, got " + quote_string(listen_host)};
  }
  check_at_least("server.io_threads", io_threads, 1);
  check_at_least("server.max_body_bytes", limits.max_body_bytes, 1);
  check_at_least("server.max_header_bytes", limits.max_header_bytes, 1);
  check_at_least("server.max_connections", limits.max_connections, 1);
  check_at_least("server.read_timeout_ms", limits.read_timeout.count(), 1);
  check_at_least("server.write_timeout_ms", limits.write_timeout.count(), 1);
  check_at_least("server.idle_timeout_ms", limits.idle_timeout.count(), 1);
  check_at_least("server.max_json_depth", limits.max_json_depth, 1);
  check_at_least("runtime.drain_timeout_ms", drain_timeout.count(), 0);

  // min_ms <= default_ms <= max_ms, named in the file's terms before RuntimeOptions' own check.
  const BudgetPolicy& budget = runtime.budget;
  if (budget.min_useful > budget.default_budget) {
    throw ConfigError{"budget.min_ms",
                      fmt::format("must not be greater than budget.default_ms ({}), got {}",
                                  ms_count(budget.default_budget), ms_count(budget.min_useful))};
  }
  if (budget.max_budget < budget.default_budget) {
    throw ConfigError{"budget.max_ms",
                      fmt::format("must not be less than budget.default_ms ({}), got {}",
                                  ms_count(budget.default_budget), ms_count(budget.max_budget))};
  }
  if (const std::string error = runtime.validate(); !error.empty()) {
    throw runtime_options_error(error);
  }

  check_at_least("records.keep_ms", records.keep.count(), 1);
  check_at_least("records.max_count", records.max_count, 1);
  check_at_least("records.max_bytes", records.max_bytes, 1);
  check_one_of("log.level", log_level, kLogLevels);
  check_one_of("log.format", log_format, kLogFormats);
  for (const auto& [name, command] : commands) check_command("commands." + key_text(name), command);
  if (!auth_token.empty()) {
    if (const std::string problem = auth_token_problem(auth_token); !problem.empty()) {
      throw ConfigError{std::string{kAuthTokenKey}, "the token " + problem};
    }
  } else if (!auth_token_file.empty()) {
    throw ConfigError{std::string{kAuthTokenKey},
                      "names a file, but no token was read from it (set the key through the "
                      "config file or apply_setting, which read the file)"};
  }
  validate_sql_config(*this);
}

DaemonConfig parse_config(std::string_view toml_text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    throw ConfigError{std::string{source},
                      fmt::format("line {}, column {}: {}", e.source().begin.line,
                                  e.source().begin.column, e.description())};
  }
  DaemonConfig config;
  read_root(config, root);
  return config;
}

DaemonConfig load_config_file(const std::string& path) {
  // An ifstream opens a directory without complaint and then reads nothing.
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    throw ConfigError{"--config",
                      fmt::format("cannot read {}: it is a directory", quote_string(path))};
  }
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    const int error = errno;  // set by the failed open(2)
    throw ConfigError{"--config", fmt::format("cannot read {}: {}", quote_string(path),
                                              std::generic_category().message(error))};
  }
  const std::string text{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  if (in.bad()) throw ConfigError{"--config", fmt::format("cannot read {}", quote_string(path))};
  return parse_config(text, path);
}

void apply_setting(DaemonConfig& config, std::string_view key, std::string_view text) {
  const std::size_t dot = key.find('.');
  const Section* section =
      dot == std::string_view::npos ? nullptr : find_section(key.substr(0, dot));
  const Field<DaemonConfig>* field =
      section == nullptr ? nullptr : find_field(section->fields, key.substr(dot + 1));
  if (field == nullptr) throw ConfigError{std::string{key}, "not a key that can be set this way"};

  std::int64_t number = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, number);
  if (!text.empty() && error == std::errc{} && stop == end) {
    const toml::value<std::int64_t> node{number};
    field->set(config, Entry{std::string{key}, node});
  } else {
    const toml::value<std::string> node{std::string{text}};
    field->set(config, Entry{std::string{key}, node});
  }
}

}  // namespace sandglass::daemon
