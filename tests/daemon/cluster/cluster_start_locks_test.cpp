// A node's start applies the cluster's functions only when they changed
// (daemon/cluster/migrations.hpp): with the functions current it takes no lock on
// sandglass_nodes, so it never holds back a peer's heartbeat; `--migrate` still applies
// everything. A test session holds the lock a heartbeat's UPDATE takes (ROW EXCLUSIVE), which
// the functions file's CREATE OR REPLACE TRIGGER would wait for (and the peers' beats behind it).
#include "cluster/cluster_fixture.hpp"
#include "cluster/migrated_db.hpp"
#include "daemon/cluster/migrations.hpp"
#include "daemon/cluster/pg_session.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace sandglass::testing;
using namespace std::chrono_literals;
using sandglass::daemon::cluster::ApplyFunctions;
using sandglass::daemon::cluster::migrate;
using sandglass::daemon::cluster::MigrationReport;
using sandglass::daemon::cluster::PgError;
using sandglass::daemon::cluster::PgSession;

TEST_SUITE("cluster") {

TEST_CASE("a start with the functions current takes no lock a heartbeat holds, changed functions are "
          "applied, and --migrate applies them always" * doctest::timeout(120)) {
  MigratedDb db;
  PgSession beat = PgSession::open(db.pg.conninfo());
  beat.exec("BEGIN");
  beat.exec("LOCK TABLE sandglass_nodes IN ROW EXCLUSIVE MODE");  // as a heartbeat's UPDATE
  PgSession starting = PgSession::open(db.pg.conninfo(), {.lock = 500ms});

  MigrationReport r = migrate(starting);
  CHECK(r.applied.empty());
  CHECK_FALSE(r.functions_applied);
  // --migrate applies the functions: it waits for the heartbeat's lock (gives up at lock_timeout).
  CHECK_THROWS_AS(migrate(starting, ApplyFunctions::always), PgError);
  beat.exec("COMMIT");

  // Functions that are not this binary's (another sandglassd applied its own) are applied at a
  // start; the next start finds them current.
  db.pg.execute("UPDATE sandglass_functions_applied SET checksum = 'other'");
  CHECK(migrate(starting).functions_applied);
  CHECK_FALSE(migrate(starting).functions_applied);
  CHECK(migrate(starting, ApplyFunctions::always).functions_applied);
}

TEST_CASE("a node starts while a peer beats and a session holds the heartbeat's lock on the node "
          "rows: nobody waits" * doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& first = c.node({"sleep"});
  PgSession beat = PgSession::open(c.pg.conninfo());
  beat.exec("BEGIN");
  beat.exec("LOCK TABLE sandglass_nodes IN ROW EXCLUSIVE MODE");
  const std::string beaten = "SELECT heartbeat_at FROM sandglass_nodes WHERE node = '" +
                             ClusterFixture::name_of(first) + "'";
  const std::string before = c.pg.scalar(beaten);
  DaemonProcess& second = c.node({"sleep"});  // reports its port once its cluster node started
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_nodes WHERE node = '" + ClusterFixture::name_of(second) +
                    "'") == "1");
  CHECK(eventually([&] { return c.pg.scalar(beaten) != before; }, 10s));
  CHECK(c.pg.scalar("SELECT count(*) FROM pg_locks l JOIN pg_class t ON t.oid = l.relation "
                    "WHERE t.relname = 'sandglass_nodes' AND NOT l.granted") == "0");
  beat.exec("COMMIT");
  const HttpAnswer done = post_job(second.port(), R"({"kind":"sleep","args":{"ms":1},"timeout_ms":10000})");
  CHECK(done.status == 200);
}

}  // TEST_SUITE
