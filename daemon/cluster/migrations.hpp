// migrations.hpp (private) — the cluster schema: versioned SQL files
// (daemon/cluster/migrations/NNN_name.sql: tables, indexes) and one file of functions
// (migrations/functions.sql: every function's current body, CREATE OR REPLACE), embedded at
// build time, and `migrate`, which applies the missing files and then the functions.
//
//   cluster::MigrationReport r = cluster::migrate(session);   // a node's start
//   cluster::migrate(session, cluster::ApplyFunctions::always);  // sandglassd --migrate
//
// Each numbered file runs in its own transaction with its row in sandglass_schema_migrations,
// then the functions file in one more, all under a session advisory lock, so nodes starting
// together apply each file once. A database whose schema is newer than this binary knows is
// refused (a newer sandglassd migrated it), and so is one whose applied files are not this
// binary's (a schema made by migrations this binary no longer has).
//
// A start applies the functions only when they changed: the md5 of the functions file last
// applied is in sandglass_functions_applied, compared first without any lock; when every
// numbered file is applied and the md5 is this binary's, nothing is locked or written. (Applying
// the file takes locks the peers wait for: CREATE OR REPLACE TRIGGER locks sandglass_nodes
// against every heartbeat until it commits.)
//
// Thread safety: functions; `migrate` blocks on the database.
#pragma once

#include "daemon/cluster/pg_session.hpp"

#include <span>
#include <string_view>
#include <vector>

namespace sandglass::daemon::cluster {

struct Migration {
  int version;
  std::string_view name;
  std::string_view sql;
};

// In version order. Generated (embed_migrations.cmake).
std::span<const Migration> migrations() noexcept;

// migrations/functions.sql. Generated (embed_migrations.cmake).
std::string_view cluster_functions() noexcept;

struct MigrationReport {
  int from_version = 0;
  int to_version = 0;
  std::vector<std::string_view> applied;  // file names of the numbered files applied
  bool functions_applied = false;
};

enum class ApplyFunctions {
  when_changed,  // a numbered file was applied, or the stored md5 is not this file's
  always,
};

// Applies the numbered files that are missing, then the functions file (`apply`). Blocks.
// Throws PgError (naming the server) when a statement fails, the database's schema is newer
// than this binary's, or its applied files are not this binary's.
MigrationReport migrate(PgSession& session, ApplyFunctions apply = ApplyFunctions::when_changed);

}  // namespace sandglass::daemon::cluster
