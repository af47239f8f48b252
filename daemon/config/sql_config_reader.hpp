// sql_config_reader.hpp (private) — reads the `[databases.NAME]` and `[queries.NAME]` tables of
// sandglassd's config (see sql_config.hpp) and checks them against each other. Kept apart from
// daemon_config.cpp, which calls these.
//
// Thread safety: functions of values.
#pragma once

#include <sandglass/daemon/daemon_config.hpp>

#include <toml++/toml.h>

namespace sandglass::daemon {

// Read the node of the top-level key `databases` or `queries` into `config`. Each key is checked
// on its own (type, range); unknown keys are errors. Throw ConfigError naming the dotted key.
void read_databases(DaemonConfig& config, const toml::node& databases);
void read_queries(DaemonConfig& config, const toml::node& queries);

// Cross-key checks: every query names a configured database; every database has a conninfo and
// a pool of at least one connection. Throws ConfigError naming the dotted key.
void validate_sql_config(const DaemonConfig& config);

}  // namespace sandglass::daemon
