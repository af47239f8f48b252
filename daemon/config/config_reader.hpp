// config_reader.hpp (private) — what the readers of sandglassd's config file share: `Entry`, one
// value being read with the dotted key its errors name; `Field` tables, one a section, whose
// setters read one node each; how values look in error messages; and HOST:PORT.
//
// The sections are read and checked in their own files:
//   server_config.cpp     [server] (listen address, limits, I/O threads)
//   auth_config.cpp       server.auth_token_file, the bearer token
//   runtime_config.cpp    [runtime], [budget], [records]
//   kinds_config.cpp      [kinds.NAME], [commands.NAME]
//   upstreams_config.cpp  [upstreams.NAME]
//   sql_config.cpp        [databases.NAME], [queries.NAME] (sql_config_reader.hpp)
//   cluster_config.cpp    [cluster]
//   daemon_config.cpp     the file's root, [log], validate(), apply_setting
//
// Thread safety: functions of values.
#pragma once

#include <sandglass/daemon/daemon_config.hpp>

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace sandglass::daemon::config {

using std::chrono::milliseconds;

// The largest values any key takes: a week of milliseconds, 1 GiB, ten million jobs or records.
constexpr std::int64_t kMaxMs = std::int64_t{7} * 24 * 60 * 60 * 1000;
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 30;
constexpr std::int64_t kMaxCount = 10'000'000;

// `text` in double quotes, with quotes, backslashes and control characters escaped.
std::string quote_string(std::string_view text);
// One key as a dotted key writes it: bare when TOML allows that, else quoted. So an empty key
// shows as "" (with a bare empty name, `[""]` gave an error naming no key; found by
// fuzz_daemon_config) and a name with a dot is not mistaken for two keys.
std::string key_text(std::string_view name);
// How a value looks in an error message: strings double-quoted, numbers, booleans and dates as
// TOML writes them, tables and arrays by their kind.
std::string describe(const toml::node& node);

template <typename Names>
std::string join(const Names& names) {
  std::string joined;
  for (std::string_view name : names) {
    if (!joined.empty()) joined += ", ";
    joined += name;
  }
  return joined;
}

inline std::int64_t ms_count(Duration d) {
  return std::chrono::duration_cast<milliseconds>(d).count();
}

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
  // A number from 0 to `max`; integers too.
  double number(double max) const {
    const std::optional<double> value = node_.is_number() ? node_.value<double>() : std::nullopt;
    if (!value || !(*value >= 0.0 && *value <= max)) {
      reject(fmt::format("a number from 0 to {}", max));
    }
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

// ---- HOST:PORT, shared by server.listen, --listen (through apply_setting) and upstream URLs --

bool is_ipv4(const std::string& host);
bool is_ipv6(const std::string& host);

struct HostPort {
  std::string host;  // without brackets
  std::uint16_t port = 0;
};

// "IPV4:PORT" or "[IPV6]:PORT"; nullopt for anything else. IP literals only, because the server
// binds with asio::ip::make_address, which resolves no names.
std::optional<HostPort> parse_host_port(std::string_view text);

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

// ---- Checks for validate() ------------------------------------------------------------------

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

// ---- The sections (each in its own file) ----------------------------------------------------

std::span<const Field<DaemonConfig>> server_fields();   // server_config.cpp
std::span<const Field<DaemonConfig>> runtime_fields();  // runtime_config.cpp
std::span<const Field<DaemonConfig>> budget_fields();   // runtime_config.cpp
std::span<const Field<DaemonConfig>> records_fields();  // runtime_config.cpp
std::span<const Field<DaemonConfig>> admission_fields();  // runtime_config.cpp

// server.auth_token_file: reads the token when the key is read (auth_config.cpp).
void set_auth_token_file(DaemonConfig& c, const Entry& e);

void read_kinds(DaemonConfig& config, const Entry& kinds);          // kinds_config.cpp
void read_commands(DaemonConfig& config, const Entry& commands);    // kinds_config.cpp
void read_upstreams(DaemonConfig& config, const Entry& upstreams);  // upstreams_config.cpp
void read_cluster(DaemonConfig& config, const Entry& cluster);      // cluster_config.cpp

// The parts of DaemonConfig::validate(), in the order it calls them. Each throws ConfigError
// naming the key.
void validate_server(const DaemonConfig& config);    // server.listen and the server limits
void validate_runtime(const DaemonConfig& config);   // runtime, budget and records
void validate_commands(const DaemonConfig& config);  // each [commands.NAME]
void validate_auth(const DaemonConfig& config);      // the token read from auth_token_file
void validate_cluster(const DaemonConfig& config);   // [cluster]

}  // namespace sandglass::daemon::config
