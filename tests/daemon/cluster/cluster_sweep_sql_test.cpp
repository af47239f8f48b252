// sandglass_sweep (migrations/functions.sql) called directly on a real PostgreSQL migrated by
// `sandglassd --migrate`: the counters of node names that no node row holds any more are folded
// into one row per class, with the sums that admission reads unchanged.
#include "cluster/migrated_db.hpp"

#include <doctest/doctest.h>

using namespace sandglass::testing;

TEST_SUITE("cluster") {

TEST_CASE("a sweep folds the counters of departed node names into one row per class" *
          doctest::timeout(120)) {
  MigratedDb db;
  // n1 may sweep: its row is fresh and has beaten without a gap since the server started, for
  // longer than the 1 ms lease it states.
  db.pg.execute("UPDATE sandglass_nodes SET beating_since = pg_postmaster_start_time(), lease_ms = 1, "
                "heartbeat_at = clock_timestamp() + interval '1 hour' WHERE owner = 'n1/1'");
  db.pg.execute("INSERT INTO sandglass_counters (node, priority, queued, work_us) VALUES "
                "('n1', 2, 3, 30), ('gone-a', 0, 2, 20), ('gone-a', 2, -1, -10), ('gone-b', 2, 4, 40), "
                "('', 2, 1, 5)");
  const std::string sums = "SELECT string_agg(priority || ':' || q || ':' || w, ',' ORDER BY priority) FROM "
                           "(SELECT priority, sum(queued) AS q, sum(work_us) AS w FROM sandglass_counters "
                           "GROUP BY priority) s";
  CHECK(db.pg.scalar(sums) == "0:2:20,2:7:65");

  CHECK(db.pg.scalar("SELECT requeued || ':' || lost FROM sandglass_sweep('n1/1', 'n1', 1, '{}', '{}')") == "0:0");
  CHECK(db.pg.scalar("SELECT string_agg(node || '/' || priority || ':' || queued || ':' || work_us, ',' "
                     "ORDER BY node, priority) FROM sandglass_counters") == "/0:2:20,/2:4:35,n1/2:3:30");
  CHECK(db.pg.scalar(sums) == "0:2:20,2:7:65");
}

}  // TEST_SUITE
