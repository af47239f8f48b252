// The cluster's batched statements (daemon/cluster/migrations/functions.sql) called directly
// on a real PostgreSQL migrated by `sandglassd --migrate`: the batch keeps each job's rule
// (admission order, the claim rule, fencing), job by job.
#include "cluster/cluster_fixture.hpp"
#include "cluster/migrated_db.hpp"

#include <doctest/doctest.h>

#include <signal.h>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

// The verdicts of one sandglass_submit_claim call that claims nothing at insert, in the order
// given: "verdict" or "verdict:ID".
std::vector<std::string> submit_many(const MigratedDb& db, const std::string& kinds,
                                     const std::string& priorities, const std::string& keys,
                                     const std::string& remaining_us, const std::string& work_us,
                                     const std::string& tail_us) {
  const auto rows = db.rows(fmt::format(
      "SELECT ord, coalesce(job_id::text, ''), verdict FROM sandglass_submit_claim('n1', 'n1/1', 0, "
      "'{{}}', '{}', array_fill('{{}}'::text, ARRAY[cardinality('{}'::text[])]), '{}', '{}', '{}', '{}', "
      "array_fill(60000000::bigint, ARRAY[cardinality('{}'::text[])]), '{}', '{}', 3600000, "
      "array_fill(false, ARRAY[cardinality('{}'::text[])]), "
      "array_fill(NULL::uuid, ARRAY[cardinality('{}'::text[])])) ORDER BY ord",
      kinds, kinds, priorities, keys, keys, remaining_us, kinds, work_us, tail_us, kinds, kinds));
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r[1].empty() ? r[2] : r[2] + ":" + r[1]);
  return out;
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("a batch of submissions is admitted job by job: each sees the ones before it" *
          doctest::timeout(60)) {
  MigratedDb db{/*workers=*/1, /*capacity=*/6};
  // Six jobs of two kinds and three classes; one key given twice. They are admitted in class
  // order: 2 and 5 (critical), 3 (high), 1 and 4 (normal); 6 carries the key 5 inserted in
  // this very batch: attached, not a second row.
  const auto v = submit_many(db, "{sleep,spin,sleep,spin,sleep,sleep}", "{2,0,1,2,0,2}",
                             "{NULL,NULL,NULL,NULL,k1,k1}", "{9000000,9000000,9000000,9000000,9000000,9000000}",
                             "{10,20,30,40,50,60}", "{0,0,0,0,0,0}");
  REQUIRE(v.size() == 6);
  for (const std::size_t i : {0, 1, 2, 3, 4}) CHECK(v[i].starts_with("admitted:"));
  CHECK(v[5] == "attached:" + v[4].substr(9));
  CHECK(db.pg.scalar("SELECT count(*) FROM sandglass_jobs") == "5");
  // The counters changed once per class, by exactly what was admitted.
  CHECK(db.pg.scalar("SELECT string_agg(priority || ':' || queued || ':' || work_us, ',' ORDER BY priority) "
                     "FROM sandglass_counters") == "0:2:70,1:1:30,2:2:50");

  // One place left. In class order: the critical job would wait behind 70 us of critical work
  // on 1 worker plus its 50 us tail: more than its 100 us; the first high one waits behind
  // 70 + 30 us plus 50 us, within its 200 us, and takes the last place; the second high one
  // sees the queue full.
  const auto w = submit_many(db, "{sleep,spin,sleep}", "{1,1,0}", "{NULL,NULL,NULL}",
                             "{200,120,100}", "{7,0,0}", "{50,50,50}");
  REQUIRE(w.size() == 3);
  CHECK(w[2] == "deadline_implausible");
  CHECK(w[0].starts_with("admitted:"));
  CHECK(w[1] == "queue_full");
  CHECK(db.pg.scalar("SELECT sum(queued) || ':' || sum(work_us) FROM sandglass_counters") == "6:157");
}

TEST_CASE("a claim takes class first then deadline, retires what can no longer finish, and counts it" *
          doctest::timeout(60)) {
  MigratedDb db;
  // Queued rows, by the database's clock: two expired (one of a kind this claimer does not
  // serve), one spin with less time left than spin's tail estimate (30 s), four that can run.
  // (Seconds and minutes apart, so that a slow machine cannot move a row across a line.)
  db.pg.execute(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, work_us, deadline) VALUES"
      " (1, 'sleep', '{}', 2, 1, 5, clock_timestamp() - interval '1 second'),"
      " (2, 'exec', '{}', 0, 1, 5, clock_timestamp() - interval '1 second'),"
      " (3, 'spin', '{}', 1, 1, 5, clock_timestamp() + interval '20 seconds'),"
      " (4, 'sleep', '{}', 2, 1, 5, clock_timestamp() + interval '50 seconds'),"
      " (5, 'spin', '{}', 1, 1, 5, clock_timestamp() + interval '400 seconds'),"
      " (6, 'sleep', '{}', 2, 1, 5, clock_timestamp() + interval '30 seconds'),"
      " (7, 'sleep', '{}', 3, 1, 5, clock_timestamp() + interval '300 seconds'),"
      " (8, 'exec', '{}', 0, 1, 5, clock_timestamp() + interval '300 seconds');"
      "INSERT INTO sandglass_counters VALUES ('n1', 0, 2, 10), ('n1', 1, 2, 10), ('n1', 2, 3, 15),"
      " ('n1', 3, 1, 5)");
  const auto claimed = db.rows(
      "SELECT coalesce(job_id::text, 'retired'), coalesce(attempt, retired) FROM "
      "sandglass_claim('n1/1', 'n1', 3, '{sleep,spin}', '{0,30000000}') ORDER BY job_id NULLS LAST");
  // Class 0: 2 expired (any kind), 8 not served; class 1: 3 too late, 5 claimed; class 2: 1
  // expired, then 6 and 4 claimed. 7 (class 3) waits: three were claimed.
  REQUIRE(claimed.size() == 4);
  CHECK(claimed[0] == std::vector<std::string>{"4", "1"});
  CHECK(claimed[1] == std::vector<std::string>{"5", "1"});
  CHECK(claimed[2] == std::vector<std::string>{"6", "1"});
  CHECK(claimed[3] == std::vector<std::string>{"retired", "3"});
  CHECK(db.pg.scalar("SELECT string_agg(id || ':' || state || ':' || coalesce(reason, '') || ':' || "
                     "coalesce(owner, ''), ',' ORDER BY id) FROM sandglass_jobs") ==
        "1:done:expired_in_queue:,2:done:expired_in_queue:,3:done:too_late_to_start:,"
        "4:running::n1/1,5:running::n1/1,6:running::n1/1,7:queued::,8:queued::");
  // Every row that left the queue left the counters: 8 and 7 remain.
  CHECK(db.pg.scalar("SELECT sum(queued) FROM sandglass_counters") == "2");
  CHECK(db.pg.scalar("SELECT sum(work_us) FROM sandglass_counters") == "10");

  // A claim of zero jobs (the heartbeat's) only retires expired heads.
  db.pg.execute("UPDATE sandglass_jobs SET deadline = clock_timestamp() - interval '1 second' WHERE id = 8");
  const auto zero = db.rows("SELECT job_id, retired FROM sandglass_claim('n1/1', 'n1', 0, '{sleep}', '{0}')");
  REQUIRE(zero.size() == 1);
  CHECK(zero[0] == std::vector<std::string>{"", "1"});
  CHECK(db.pg.scalar("SELECT state || ':' || reason FROM sandglass_jobs WHERE id = 8") == "done:expired_in_queue");
  CHECK(db.pg.scalar("SELECT state FROM sandglass_jobs WHERE id = 7") == "queued");
}

TEST_CASE("a batch of outcomes writes the current owner's and discards a stale owner's or attempt's" *
          doctest::timeout(60)) {
  MigratedDb db;
  db.pg.execute(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, deadline, state, owner, attempt) VALUES"
      " (1, 'sleep', '{}', 0, 1, clock_timestamp() + interval '9 seconds', 'running', 'n1/1', 1),"
      " (2, 'spin', '{}', 2, 1, clock_timestamp() + interval '9 seconds', 'running', 'n1/1', 2),"
      " (3, 'sleep', '{}', 1, 1, clock_timestamp() + interval '9 seconds', 'running', 'n2/7', 1),"
      " (4, 'sleep', '{}', 3, 1, clock_timestamp() + interval '9 seconds', 'running', 'n1/1', 1),"
      " (5, 'spin', '{}', 2, 1, clock_timestamp() + interval '9 seconds', 'done', 'n1/1', 1)");
  // n1/1 writes five outcomes: 1 and 4 are its own; 2 ran as attempt 1 here but the row is at
  // attempt 2 (taken back and claimed again); 3 belongs to another node; 5 already ended.
  const auto written = db.rows(
      "SELECT * FROM sandglass_finish('n1/1', '{1,2,3,4,5}', '{1,1,1,1,1}',"
      " '{completed,completed,failed,cancelled,completed}', '{ok,ok,handler_error,cancelled_while_running,ok}',"
      " '{NULL,NULL,NULL,caller,NULL}', '{f,f,f,t,f}', '{\"r1\",\"r2\",NULL,NULL,\"r5\"}',"
      " '{NULL,NULL,boom,NULL,NULL}', '{1000,2000,3000,4000,5000}', false) ORDER BY 1");
  REQUIRE(written.size() == 2);
  CHECK(written[0][0] == "1");
  CHECK(written[1][0] == "4");
  CHECK(db.pg.scalar("SELECT string_agg(id || ':' || state || ':' || coalesce(outcome_state, '') || ':' || "
                     "coalesce(cause, '') || ':' || committed || ':' || coalesce(result, '') || ':' || "
                     "coalesce(run_us::text, ''), ',' ORDER BY id) FROM sandglass_jobs") ==
        "1:done:completed::false:r1:1000,2:running:::false::,3:running:::false::,"
        "4:done:cancelled:caller:true::4000,5:done:::false::");
}

TEST_CASE("a node counts a stale outcome in a batch and writes the others of the batch" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& n = c.node({"sleep", "spin"}, 4);
  // Four jobs of two kinds and classes that run at once on the node's four workers (long
  // enough that all four run together even on a slow machine).
  std::vector<std::uint64_t> ids;
  const char* bodies[] = {R"({"kind":"sleep","args":{"ms":2000},"priority":"high"})",
                          R"({"kind":"spin","args":{"ms":2000},"priority":"normal"})",
                          R"({"kind":"sleep","args":{"ms":2000},"priority":"sheddable"})",
                          R"({"kind":"sleep","args":{"ms":2000},"priority":"critical"})"};
  for (const char* body : bodies) {
    const HttpAnswer a = post_job(n.port(), body, {}, "?wait=false");
    REQUIRE(a.status == 202);
    ids.push_back(json_of(a).at("id").to_number<std::uint64_t>());
  }
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'running'") == "4";
  }));
  // While they run, the second job is taken from the node (as a sweep and another node's claim
  // would): its outcome from this node is stale. The other owner is a live node, so no sweep
  // takes the job back from it.
  c.pg.execute("INSERT INTO sandglass_nodes (owner, node, workers, capacity, heartbeat_at) "
               "VALUES ('elsewhere/1', 'elsewhere', 1, 1, 'infinity')");
  c.pg.execute(fmt::format("UPDATE sandglass_jobs SET owner = 'elsewhere/1', attempt = 2 WHERE id = {}", ids[1]));
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'done'") == "3";
  }));
  REQUIRE(eventually([&] { return metric(n.port(), "sandglass_cluster_stale_outcomes_total") == 1; }));
  CHECK(c.pg.scalar(fmt::format("SELECT state || ':' || owner FROM sandglass_jobs WHERE id = {}", ids[1])) ==
        "running:elsewhere/1");
  CHECK(c.pg.scalar("SELECT string_agg(outcome_state, ',') FROM sandglass_jobs WHERE state = 'done'") ==
        "completed,completed,completed");
}

}  // TEST_SUITE
