// migrations.hpp (private) — the cluster schema's versioned SQL files
// (daemon/cluster/migrations/NNN_name.sql, embedded at build time) and `migrate`, which applies
// the missing ones.
//
//   cluster::MigrationReport r = cluster::migrate(session);   // under pg_advisory_lock
//
// Each file runs in its own transaction with its row in sandglass_schema_migrations, under a
// session advisory lock, so nodes starting together apply each file once. A database whose
// schema is newer than this binary knows is refused (a newer sandglassd migrated it).
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

struct MigrationReport {
  int from_version = 0;
  int to_version = 0;
  std::vector<std::string_view> applied;  // file names
};

// Applies what is missing. Blocks. Throws PgError (naming the server) when a statement fails
// or the database's schema is newer than this binary's.
MigrationReport migrate(PgSession& session);

}  // namespace sandglass::daemon::cluster
