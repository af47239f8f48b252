// Self-fencing (daemon/cluster/heartbeat.cpp, node_lease.hpp, migrations/functions.sql, "Nodes and
// leases"): a node paused beyond its lease has its jobs taken back; when it resumes, its
// heartbeat's answer says lost, and it cancels every run it holds (none is its own any more) and
// joins again as a new incarnation. A ledger written by the `sql` kind at its commit point counts
// the effects: a job past its commit point when the node stopped is not run again, and one before
// it runs to its commit point exactly once, elsewhere.
#include "cluster/cluster_fixture.hpp"
#include "cluster/ledger_queries.hpp"
#include "daemon/cluster/pg_session.hpp"

#include <doctest/doctest.h>

#include <signal.h>

#include <string>
#include <thread>

using namespace sandglass::testing;
using namespace std::chrono_literals;
using sandglass::daemon::cluster::PgSession;

TEST_SUITE("cluster self-fencing") {

TEST_CASE("a node paused for three leases finds its lease lost when it resumes: its stale run is "
          "cancelled, the job past its commit point is not run again, the one before it passes it "
          "once elsewhere, and the node works on as a new incarnation" * doctest::timeout(180)) {
  ClusterFixture c;
  // `gated` inserts its note once it may share the row of `gate`; `slow` inserts its note and its
  // COMMIT takes 3 s (a deferred trigger).
  const std::string queries = ledger_queries(c.pg, {{"gated", "INSERT INTO ledger (note) SELECT $1 FROM gate FOR SHARE"},
                                                    {"slow", "INSERT INTO slow_ledger (note) VALUES ($1)"}}, 3);
  DaemonProcess& entry = c.node({"spin"}, 2, {}, queries);
  DaemonProcess& paused = c.node({"sql", "sleep"}, 2, {}, queries);
  c.pg.execute(
      "CREATE TABLE ledger (note text); CREATE TABLE gate (x int); INSERT INTO gate VALUES (1);"
      "CREATE TABLE slow_ledger (note text);"
      "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
      "  PERFORM pg_sleep(3); RETURN NULL; END $$;"
      "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON slow_ledger DEFERRABLE INITIALLY DEFERRED"
      "  FOR EACH ROW EXECUTE FUNCTION slow_commit();");
  c.log_outcomes();
  const std::string paused_name = ClusterFixture::name_of(paused);
  PgSession gate = PgSession::open(c.pg.conninfo());
  gate.exec("BEGIN");
  gate.exec("SELECT x FROM gate FOR UPDATE");

  const std::uint64_t before = submit_later(
      entry.port(), R"({"kind":"sql","args":{"query":"gated","params":["before"]},"priority":"high","timeout_ms":60000})");
  const std::uint64_t after = submit_later(
      entry.port(), R"({"kind":"sql","args":{"query":"slow","params":["after"]},"priority":"normal","timeout_ms":50000})");
  // `before` waits at the gate, short of its commit point; `after` has passed its commit point
  // and its COMMIT runs.
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                          "query LIKE 'INSERT INTO ledger%'") == "1" &&
           c.pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE query = 'COMMIT' AND state = 'active'") == "1";
  }, 30s));
  CHECK(record(entry.port(), after).at("committed").as_bool());

  // Its sessions carry its incarnation's name.
  const std::string sessions = "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'sandglassd " +
                               paused_name + "/%'";
  CHECK(std::stoi(c.pg.scalar(sessions)) >= 4);  // the heartbeat's, the claimer's, the listener's, ...

  DaemonProcess& heir = c.node({"sql"}, 2, {}, queries);
  paused.signal(SIGSTOP);
  // The other nodes judge it lost and take its jobs: `after` ends node_lost (committed), `before`
  // runs again on the heir and waits at the gate there too.
  REQUIRE(eventually([&] { return state_of(entry.port(), after) == "failed"; }, 30s));
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT attempt || ' ' || node_ran || ' ' || state FROM sandglass_jobs WHERE id = " +
                       std::to_string(before)) == "2 " + ClusterFixture::name_of(heir) + " running";
  }, 30s));
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                          "query LIKE 'INSERT INTO ledger%'") == "2";
  }, 30s));
  // The sweep that judged it lost ended its sessions (its LISTEN among them).
  REQUIRE(eventually([&] { return c.pg.scalar(sessions) == "0"; }, 10s));
  std::this_thread::sleep_for(std::chrono::milliseconds{kLeaseMs});  // the pause: three leases in all
  paused.signal(SIGCONT);

  // Resumed, the node learns it lost its lease and cancels its run of `before` (its statement
  // stops waiting at the gate) instead of running it on beside the heir's.
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                          "query LIKE 'INSERT INTO ledger%'") == "1";
  }, 20s));
  CHECK(metric(paused.port(), "sandglass_cluster_leases_lost_total") == 1);
  CHECK(metric(paused.port(), "sandglass_cluster_fenced_runs_total") >= 1);
  gate.exec("COMMIT");
  REQUIRE(eventually([&] { return state_of(entry.port(), before) == "completed"; }, 30s));

  const auto lost = record(entry.port(), after);
  CHECK(text(lost, "reason") == "node_lost");
  CHECK(lost.at("attempt").as_int64() == 1);
  const auto ran = record(entry.port(), before);
  CHECK(ran.at("attempt").as_int64() == 2);
  CHECK(text(ran, "node") == ClusterFixture::name_of(heir));
  // Each effect once: the committed job's (its COMMIT finished without its node), and the other's
  // from the heir's run only.
  REQUIRE(eventually([&] { return c.pg.scalar("SELECT count(*) FROM slow_ledger") == "1"; }, 10s));
  CHECK(c.pg.scalar("SELECT count(*) FROM ledger WHERE note = 'before'") == "1");
  CHECK(c.pg.scalar("SELECT count(*) FROM outcome_log") == "2");

  // The node works on as a new incarnation of its name: the old one is lost, the new one claims.
  CHECK(c.pg.scalar("SELECT count(*) FILTER (WHERE lost) || '/' || count(*) FROM sandglass_nodes WHERE node = '" +
                    paused_name + "'") == "1/2");
  const std::uint64_t later = submit_later(entry.port(), R"({"kind":"sleep","args":{"ms":10},"priority":"normal","timeout_ms":20000})");
  REQUIRE(eventually([&] { return state_of(entry.port(), later) == "completed"; }, 30s));
  CHECK(text(record(entry.port(), later), "node") == paused_name);
  CHECK(c.pg.scalar("SELECT count(*) FROM ledger WHERE note = 'before'") == "1");
  CHECK(c.pg.scalar("SELECT count(*) FROM slow_ledger") == "1");
}

}  // TEST_SUITE
