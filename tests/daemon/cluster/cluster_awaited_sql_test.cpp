// The statements of migrations/functions.sql, "Announced outcomes" called directly on a
// real PostgreSQL migrated by `sandglassd --migrate`: a submission marks the jobs someone waits
// for, and an outcome is announced on sandglass_outcome only when its job is awaited or its
// exchange shares its run times.
#include "cluster/migrated_db.hpp"
#include "cluster/outcome_listener.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace sandglass::testing;

namespace {

// "id:awaited" of every row, by id.
std::string awaited(const MigratedDb& db) {
  return db.pg.scalar("SELECT string_agg(id || ':' || awaited, ',' ORDER BY id) FROM sandglass_jobs");
}

// One sandglass_submit_claim call by n1 (claims nothing) of sleep jobs with these keys and
// waits; the verdicts in order, "verdict:ID".
std::string submit(const MigratedDb& db, const std::string& keys, const std::string& waits) {
  return db.pg.scalar(fmt::format(
      "SELECT string_agg(verdict || ':' || job_id, ',' ORDER BY ord) FROM sandglass_submit_claim("
      "'n1', 'n1/1', 0, '{{sleep}}', array_fill('sleep'::text, ARRAY[cardinality('{0}'::text[])]), "
      "array_fill('{{}}'::text, ARRAY[cardinality('{0}'::text[])]), "
      "array_fill(1::smallint, ARRAY[cardinality('{0}'::text[])]), '{0}', "
      "(SELECT array_agg(CASE WHEN k IS NULL THEN NULL ELSE 'fp' END) FROM unnest('{0}'::text[]) k), "
      "array_fill(60000000::bigint, ARRAY[cardinality('{0}'::text[])]), "
      "array_fill(60000000::bigint, ARRAY[cardinality('{0}'::text[])]), "
      "array_fill(0::bigint, ARRAY[cardinality('{0}'::text[])]), "
      "array_fill(0::bigint, ARRAY[cardinality('{0}'::text[])]), 3600000, '{1}', "
      "array_fill(NULL::uuid, ARRAY[cardinality('{0}'::text[])]))",
      keys, waits));
}

// The outcomes of jobs `ids` (attempt 1, owner n1/1) written by one exchange of n1 that claims
// nothing, sharing its run times or not: "id:notified" of each written.
std::string exchange(const MigratedDb& db, const std::string& ids, int n, bool share) {
  return db.pg.scalar(fmt::format(
      "SELECT string_agg(written || ':' || notified, ',' ORDER BY written) FROM sandglass_finish_claim("
      "'n1/1', 'n1', '{}', array_fill(1, ARRAY[{}]), array_fill('completed'::text, ARRAY[{}]), "
      "array_fill('ok'::text, ARRAY[{}]), array_fill(NULL::text, ARRAY[{}]), array_fill(false, ARRAY[{}]), "
      "array_fill(NULL::text, ARRAY[{}]), array_fill(NULL::text, ARRAY[{}]), array_fill(7::bigint, ARRAY[{}]), "
      "0, '{{sleep}}', '{{0}}', {}) WHERE written IS NOT NULL",
      ids, n, n, n, n, n, n, n, n, share));
}

std::vector<std::uint64_t> sorted(std::vector<std::uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("a submission marks a job awaited when its submitter waits, or a waiting keyed retry "
          "attaches to it, never unmarks one" * doctest::timeout(120)) {
  MigratedDb db;
  CHECK(submit(db, "{NULL,NULL,k1,k2,k3,k3}", "{t,f,f,t,f,t}") ==
        "admitted:1,admitted:2,admitted:3,admitted:4,admitted:5,attached:5");
  // 1 waits; 2 does not; keyed 3 does not, 4 does; 5's submitter does not, but the retry of
  // the same batch that attached to it does.
  CHECK(awaited(db) == "1:true,2:false,3:false,4:true,5:true");
  // Retries: k1 with a waiter marks 3; k2 without one leaves 4 awaited.
  CHECK(submit(db, "{k1,k2}", "{t,f}") == "attached:3,attached:4");
  CHECK(awaited(db) == "1:true,2:false,3:true,4:true,5:true");
  // A retry that attaches to a job that is over marks it too (harmless: it announces nothing
  // more), and the node reads the record, which is terminal.
  db.pg.execute("UPDATE sandglass_jobs SET state = 'done', outcome_state = 'completed', awaited = false WHERE id = 3");
  CHECK(submit(db, "{k1}", "{t}") == "attached:3");
  CHECK(db.pg.scalar("SELECT awaited FROM sandglass_jobs WHERE id = 3") == "t");
}

TEST_CASE("an exchange announces the outcomes someone waits for, and all it writes when it shares "
          "its run times, retired and cancelled jobs are announced only when awaited" *
          doctest::timeout(120)) {
  MigratedDb db;
  OutcomeListener heard{db.pg};
  db.pg.execute(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, deadline, state, owner, attempt, awaited) "
      "SELECT g, 'sleep', '{}', 1, 1, clock_timestamp() + interval '90 seconds', 'running', 'n1/1', 1, g % 2 = 0 "
      "FROM generate_series(1, 8) g");
  // Not shared: only 2 and 4 (awaited) are announced; 1 and 3 are written all the same.
  CHECK(exchange(db, "{1,2,3,4}", 4, false) == "1:false,2:true,3:false,4:true");
  CHECK(sorted(heard.announced()) == std::vector<std::uint64_t>{2, 4});
  // Shared: every outcome written, awaited or not.
  CHECK(exchange(db, "{5,6,7}", 3, true) == "5:true,6:true,7:true");
  CHECK(sorted(heard.announced()) == std::vector<std::uint64_t>{5, 6, 7});
  // A stale outcome (job 1 is over) is neither written nor announced.
  CHECK(exchange(db, "{1}", 1, true).empty());
  CHECK(heard.announced().empty());

  // Retired at a claim (expired in the queue): 11 is awaited, 10 is not.
  db.pg.execute(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, deadline, awaited) VALUES"
      " (10, 'sleep', '{}', 1, 1, clock_timestamp() - interval '1 second', false),"
      " (11, 'sleep', '{}', 1, 1, clock_timestamp() - interval '1 second', true),"
      " (12, 'spin', '{}', 1, 1, clock_timestamp() + interval '90 seconds', false),"
      " (13, 'spin', '{}', 1, 1, clock_timestamp() + interval '90 seconds', true)");
  CHECK(db.pg.scalar("SELECT retired FROM sandglass_claim('n1/1', 'n1', 0, '{sleep}', '{0}') "
                     "WHERE retired > 0") == "2");
  CHECK(heard.announced() == std::vector<std::uint64_t>{11});
  // Cancelled in the queue (sandglass_end): 13 is awaited, 12 is not.
  CHECK(db.pg.scalar("SELECT sandglass_cancel('n1', 12)") == "ended");
  CHECK(db.pg.scalar("SELECT sandglass_cancel('n1', 13)") == "ended");
  CHECK(heard.announced() == std::vector<std::uint64_t>{13});
}

}  // TEST_SUITE
