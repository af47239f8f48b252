// sandglass_claim (migrations/functions.sql) called directly on a real PostgreSQL migrated by
// `sandglassd --migrate`: the claim reads the queue per kind it serves, so queued jobs of other
// kinds cost it nothing, and it passes over the rows another claimer holds to the next ones.
#include "cluster/held_session.hpp"
#include "cluster/migrated_db.hpp"

#include <doctest/doctest.h>

using namespace sandglass::testing;

namespace {

// Claims of node n1 (owner n1/1, serving sleep) in one session of their own.
std::string claim_sleep(HeldSession& s, int limit) {
  return s.scalar(fmt::format(
      "SELECT coalesce(string_agg(coalesce(job_id::text, 'retired ' || retired), ',' ORDER BY job_id), '') "
      "FROM sandglass_claim('n1/1', 'n1', {}, '{{sleep}}', '{{0}}')",
      limit));
}

}  // namespace

TEST_SUITE("cluster") {

// pg_stat_get_xact_tuples_returned counts the index entries this transaction's scans returned.
TEST_CASE("a claim reads none of the queued jobs of kinds it does not serve" * doctest::timeout(120)) {
  MigratedDb db;
  db.pg.execute(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, work_us, deadline) "
      "SELECT g, 'exec', '{}', (g % 3)::smallint, 60000000, 5, clock_timestamp() + (30 + g % 30) * interval '1 second' "
      "FROM generate_series(1, 300) g");
  db.pg.execute(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, work_us, deadline) VALUES "
      "(301, 'sleep', '{}', 3, 60000000, 5, clock_timestamp() + interval '90 s'),"
      "(302, 'sleep', '{}', 3, 60000000, 5, clock_timestamp() + interval '80 s'),"
      "(303, 'sleep', '{}', 3, 60000000, 5, clock_timestamp() + interval '70 s')");
  db.pg.execute("ANALYZE sandglass_jobs");
  db.pg.execute("UPDATE sandglass_hunger SET hungry = false");  // a node with a backlog

  HeldSession s{db.pg.conninfo()};
  s.exec("BEGIN");
  CHECK(claim_sleep(s, 2) == "302,303");  // class 3 after every exec job, earliest deadline first
  CHECK(s.scalar("SELECT pg_stat_get_xact_tuples_returned('sandglass_jobs_queue'::regclass)") == "0");
  s.exec("COMMIT");
  CHECK(db.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'queued'") == "301");
}

TEST_CASE("a claim passes over the rows another claimer holds and takes the next ones in claim "
          "order" * doctest::timeout(120)) {
  MigratedDb db;
  db.pg.execute(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, work_us, deadline) "
      "SELECT g, 'sleep', '{}', 2, 60000000, 5, clock_timestamp() + (60 + g) * interval '1 second' "
      "FROM generate_series(1, 6) g");
  db.pg.execute("UPDATE sandglass_hunger SET hungry = false");
  HeldSession other{db.pg.conninfo()};
  other.exec("BEGIN");
  other.exec("SELECT * FROM sandglass_jobs WHERE id IN (1, 2, 4) FOR UPDATE");

  HeldSession s{db.pg.conninfo()};
  CHECK(claim_sleep(s, 2) == "3,5");
  CHECK(claim_sleep(s, 5) == "6");  // 1, 2 and 4 are held: the one left
  other.exec("COMMIT");
  CHECK(claim_sleep(s, 5) == "1,2,4");
  CHECK(db.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'running'") == "6");
}

}  // TEST_SUITE
