// A run's identity in cluster mode is (job id, attempt) (daemon/cluster/held_runs.hpp,
// commit_points.cpp, migrations/functions.sql, "Nodes and leases"): a node that claims a newer
// attempt of a job whose older attempt still runs there cancels the older run, and a commit point
// is answered for its own attempt only, also when both attempts ask in one statement.
#include "cluster/cluster_fixture.hpp"
#include "cluster/ledger_queries.hpp"
#include "daemon/cluster/pg_session.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace sandglass::testing;
using namespace std::chrono_literals;
using sandglass::daemon::cluster::PgSession;

namespace {

// The database sessions of the node's sql kind that wait for the gate's lock.
std::vector<std::string> gate_waiters(const PostgresServer& pg) {
  std::vector<std::string> pids;
  for (const auto& row : pg.query("SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                  "AND query LIKE 'INSERT INTO ledger%gate%'")) {
    pids.push_back(row[0]);
  }
  return pids;
}

}  // namespace

TEST_SUITE("cluster run identity") {

TEST_CASE("two attempts of one job on one node never both pass the commit point, also when their "
          "commit points are asked in one statement" * doctest::timeout(180)) {
  ClusterFixture c;
  // `gated` inserts its note once it may share the row of `gate` (the test holds it exclusively
  // to stop it there), `record` at once.
  const std::string queries = ledger_queries(c.pg, {{"gated", "INSERT INTO ledger (note) SELECT $1 FROM gate FOR SHARE"},
                                                    {"record", "INSERT INTO ledger (note) VALUES ($1)"}});
  const std::uint16_t entry = c.node({"sleep"}, 2, {}, queries).port();
  DaemonProcess& runner = c.node({"sql"}, 3, {}, queries);
  c.pg.execute(
      "CREATE TABLE ledger (note text); CREATE TABLE gate (x int); INSERT INTO gate VALUES (1);"
      // The commit marks of the job noted "hold" wait while the test holds advisory lock 42.
      "CREATE FUNCTION hold_mark() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
      "  PERFORM pg_advisory_xact_lock_shared(42); RETURN NEW; END $$;"
      "CREATE TRIGGER hold_mark BEFORE UPDATE ON sandglass_jobs FOR EACH ROW"
      "  WHEN (NEW.committed AND NOT OLD.committed AND NEW.args LIKE '%\"hold\"%')"
      "  EXECUTE FUNCTION hold_mark();");
  PgSession gate = PgSession::open(c.pg.conninfo());
  PgSession marks = PgSession::open(c.pg.conninfo());
  gate.exec("BEGIN");
  gate.exec("SELECT x FROM gate FOR UPDATE");
  marks.exec("SELECT pg_advisory_lock(42)");

  // Attempt 1 runs on the node and waits at the gate, before its commit point.
  const std::uint64_t job = submit_later(
      entry, R"({"kind":"sql","args":{"query":"gated","params":["twice?"]},"priority":"high","timeout_ms":60000})");
  REQUIRE(eventually([&] { return gate_waiters(c.pg).size() == 1; }, 30s));
  const std::string first_run = gate_waiters(c.pg).front();

  // Taken back as a sweep would (the node seemed lost): the same node claims attempt 2.
  const std::string id = std::to_string(job);
  c.pg.execute("SELECT 1 FROM sandglass_jobs WHERE id = " + id + " FOR UPDATE;"
               "SELECT sandglass_take_back('test', " + id + ", '{sql}', '{0}', NULL)");
  REQUIRE(eventually([&] {
    const auto w = gate_waiters(c.pg);
    return std::any_of(w.begin(), w.end(), [&](const std::string& pid) { return pid != first_run; });
  }, 30s));
  CHECK(c.pg.scalar("SELECT attempt FROM sandglass_jobs WHERE id = " + id) == "2");

  // Another job's commit mark holds the commit thread, so the requests after it go together.
  const std::uint64_t held = submit_later(
      entry, R"({"kind":"sql","args":{"query":"record","params":["hold"]},"priority":"high","timeout_ms":60000})");
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' AND "
                       "query LIKE '%sandglass_record_commits%'") == "1";
  }, 30s));
  gate.exec("COMMIT");
  // Every run past the gate has asked for its commit point (its insert is done).
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'INSERT INTO ledger%gate%' "
                       "AND state <> 'idle in transaction' AND state <> 'idle'") == "0";
  }, 30s));
  marks.exec("SELECT pg_advisory_unlock(42)");

  REQUIRE(eventually([&] { return terminal(state_of(entry, job)) && terminal(state_of(entry, held)); }, 30s));
  const auto o = record(entry, job);
  CHECK(text(o, "state") == "completed");
  CHECK(o.at("attempt").as_int64() == 2);
  CHECK(c.pg.scalar("SELECT count(*) FROM ledger WHERE note = 'twice?'") == "1");
  CHECK(c.pg.scalar("SELECT count(*) FROM ledger WHERE note = 'hold'") == "1");
  CHECK(metric(runner.port(), "sandglass_cluster_stale_runs_cancelled_total") == 1);
}

}  // TEST_SUITE
