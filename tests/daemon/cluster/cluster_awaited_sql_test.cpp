// The statements of migrations/functions.sql, "Announced outcomes" called directly on a
// real PostgreSQL migrated by `sandglassd --migrate`: a submission marks the jobs someone waits
// for and records the waiting nodes; an outcome is announced only when its job is awaited, on
// the channels of the nodes waiting for it (on sandglass_outcome when no node is recorded), or
// when its exchange shares its run times, on sandglass_outcome; a cancel only on its owner's
// cancel channel.
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

// Running sleep jobs `from`..`to` of owner n1/1, attempt 1, none awaited yet.
void running(const MigratedDb& db, int from, int to) {
  db.pg.execute(fmt::format(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, deadline, state, owner, attempt, awaited) "
      "SELECT g, 'sleep', '{{}}', g % 4, 1, clock_timestamp() + interval '90 seconds', 'running', 'n1/1', 1, false "
      "FROM generate_series({}, {}) g", from, to));
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

TEST_CASE("an outcome is announced on the channels of the nodes waiting for it, a cancel on its "
          "owner's cancel channel, run-time samples on the shared channel" * doctest::timeout(120)) {
  MigratedDb db;
  OutcomeListener shared{db.pg};
  OutcomeListener to_a{db.pg, node_channel(db.pg, "outcome", "node a")};
  OutcomeListener to_b{db.pg, node_channel(db.pg, "outcome", "node b")};
  OutcomeListener to_c{db.pg, node_channel(db.pg, "outcome", "node c")};
  NotifyListener cancels_n1{db.pg, node_channel(db.pg, "cancel", "n1/1")};
  NotifyListener cancels_n2{db.pg, node_channel(db.pg, "cancel", "n2/1")};
  // Any name gives an identifier LISTEN takes unquoted, within 63 bytes.
  const std::string long_name(300, 'X');
  CHECK(node_channel(db.pg, "outcome", long_name).size() <= 63);
  CHECK(db.pg.scalar("SELECT sandglass_channel('cancel', 'a \"quoted\" name; LISTEN x') "
                     "~ '^sandglass_cancel_[0-9a-f]{32}$'") == "t");

  running(db, 1, 8);
  // 1, 2 awaited by node a; 2, 3 by node b (2 twice by b: recorded once); 4 by nobody.
  db.pg.execute("SELECT sandglass_await('{1,2}', 'node a')");
  db.pg.execute("SELECT sandglass_await('{2,3}', 'node b')");
  db.pg.execute("SELECT sandglass_await('{2}', 'node b')");
  CHECK(db.pg.scalar("SELECT string_agg(id || ':' || awaited || ':' || coalesce(array_to_string(awaited_by, '+'), '-'), "
                     "',' ORDER BY id) FROM sandglass_jobs WHERE id <= 4") ==
        "1:true:node a,2:true:node a+node b,3:true:node b,4:false:-");
  CHECK(exchange(db, "{1,2,3,4}", 4, false) == "1:true,2:true,3:true,4:false");
  CHECK(sorted(to_a.announced()) == std::vector<std::uint64_t>{1, 2});
  CHECK(sorted(to_b.announced()) == std::vector<std::uint64_t>{2, 3});
  CHECK(to_c.announced().empty());
  CHECK(shared.announced().empty());

  // Shared run times: every outcome of the exchange on sandglass_outcome once, awaited or not,
  // and nothing on the nodes' channels (they listen to sandglass_outcome too).
  db.pg.execute("SELECT sandglass_await('{5}', 'node a')");
  CHECK(exchange(db, "{5,6}", 2, true) == "5:true,6:true");
  CHECK(sorted(shared.announced()) == std::vector<std::uint64_t>{5, 6});
  CHECK(to_a.announced().empty());

  // An awaited row that names no node (no function recorded one) goes to sandglass_outcome.
  db.pg.execute("UPDATE sandglass_jobs SET awaited = true WHERE id = 7");
  CHECK(exchange(db, "{7,8}", 2, false) == "7:true,8:false");
  CHECK(shared.announced() == std::vector<std::uint64_t>{7});

  // Ended in the database (sandglass_end): expired at a claim, cancelled in the queue.
  db.pg.execute(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, deadline, awaited, awaited_by) VALUES"
      " (10, 'sleep', '{}', 1, 1, clock_timestamp() - interval '1 second', true, '{node c}'),"
      " (11, 'sleep', '{}', 2, 1, clock_timestamp() - interval '1 second', false, NULL),"
      " (12, 'spin', '{}', 1, 1, clock_timestamp() + interval '90 seconds', true, '{node b}'),"
      " (13, 'spin', '{}', 1, 1, clock_timestamp() + interval '90 seconds', false, NULL)");
  CHECK(db.pg.scalar("SELECT retired FROM sandglass_claim('n1/1', 'n1', 0, '{sleep}', '{0}') "
                     "WHERE retired > 0") == "2");
  CHECK(to_c.announced() == std::vector<std::uint64_t>{10});
  CHECK(db.pg.scalar("SELECT sandglass_cancel('n1', 12)") == "ended");
  CHECK(db.pg.scalar("SELECT sandglass_cancel('n1', 13)") == "ended");
  CHECK(to_b.announced() == std::vector<std::uint64_t>{12});
  CHECK(to_a.announced().empty());
  CHECK(shared.announced().empty());

  // A running job's cancel: on its owner's incarnation channel only, "ID OWNER".
  db.pg.execute(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, deadline, state, owner, attempt) "
      "VALUES (20, 'sleep', '{}', 1, 1, clock_timestamp() + interval '90 seconds', 'running', 'n2/1', 1)");
  CHECK(db.pg.scalar("SELECT sandglass_cancel('n1', 20)") == "signalled");
  CHECK(cancels_n2.payloads() == std::vector<std::string>{"20 n2/1"});
  CHECK(cancels_n1.payloads().empty());
}

TEST_CASE("a submission records the node of a waiting submitter in the jobs it inserts or attaches "
          "to" * doctest::timeout(120)) {
  MigratedDb db;
  OutcomeListener to_n1{db.pg, node_channel(db.pg, "outcome", "n1")};
  // sandglass_submit_claim by n1 (claims nothing) of sleep jobs: unkeyed waiting, unkeyed not,
  // keyed waiting, keyed not, and a waiting retry of the last one in the same batch.
  CHECK(db.pg.scalar(
            "SELECT string_agg(verdict || ':' || job_id, ',' ORDER BY ord) FROM sandglass_submit_claim("
            "'n1', 'n1/1', 0, '{sleep}', array_fill('sleep'::text, ARRAY[5]), array_fill('{}'::text, ARRAY[5]), "
            "array_fill(1::smallint, ARRAY[5]), '{NULL,NULL,k1,k2,k2}', '{NULL,NULL,fp,fp,fp}', "
            "array_fill(60000000::bigint, ARRAY[5]), array_fill(60000000::bigint, ARRAY[5]), "
            "array_fill(0::bigint, ARRAY[5]), array_fill(0::bigint, ARRAY[5]), 3600000, '{t,f,t,f,t}', "
            "array_fill(NULL::uuid, ARRAY[5]))") ==
        "admitted:1,admitted:2,admitted:3,admitted:4,attached:4");
  CHECK(db.pg.scalar("SELECT string_agg(id || ':' || coalesce(array_to_string(awaited_by, '+'), '-'), ',' "
                     "ORDER BY id) FROM sandglass_jobs") == "1:n1,2:-,3:n1,4:n1");
  db.pg.execute("UPDATE sandglass_jobs SET state = 'running', owner = 'n1/1', attempt = 1");
  CHECK(exchange(db, "{1,2,3,4}", 4, false) == "1:true,2:false,3:true,4:true");
  CHECK(sorted(to_n1.announced()) == std::vector<std::uint64_t>{1, 3, 4});
}

}  // TEST_SUITE
