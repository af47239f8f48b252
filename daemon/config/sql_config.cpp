// sql_config.cpp — the `[databases.NAME]` and `[queries.NAME]` tables (sql_config_reader.hpp).
#include "daemon/config/sql_config_reader.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandglass::daemon {
namespace {

constexpr std::int64_t kMaxMs = std::int64_t{7} * 24 * 60 * 60 * 1000;  // a week
constexpr std::int64_t kMaxPoolSize = 1'000;
constexpr std::int64_t kMaxRows = 1'000'000;
constexpr std::int64_t kMaxParams = 65'535;  // the wire protocol's limit

// How a value looks in an error message.
std::string describe(const toml::node& node) {
  if (const auto* text = node.as_string()) return fmt::format("\"{}\"", text->get());
  if (node.is_table()) return "a table";
  if (node.is_array()) return "an array";
  if (const auto v = node.value_exact<std::int64_t>()) return std::to_string(*v);
  if (const auto v = node.value_exact<double>()) return fmt::format("{}", *v);
  if (const auto v = node.value_exact<bool>()) return *v ? "true" : "false";
  return "a date or time";
}

[[noreturn]] void reject(const std::string& key, const toml::node& node, std::string_view expected) {
  throw ConfigError{key, fmt::format("must be {}, got {}", expected, describe(node))};
}

std::int64_t integer(const std::string& key, const toml::node& node, std::int64_t min,
                     std::int64_t max) {
  const std::optional<std::int64_t> value = node.value_exact<std::int64_t>();
  if (!value || *value < min || *value > max) {
    reject(key, node, fmt::format("an integer between {} and {}", min, max));
  }
  return *value;
}

std::string string(const std::string& key, const toml::node& node) {
  std::optional<std::string> value = node.value_exact<std::string>();
  if (!value || value->empty()) reject(key, node, "a non-empty string");
  return std::move(*value);
}

bool boolean(const std::string& key, const toml::node& node) {
  const std::optional<bool> value = node.value_exact<bool>();
  if (!value) reject(key, node, "true or false");
  return *value;
}

const toml::table& table(const std::string& key, const toml::node& node) {
  const toml::table* t = node.as_table();
  if (t == nullptr) reject(key, node, "a table");
  return *t;
}

[[noreturn]] void unknown_key(const std::string& key, std::string_view known) {
  throw ConfigError{key, fmt::format("unknown key; known keys here: {}", known)};
}

DatabaseConfig read_database(const std::string& prefix, const toml::table& entries) {
  DatabaseConfig db;
  for (auto&& [name, node] : entries) {
    const std::string key = prefix + "." + std::string{name.str()};
    if (name == "conninfo") {
      db.conninfo = string(key, node);
    } else if (name == "pool_size") {
      db.pool_size = static_cast<std::size_t>(integer(key, node, 1, kMaxPoolSize));
    } else if (name == "connect_timeout_ms") {
      db.connect_timeout = std::chrono::milliseconds{integer(key, node, 1, kMaxMs)};
    } else if (name == "cancel_grace_ms") {
      db.cancel_grace = std::chrono::milliseconds{integer(key, node, 1, kMaxMs)};
    } else if (name == "max_rows") {
      db.max_rows = static_cast<std::size_t>(integer(key, node, 0, kMaxRows));
    } else {
      unknown_key(key, "conninfo, pool_size, connect_timeout_ms, cancel_grace_ms, max_rows");
    }
  }
  if (db.conninfo.empty()) throw ConfigError{prefix + ".conninfo", "is required"};
  return db;
}

QueryConfig read_query(const std::string& prefix, const toml::table& entries) {
  QueryConfig query;
  for (auto&& [name, node] : entries) {
    const std::string key = prefix + "." + std::string{name.str()};
    if (name == "database") {
      query.database = string(key, node);
    } else if (name == "sql") {
      query.sql = string(key, node);
    } else if (name == "params") {
      query.params = static_cast<std::size_t>(integer(key, node, 0, kMaxParams));
    } else if (name == "commits") {
      query.commits = boolean(key, node);
    } else {
      unknown_key(key, "database, sql, params, commits");
    }
  }
  if (query.database.empty()) throw ConfigError{prefix + ".database", "is required"};
  if (query.sql.empty()) throw ConfigError{prefix + ".sql", "is required"};
  return query;
}

}  // namespace

void read_databases(DaemonConfig& config, const toml::node& databases) {
  for (auto&& [name, node] : table("databases", databases)) {
    if (name.str().empty()) throw ConfigError{"databases", "a database name must not be empty"};
    const std::string key = "databases." + std::string{name.str()};
    config.databases.insert_or_assign(std::string{name.str()}, read_database(key, table(key, node)));
  }
}

void read_queries(DaemonConfig& config, const toml::node& queries) {
  for (auto&& [name, node] : table("queries", queries)) {
    if (name.str().empty()) throw ConfigError{"queries", "a query name must not be empty"};
    const std::string key = "queries." + std::string{name.str()};
    config.queries.insert_or_assign(std::string{name.str()}, read_query(key, table(key, node)));
  }
}

void validate_sql_config(const DaemonConfig& config) {
  for (const auto& [name, db] : config.databases) {
    if (db.conninfo.empty()) throw ConfigError{"databases." + name + ".conninfo", "is required"};
    if (db.pool_size < 1) {
      throw ConfigError{"databases." + name + ".pool_size", "must be at least 1, got 0"};
    }
  }
  for (const auto& [name, query] : config.queries) {
    if (!config.databases.contains(query.database)) {
      throw ConfigError{"queries." + name + ".database",
                        fmt::format("names no [databases.{}] table", query.database)};
    }
    if (query.sql.empty()) throw ConfigError{"queries." + name + ".sql", "is required"};
  }
}

}  // namespace sandglass::daemon
