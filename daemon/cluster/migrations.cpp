#include "daemon/cluster/migrations.hpp"

#include <fmt/format.h>

#include <string>

namespace sandglass::daemon::cluster {
namespace {

// pg_advisory_lock key of schema migrations (any fixed number no other code uses).
constexpr std::string_view kMigrationLock = "7170734562315111681";

// Releases the advisory lock, also when a migration throws.
class LockGuard {
 public:
  explicit LockGuard(PgSession& s) : s_{s} {
    s_.exec(fmt::format("SELECT pg_advisory_lock({})", kMigrationLock));
  }
  ~LockGuard() {
    try {
      if (!s_.broken()) s_.exec(fmt::format("SELECT pg_advisory_unlock({})", kMigrationLock));
    } catch (const PgError&) {  // the session ends with the connection; so does the lock
    }
  }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  PgSession& s_;
};

}  // namespace

MigrationReport migrate(PgSession& session) {
  LockGuard lock{session};
  session.exec(
      "CREATE TABLE IF NOT EXISTS sandglass_schema_migrations ("
      " version integer PRIMARY KEY, name text NOT NULL,"
      " applied_at timestamptz NOT NULL DEFAULT clock_timestamp())");
  const PgRows current = session.exec("SELECT coalesce(max(version), 0) FROM sandglass_schema_migrations");
  MigrationReport report;
  report.from_version = static_cast<int>(current.integer(0, 0));
  report.to_version = report.from_version;
  const int known = migrations().empty() ? 0 : migrations().back().version;
  if (report.from_version > known) {
    throw PgError{fmt::format(
        "cluster database at {}: its schema is version {}, newer than this sandglassd knows ({}); "
        "run a sandglassd at least as new as the one that migrated it",
        session.server(), report.from_version, known)};
  }
  for (const Migration& m : migrations()) {
    if (m.version <= report.from_version) continue;
    session.exec("BEGIN");
    try {
      session.exec(std::string{m.sql});
      session.exec("INSERT INTO sandglass_schema_migrations (version, name) VALUES ($1, $2)",
                   {std::to_string(m.version), std::string{m.name}});
      session.exec("COMMIT");
    } catch (const PgError& e) {
      if (!session.broken()) session.exec("ROLLBACK");
      throw PgError{fmt::format("migration {}: {}", m.name, e.what())};
    }
    report.applied.push_back(m.name);
    report.to_version = m.version;
  }
  return report;
}

}  // namespace sandglass::daemon::cluster
