#include "daemon/cluster/migrations.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

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

// Runs `sql`, then `record` (if any) with `params`, in one transaction; a failure names `what`.
void apply_in_transaction(PgSession& session, std::string_view what, std::string_view sql,
                          const std::string& record = {},
                          const std::vector<std::optional<std::string>>& params = {}) {
  session.exec("BEGIN");
  try {
    session.exec(std::string{sql});
    if (!record.empty()) session.exec(record, params);
    session.exec("COMMIT");
  } catch (const PgError& e) {
    if (!session.broken()) session.exec("ROLLBACK");
    throw PgError{fmt::format("{}: {}", what, e.what())};
  }
}

// The files applied before must be this binary's files of those versions: a schema made by
// other files (an older sandglassd's, from before its migrations were folded into a baseline)
// cannot be brought to this one's by applying the rest.
void check_applied_files(PgSession& session) {
  const PgRows applied = session.exec("SELECT version, name FROM sandglass_schema_migrations ORDER BY version");
  for (int i = 0; i < applied.rows(); ++i) {
    const int version = static_cast<int>(applied.integer(i, 0));
    const std::string_view name = applied.text(i, 1);
    bool known = false;
    for (const Migration& m : migrations()) known = known || (m.version == version && m.name == name);
    if (!known) {
      throw PgError{fmt::format(
          "cluster database at {}: its schema was made by migration {} (version {}), which this "
          "sandglassd does not have; the cluster schema now starts from {}: run `sandglassd "
          "--migrate` on an empty database",
          session.server(), name, version, migrations().front().name)};
    }
  }
}

int latest_version() noexcept { return migrations().empty() ? 0 : migrations().back().version; }

// Whether the functions.sql last applied is this binary's (by md5).
bool functions_current(PgSession& session) {
  return session.exec("SELECT EXISTS (SELECT 1 FROM sandglass_functions_applied WHERE checksum = md5($1))",
                      {std::string{cluster_functions()}})
      .boolean(0, 0);
}

// Whether the database has every numbered file of this binary and its functions.sql, read
// without a lock: then a start has nothing to apply.
bool up_to_date(PgSession& session) {
  const PgRows tables = session.exec(
      "SELECT to_regclass('sandglass_schema_migrations') IS NOT NULL"
      " AND to_regclass('sandglass_functions_applied') IS NOT NULL");
  if (!tables.boolean(0, 0)) return false;
  const PgRows version = session.exec("SELECT coalesce(max(version), 0) FROM sandglass_schema_migrations");
  return version.integer(0, 0) == latest_version() && functions_current(session);
}

}  // namespace

MigrationReport migrate(PgSession& session, ApplyFunctions apply) {
  if (apply == ApplyFunctions::when_changed && up_to_date(session)) {
    check_applied_files(session);
    MigrationReport report;
    report.from_version = report.to_version = latest_version();
    return report;
  }
  LockGuard lock{session};
  session.exec(
      "CREATE TABLE IF NOT EXISTS sandglass_schema_migrations ("
      " version integer PRIMARY KEY, name text NOT NULL,"
      " applied_at timestamptz NOT NULL DEFAULT clock_timestamp())");
  const PgRows current = session.exec("SELECT coalesce(max(version), 0) FROM sandglass_schema_migrations");
  MigrationReport report;
  report.from_version = static_cast<int>(current.integer(0, 0));
  report.to_version = report.from_version;
  const int known = latest_version();
  if (report.from_version > known) {
    throw PgError{fmt::format(
        "cluster database at {}: its schema is version {}, newer than this sandglassd knows ({}); "
        "run a sandglassd at least as new as the one that migrated it",
        session.server(), report.from_version, known)};
  }
  check_applied_files(session);
  for (const Migration& m : migrations()) {
    if (m.version <= report.from_version) continue;
    apply_in_transaction(session, fmt::format("migration {}", m.name), m.sql,
                         "INSERT INTO sandglass_schema_migrations (version, name) VALUES ($1, $2)",
                         {std::to_string(m.version), std::string{m.name}});
    report.applied.push_back(m.name);
    report.to_version = m.version;
  }
  // A peer that started meanwhile may have applied this very file (checked under the lock).
  if (apply == ApplyFunctions::always || !report.applied.empty() || !functions_current(session)) {
    apply_in_transaction(session, "functions.sql", cluster_functions(),
                         "INSERT INTO sandglass_functions_applied (checksum) VALUES (md5($1))"
                         " ON CONFLICT (one) DO UPDATE SET checksum = EXCLUDED.checksum",
                         {std::string{cluster_functions()}});
    report.functions_applied = true;
  }
  return report;
}

}  // namespace sandglass::daemon::cluster
