// The NOTIFYs of migrations/functions.sql, "Announced outcomes", called directly on a real
// PostgreSQL migrated by `sandglassd --migrate`: an outcome is announced on the channels of the
// nodes waiting for its job only (sandglass_await records them), on sandglass_outcome when its
// exchange shares its run times or when no waiting node is recorded; a cancel only on its
// owner's cancel channel.
#include "cluster/migrated_db.hpp"
#include "cluster/outcome_listener.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace sandglass::testing;

namespace {

// Running sleep jobs `from`..`to` of owner n1/1, attempt 1, none awaited yet.
void running(const MigratedDb& db, int from, int to) {
  db.pg.execute(fmt::format(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, deadline, state, owner, attempt, awaited) "
      "SELECT g, 'sleep', '{{}}', g % 4, 1, clock_timestamp() + interval '90 seconds', 'running', 'n1/1', 1, false "
      "FROM generate_series({}, {}) g", from, to));
}

// Writes the outcomes of jobs `ids` (attempt 1, owner n1/1) by one exchange that claims nothing.
void exchange(const MigratedDb& db, const std::string& ids, int n, bool share) {
  db.pg.execute(fmt::format(
      "SELECT * FROM sandglass_finish_claim("
      "'n1/1', 'n1', '{}', array_fill(1, ARRAY[{}]), array_fill('completed'::text, ARRAY[{}]), "
      "array_fill('ok'::text, ARRAY[{}]), array_fill(NULL::text, ARRAY[{}]), array_fill(false, ARRAY[{}]), "
      "array_fill(NULL::text, ARRAY[{}]), array_fill(NULL::text, ARRAY[{}]), array_fill(7::bigint, ARRAY[{}]), "
      "0, '{{sleep}}', '{{0}}', {})",
      ids, n, n, n, n, n, n, n, n, share));
}

std::vector<std::uint64_t> sorted(std::vector<std::uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_SUITE("cluster") {

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
  exchange(db, "{1,2,3,4}", 4, false);
  CHECK(sorted(to_a.announced()) == std::vector<std::uint64_t>{1, 2});
  CHECK(sorted(to_b.announced()) == std::vector<std::uint64_t>{2, 3});
  CHECK(to_c.announced().empty());
  CHECK(shared.announced().empty());

  // Shared run times: every outcome of the exchange on sandglass_outcome once, awaited or not,
  // and nothing on the nodes' channels (they listen to sandglass_outcome too).
  db.pg.execute("SELECT sandglass_await('{5}', 'node a')");
  exchange(db, "{5,6}", 2, true);
  CHECK(sorted(shared.announced()) == std::vector<std::uint64_t>{5, 6});
  CHECK(to_a.announced().empty());

  // An awaited row that names no node (no function recorded one) goes to sandglass_outcome.
  db.pg.execute("UPDATE sandglass_jobs SET awaited = true WHERE id = 7");
  exchange(db, "{7,8}", 2, false);
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
  exchange(db, "{1,2,3,4}", 4, false);
  CHECK(sorted(to_n1.announced()) == std::vector<std::uint64_t>{1, 3, 4});
}

}  // TEST_SUITE
