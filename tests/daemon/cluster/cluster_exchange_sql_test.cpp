// The exchange and the claims at insert (daemon/cluster/migrations/functions.sql) called directly
// on a real PostgreSQL migrated by `sandglassd --migrate`: outcomes and a claim in one statement
// keep the fencing and the claim rule; a claim at insert takes only what the claim rule would.
#include "cluster/migrated_db.hpp"

#include <doctest/doctest.h>

using namespace sandglass::testing;

namespace {

// The rows of one sandglass_submit_claim call by node n1 (owner n1/1, serving sleep), in the
// order given: "verdict" or "verdict:ID". Unkeyed jobs with 60 s of budget and no estimates.
std::vector<std::string> submit_claim(const MigratedDb& db, int claim, const std::string& kinds,
                                      const std::string& priorities, const std::string& keys,
                                      const std::string& remaining_us) {
  const auto rows = db.rows(fmt::format(
      "SELECT coalesce(job_id::text, ''), verdict, remaining_us IS NOT NULL FROM "
      "sandglass_submit_claim('n1', 'n1/1', {}, '{{sleep}}', '{}', "
      "array_fill('{{}}'::text, ARRAY[cardinality('{}'::text[])]), '{}', '{}', '{}', '{}', "
      "array_fill(60000000::bigint, ARRAY[cardinality('{}'::text[])]), "
      "array_fill(7::bigint, ARRAY[cardinality('{}'::text[])]), "
      "array_fill(0::bigint, ARRAY[cardinality('{}'::text[])]), 3600000, "
      "array_fill(true, ARRAY[cardinality('{}'::text[])]), "
      "array_fill(NULL::uuid, ARRAY[cardinality('{}'::text[])])) ORDER BY ord",
      claim, kinds, kinds, priorities, keys, keys, remaining_us, kinds, kinds, kinds, kinds, kinds));
  std::vector<std::string> out;
  for (const auto& r : rows) {
    CHECK((r[1] == "claimed") == (r[2] == "t"));  // a claimed job comes with its time left
    out.push_back(r[0].empty() ? r[1] : r[1] + ":" + r[0]);
  }
  return out;
}

// "id:state:owner:attempt" of every row, by id.
std::string job_states(const MigratedDb& db) {
  return db.pg.scalar("SELECT string_agg(id || ':' || state || ':' || coalesce(owner, '') || ':' || "
                      "attempt, ',' ORDER BY id) FROM sandglass_jobs");
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("outcomes and a claim in one statement: only the current owner's outcomes are written, "
          "and the claim keeps its rule" * doctest::timeout(120)) {
  MigratedDb db;
  db.pg.execute(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, work_us, deadline, state, owner, "
      "attempt) VALUES"
      " (1, 'sleep', '{}', 0, 1, 5, clock_timestamp() + interval '90 seconds', 'running', 'n1/1', 1),"
      " (2, 'sleep', '{}', 2, 1, 5, clock_timestamp() + interval '90 seconds', 'running', 'n1/1', 2),"
      " (3, 'sleep', '{}', 1, 1, 5, clock_timestamp() + interval '90 seconds', 'running', 'n2/7', 1),"
      " (4, 'sleep', '{}', 2, 1, 5, clock_timestamp() + interval '90 seconds', 'done', 'n1/1', 1),"
      // queued: expired (retired), two runnable of class 2 and 1, one of a kind not served
      " (5, 'sleep', '{}', 0, 1, 5, clock_timestamp() - interval '1 second', 'queued', NULL, 0),"
      " (6, 'sleep', '{}', 2, 1, 5, clock_timestamp() + interval '300 seconds', 'queued', NULL, 0),"
      " (7, 'sleep', '{}', 1, 1, 5, clock_timestamp() + interval '400 seconds', 'queued', NULL, 0),"
      " (8, 'spin', '{}', 0, 1, 5, clock_timestamp() + interval '300 seconds', 'queued', NULL, 0),"
      " (9, 'sleep', '{}', 2, 1, 5, clock_timestamp() + interval '500 seconds', 'queued', NULL, 0);"
      "INSERT INTO sandglass_counters VALUES ('n1', 0, 2, 10), ('n1', 1, 1, 5), ('n1', 2, 2, 10)");
  // n1/1 sends four outcomes (1 its own; 2 ran as attempt 1, the row is at attempt 2; 3 is
  // another node's; 4 ended already) and claims two.
  const auto rows = db.rows(
      "SELECT coalesce(written::text, ''), coalesce(job_id::text, ''), coalesce(attempt::text, ''), "
      "coalesce(retired::text, '') FROM sandglass_finish_claim('n1/1', 'n1', '{1,2,3,4}', '{1,1,1,1}',"
      " '{completed,completed,completed,completed}', '{ok,ok,ok,ok}', '{NULL,NULL,NULL,NULL}',"
      " '{f,f,f,f}', '{r1,r2,r3,r4}', '{NULL,NULL,NULL,NULL}', '{10,20,30,40}', 2, '{sleep}', '{0}', true) "
      "ORDER BY 1, 2");
  std::vector<std::string> seen;
  for (const auto& r : rows) seen.push_back(r[0] + "/" + r[1] + "/" + r[2] + "/" + r[3]);
  // Written: 1 only. Claimed: 7 (class 1), then 6 (class 2, earlier than 9); 5 retired.
  CHECK(seen == std::vector<std::string>{"///1", "/6/1/0", "/7/1/0", "1///"});
  CHECK(job_states(db) ==
        "1:done:n1/1:1,2:running:n1/1:2,3:running:n2/7:1,4:done:n1/1:1,5:done::0,6:running:n1/1:1,"
        "7:running:n1/1:1,8:queued::0,9:queued::0");
  CHECK(db.pg.scalar("SELECT result || ':' || run_us FROM sandglass_jobs WHERE id = 1") == "r1:10");
  CHECK(db.pg.scalar("SELECT reason FROM sandglass_jobs WHERE id = 5") == "expired_in_queue");
  CHECK(db.pg.scalar("SELECT string_agg(priority || ':' || queued, ',' ORDER BY priority) "
                     "FROM sandglass_counters") == "0:1,1:0,2:1");

  SUBCASE("a limit of 0 writes the outcomes and claims nothing, not even expired heads") {
    db.pg.execute("UPDATE sandglass_jobs SET deadline = clock_timestamp() - interval '1 second' WHERE id = 9");
    const auto only = db.rows(
        "SELECT written FROM sandglass_finish_claim('n1/1', 'n1', '{6}', '{1}', '{failed}', "
        "'{handler_error}', '{NULL}', '{f}', '{NULL}', '{boom}', '{5}', 0, '{sleep}', '{0}', true)");
    REQUIRE(only.size() == 1);
    CHECK(only[0][0] == "6");
    CHECK(db.pg.scalar("SELECT state FROM sandglass_jobs WHERE id = 9") == "queued");
    CHECK(db.pg.scalar("SELECT outcome_state || ':' || error FROM sandglass_jobs WHERE id = 6") == "failed:boom");
  }
}

// Each SUBCASE runs the case again from the top: a PostgreSQL and a migration each.
TEST_CASE("a claim at insert takes only jobs ahead of every queued job the node serves, within its "
          "limit, and never counts them as queued" * doctest::timeout(240)) {
  MigratedDb db;
  // The queue's head for sleep: class 2, 50 s left (the spin job ahead of it is not served).
  db.pg.execute(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, work_us, deadline) VALUES"
      " (1, 'sleep', '{}', 2, 1, 7, clock_timestamp() + interval '50 seconds'),"
      " (2, 'spin', '{}', 0, 1, 7, clock_timestamp() + interval '50 seconds');"
      "INSERT INTO sandglass_counters VALUES ('n1', 0, 1, 7), ('n1', 2, 1, 7);"
      "SELECT setval('sandglass_jobs_id_seq', 10)");

  SUBCASE("ahead by class or by deadline: claimed; behind, not served or keyed: queued") {
    // In claim order: 11 (class 1), 12 (class 2, 10 s), then 13 (class 2, 100 s) is behind the
    // head; 14 is spin; 15 is keyed (never claimed at insert) but class 3.
    const auto v = submit_claim(db, 3, "{sleep,sleep,sleep,spin,sleep}", "{1,2,2,0,3}",
                                "{NULL,NULL,NULL,NULL,k1}",
                                "{100000000,10000000,100000000,9000000,9000000}");
    REQUIRE(v.size() == 5);
    CHECK(v[0].starts_with("claimed:"));
    CHECK(v[1].starts_with("claimed:"));
    CHECK(v[2].starts_with("admitted:"));
    CHECK(v[3].starts_with("admitted:"));
    CHECK(v[4].starts_with("admitted:"));
    CHECK(db.pg.scalar("SELECT string_agg(kind || ':' || priority || ':' || state || ':' || "
                       "coalesce(owner, '') || ':' || attempt || ':' || coalesce(node_ran, ''), ',' "
                       "ORDER BY priority, deadline) FROM sandglass_jobs WHERE id > 10") ==
          "spin:0:queued::0:,sleep:1:running:n1/1:1:n1,sleep:2:running:n1/1:1:n1,"
          "sleep:2:queued::0:,sleep:3:queued::0:");
    // Only the three queued ones entered the counters (7 us of work each).
    CHECK(db.pg.scalar("SELECT string_agg(priority || ':' || q || ':' || w, ',' ORDER BY priority) FROM "
                       "(SELECT priority, sum(queued) AS q, sum(work_us) AS w FROM sandglass_counters "
                       "GROUP BY priority) c") == "0:2:14,2:2:14,3:1:7");
    // A submission counts in its node's admissions' rows, apart from the claims' rows.
    CHECK(db.pg.scalar("SELECT string_agg(node || ':' || priority || ':' || queued, ',' ORDER BY priority) "
                       "FROM sandglass_counters WHERE intake") == "n1:0:1,n1:2:1,n1:3:1");
  }

  SUBCASE("no more than the limit, earliest first") {
    const auto v = submit_claim(db, 1, "{sleep,sleep}", "{2,1}", "{NULL,NULL}", "{20000000,30000000}");
    REQUIRE(v.size() == 2);
    CHECK(v[0].starts_with("admitted:"));
    CHECK(v[1].starts_with("claimed:"));  // class 1 comes first
  }

  SUBCASE("a keyed job queued by the same batch ahead of the others blocks their claims") {
    const auto v = submit_claim(db, 3, "{sleep,sleep}", "{0,1}", "{k2,NULL}", "{20000000,30000000}");
    REQUIRE(v.size() == 2);
    CHECK(v[0].starts_with("admitted:"));
    CHECK(v[1].starts_with("admitted:"));
  }

  SUBCASE("a limit of 0 claims nothing") {
    const auto v = submit_claim(db, 0, "{sleep}", "{0}", "{NULL}", "{20000000}");
    REQUIRE(v.size() == 1);
    CHECK(v[0].starts_with("admitted:"));
  }

  SUBCASE("with nothing queued that it serves, a job of any class is claimed") {
    db.pg.execute("UPDATE sandglass_jobs SET state = 'done' WHERE id = 1");
    const auto v = submit_claim(db, 8, "{sleep}", "{3}", "{NULL}", "{20000000}");
    REQUIRE(v.size() == 1);
    CHECK(v[0].starts_with("claimed:"));
  }
}

}  // TEST_SUITE
