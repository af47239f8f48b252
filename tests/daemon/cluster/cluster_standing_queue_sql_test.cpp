// The cluster's standing-queue rule (daemon/cluster/migrations/functions.sql, "Admission and
// intake") called directly on a real PostgreSQL: while every live node that serves a kind
// reports a standing queue, sandglass_admit takes only jobs predicted to start within the
// largest target they report; a claim tells its node how long each job waited in the queue.
#include "cluster/migrated_db.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace sandglass::testing;

namespace {

// The verdict of sandglass_admit for one unkeyed job of `kind` and class `priority`, with a
// minute left and a 1 ms size, no tail estimate known.
std::string admit(const MigratedDb& db, const std::string& kind, int priority) {
  return db.pg.scalar(fmt::format(
      "SELECT verdict FROM sandglass_admit('{{{}}}', '{{\"{{}}\"}}', '{{{}}}', '{{NULL}}', '{{NULL}}', "
      "'{{60000000}}', '{{60000000}}', '{{1000}}', '{{0}}', 3600000, '{{NULL}}')",
      kind, priority));
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("while every live node of a kind reports a standing queue, only jobs predicted to "
          "start within the largest target are admitted, and an urgent class still is" *
          doctest::timeout(60)) {
  MigratedDb db{/*workers=*/2, /*capacity=*/1000};
  // 1 s of normal-class work queued: a newcomer of that class starts in 0.5 s on 2 workers.
  db.pg.execute("INSERT INTO sandglass_counters (node, priority, queued, work_us) VALUES ('n1', 2, 10, 1000000)");
  // No queue stands: a job with a minute left is admitted behind it.
  CHECK(admit(db, "sleep", 2) == "admitted");

  db.pg.execute("UPDATE sandglass_nodes SET standing_target_us = 50000 WHERE owner = 'n1/1'");
  // Predicted start 500 ms > target 50 ms: refused, with both figures.
  CHECK(admit(db, "sleep", 2) == "standing_queue 500000 50000");
  // The sheddable class waits behind the normal one too.
  CHECK(admit(db, "sleep", 3) == "standing_queue 500000 50000");
  // A high-class job has nothing of its class or above ahead: it overtakes.
  CHECK(admit(db, "sleep", 1) == "admitted");
  // Within the target: 80 ms of work on 2 workers starts in 40 ms.
  db.pg.execute("UPDATE sandglass_counters SET work_us = 80000");
  CHECK(admit(db, "sleep", 2) == "admitted");
  // The running jobs' rest (reported by their tail estimates) is not part of that start: with
  // every worker busy for 10 s more, the job still starts within the target once a worker
  // takes it after the 80 ms ahead.
  db.pg.execute("UPDATE sandglass_nodes SET busy = 2, running_rest_us = 10000000, running_at = clock_timestamp()");
  CHECK(admit(db, "sleep", 2) == "admitted");
  db.pg.execute("UPDATE sandglass_nodes SET busy = 0, running_rest_us = 0;"
                "UPDATE sandglass_counters SET work_us = 1000000");

  // A second live node serves sleep and saw no standing queue (its claims found fresh jobs or
  // none): the queue does not stand for sleep.
  db.pg.execute("INSERT INTO sandglass_nodes (owner, node, workers, capacity, kinds) "
                "VALUES ('n2/1', 'n2', 1, 100, '{sleep}')");
  CHECK(admit(db, "sleep", 2) == "admitted");
  // Both stand: the largest target counts, the work ahead is divided by all three workers.
  db.pg.execute("UPDATE sandglass_nodes SET standing_target_us = 80000 WHERE owner = 'n2/1'");
  CHECK(admit(db, "sleep", 2) == "standing_queue 333333 80000");
  // A node past its lease does not count: n1 alone stands, n2's 0 is not asked.
  db.pg.execute("UPDATE sandglass_nodes SET standing_target_us = 0, "
                "heartbeat_at = clock_timestamp() - interval '2 hours' WHERE owner = 'n2/1'");
  CHECK(admit(db, "sleep", 2) == "standing_queue 500000 50000");
  // A kind served only by a node that sees no standing queue: admitted, whatever n1 sees.
  db.pg.execute("UPDATE sandglass_nodes SET kinds = '{sleep}' WHERE owner = 'n1/1';"
                "INSERT INTO sandglass_nodes (owner, node, workers, capacity, kinds) "
                "VALUES ('n3/1', 'n3', 2, 100, '{spin}')");
  CHECK(admit(db, "spin", 2) == "admitted");
}

TEST_CASE("a delayed job whose start comes while its queue stands beyond the target ends "
          "rejected queue_full, as a lone daemon's refusal" *
          doctest::timeout(60)) {
  MigratedDb db{/*workers=*/1, /*capacity=*/1000};
  db.pg.execute("INSERT INTO sandglass_counters (node, priority, queued, work_us) VALUES ('n1', 2, 10, 1000000);"
                "UPDATE sandglass_nodes SET standing_target_us = 50000;"
                "INSERT INTO sandglass_jobs (kind, args, priority, budget_us, work_us, start_at, deadline, state) "
                "VALUES ('sleep', '{}', 2, 60000000, 1000, clock_timestamp(), "
                "        clock_timestamp() + interval '60 seconds', 'scheduled')");
  CHECK(db.pg.scalar("SELECT refused FROM sandglass_promote_due('n1', 3600000, 10, '{sleep}', '{0}')") == "1");
  CHECK(db.pg.scalar("SELECT outcome_state || ':' || reason FROM sandglass_jobs") == "rejected:queue_full");
}

TEST_CASE("a claim returns how long each claimed job waited in the queue, a delayed one from "
          "its start" *
          doctest::timeout(60)) {
  MigratedDb db{/*workers=*/2, /*capacity=*/1000};
  db.pg.execute("INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, created_at, start_at, deadline) VALUES"
                " (1, 'sleep', '{}', 2, 60000000, clock_timestamp() - interval '2 seconds', NULL,"
                "  clock_timestamp() + interval '50 seconds'),"
                " (2, 'sleep', '{}', 2, 60000000, clock_timestamp() - interval '9 seconds',"
                "  clock_timestamp() - interval '300 milliseconds', clock_timestamp() + interval '60 seconds')");
  const auto rows = db.rows(
      "SELECT job_id, waited_us FROM sandglass_finish_claim('n1/1', 'n1', '{}', '{}', '{}', '{}', '{}', "
      "'{}', '{}', '{}', '{}', 2, '{sleep}', '{0}', false) ORDER BY job_id");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0][0] == "1");
  const long first = std::stol(rows[0][1]);
  CHECK(first >= 2'000'000);
  CHECK(first < 3'000'000);
  CHECK(rows[1][0] == "2");
  const long second = std::stol(rows[1][1]);
  CHECK(second >= 300'000);
  CHECK(second < 1'300'000);
}

}  // TEST_SUITE
