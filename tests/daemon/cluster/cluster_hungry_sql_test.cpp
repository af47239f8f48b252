// The statements of migrations/functions.sql, "Hungry nodes" called directly on a real
// PostgreSQL migrated by `sandglassd --migrate`: a claim that comes back short makes its node
// hungry, one that gets all it asked for makes it not; a submission that queues a job sends
// sandglass_queued only while a live node is hungry; and a claim that turns hungry while a
// submission that read "not hungry" is still open waits for it and claims its job.
#include "cluster/migrated_db.hpp"
#include "cluster/outcome_listener.hpp"

#include <libpq-fe.h>

#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>

using namespace sandglass::testing;

namespace {

// One sandglass_submit_claim call by n1 (owner n1/1, serving sleep and spin) that claims at
// most `claim` at insert, of unkeyed jobs of these kinds and classes (60 s of budget, nobody
// waits); the verdicts in order.
std::string submit(const PostgresServer& pg, int claim, const std::string& kinds,
                   const std::string& priorities) {
  return pg.scalar(fmt::format(
      "SELECT string_agg(verdict, ',' ORDER BY ord) FROM sandglass_submit_claim("
      "'n1', 'n1/1', {0}, '{{sleep,spin}}', '{1}', "
      "array_fill('{{}}'::text, ARRAY[cardinality('{1}'::text[])]), '{2}', "
      "array_fill(NULL::text, ARRAY[cardinality('{1}'::text[])]), "
      "array_fill(NULL::text, ARRAY[cardinality('{1}'::text[])]), "
      "array_fill(60000000::bigint, ARRAY[cardinality('{1}'::text[])]), "
      "array_fill(60000000::bigint, ARRAY[cardinality('{1}'::text[])]), "
      "array_fill(5::bigint, ARRAY[cardinality('{1}'::text[])]), "
      "array_fill(0::bigint, ARRAY[cardinality('{1}'::text[])]), 3600000, "
      "array_fill(false, ARRAY[cardinality('{1}'::text[])]), "
      "array_fill(NULL::uuid, ARRAY[cardinality('{1}'::text[])]))",
      claim, kinds, priorities));
}

// The ids n1/1 claims with a limit of `limit`, ascending ("" when none).
std::string claim(const PostgresServer& pg, int limit) {
  return pg.scalar(fmt::format(
      "SELECT coalesce(string_agg(job_id::text, ',' ORDER BY job_id), '') FROM "
      "sandglass_claim('n1/1', 'n1', {}, '{{sleep,spin}}', '{{0,0}}') WHERE job_id IS NOT NULL",
      limit));
}

std::string hunger(const PostgresServer& pg) {
  return pg.scalar("SELECT string_agg(owner || ':' || hungry, ',' ORDER BY owner) FROM sandglass_hunger");
}

// A connection of the test's own that runs a statement without waiting for its answer.
class AsyncSession {
 public:
  explicit AsyncSession(const std::string& conninfo) : conn_{PQconnectdb(conninfo.c_str()), PQfinish} {
    if (PQstatus(conn_.get()) != CONNECTION_OK) throw std::runtime_error{PQerrorMessage(conn_.get())};
  }
  int pid() const { return PQbackendPID(conn_.get()); }
  void exec(const std::string& sql) {
    const std::unique_ptr<PGresult, void (*)(PGresult*)> r{PQexec(conn_.get(), sql.c_str()), PQclear};
    const ExecStatusType s = PQresultStatus(r.get());
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) throw std::runtime_error{PQerrorMessage(conn_.get())};
  }
  void send(const std::string& sql) {
    if (PQsendQuery(conn_.get(), sql.c_str()) == 0) throw std::runtime_error{PQerrorMessage(conn_.get())};
  }
  // The first value of `sql`'s first row ("" when none). Blocks.
  std::string scalar(const std::string& sql) {
    send(sql);
    return result();
  }
  // The first value of the statement sent. Blocks until it has ended.
  std::string result() {
    std::string value;
    bool failed = false;
    while (PGresult* r = PQgetResult(conn_.get())) {
      if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) value = PQgetvalue(r, 0, 0);
      if (PQresultStatus(r) == PGRES_FATAL_ERROR) failed = true;
      PQclear(r);
    }
    if (failed) throw std::runtime_error{PQerrorMessage(conn_.get())};
    return value;
  }

 private:
  std::unique_ptr<PGconn, void (*)(PGconn*)> conn_;
};

// Begins, in `submitter`, a submission of one spin job of class 0 with `remaining_us` left that
// is admitted and inserted and stays open.
void open_spin_submission(AsyncSession& submitter, const std::string& remaining_us) {
  submitter.exec("BEGIN");
  submitter.send(fmt::format("SELECT verdict FROM sandglass_submit_claim('n1', 'n1/1', 0, '{{sleep,spin}}', "
                             "'{{spin}}', '{{\"{{}}\"}}', '{{0}}', '{{NULL}}', '{{NULL}}', '{{{0}}}', '{{{0}}}', "
                             "'{{5}}', '{{0}}', 3600000, '{{f}}', '{{NULL}}')",
                             remaining_us));
  CHECK(submitter.result() == "admitted");
}

// Waits until `session`'s statement waits for an advisory lock.
void await_advisory_wait(const MigratedDb& db, const AsyncSession& session) {
  REQUIRE(eventually([&] {
    return db.pg.scalar(fmt::format("SELECT wait_event FROM pg_stat_activity WHERE pid = {}",
                                    session.pid())) == "advisory";
  }));
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("a submission that queues a job sends sandglass_queued only while a live node is hungry, "
          "which its last claim decides" * doctest::timeout(120)) {
  MigratedDb db;
  NotifyListener queued{db.pg, "sandglass_queued"};
  CHECK(hunger(db.pg) == "n1/1:true");  // a node starts hungry

  // Hungry: a NOTIFY per kind queued, in the order first admitted.
  CHECK(submit(db.pg, 0, "{spin,sleep,spin}", "{2,0,3}") == "admitted,admitted,admitted");
  CHECK(queued.payloads() == std::vector<std::string>{"sleep", "spin"});

  // A claim that gets all it asked for (class 0 first, then class 2): not hungry.
  CHECK(claim(db.pg, 2) == "1,2");
  CHECK(hunger(db.pg) == "n1/1:false");
  CHECK(submit(db.pg, 0, "{sleep,spin}", "{1,2}") == "admitted,admitted");
  CHECK(queued.payloads().empty());
  // Expired heads only (a limit of 0) say nothing of the node's workers.
  CHECK(claim(db.pg, 0).empty());
  CHECK(hunger(db.pg) == "n1/1:false");

  SUBCASE("another live node that is hungry gets the NOTIFY; one past its lease does not") {
    db.pg.execute("INSERT INTO sandglass_nodes (owner, node, workers, capacity) VALUES ('n2/1', 'n2', 1, 10)");
    CHECK(hunger(db.pg) == "n1/1:false,n2/1:true");
    CHECK(submit(db.pg, 0, "{spin}", "{0}") == "admitted");
    CHECK(queued.payloads() == std::vector<std::string>{"spin"});
    db.pg.execute("UPDATE sandglass_nodes SET heartbeat_at = '-infinity' WHERE owner = 'n2/1'");
    CHECK(submit(db.pg, 0, "{sleep}", "{2}") == "admitted");
    CHECK(queued.payloads().empty());
    // A node that leaves takes its row with it.
    db.pg.execute("DELETE FROM sandglass_nodes WHERE owner = 'n2/1'");
    CHECK(hunger(db.pg) == "n1/1:false");
  }

  SUBCASE("a claim that comes back short makes the node hungry again") {
    CHECK(claim(db.pg, 5) == "3,4,5");  // three of the five it asked for
    CHECK(hunger(db.pg) == "n1/1:true");
    CHECK(submit(db.pg, 0, "{sleep}", "{3}") == "admitted");
    CHECK(queued.payloads() == std::vector<std::string>{"sleep"});
  }

  SUBCASE("a submission whose jobs are all claimed at insert queues none, and sends nothing") {
    CHECK(claim(db.pg, 5) == "3,4,5");
    CHECK(queued.payloads().empty());
    CHECK(hunger(db.pg) == "n1/1:true");
    CHECK(submit(db.pg, 2, "{sleep,spin}", "{0,1}") == "claimed,claimed");
    CHECK(queued.payloads().empty());
  }
  CHECK(db.pg.scalar("SELECT sum(queued) FROM sandglass_counters") ==
        db.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'queued'"));
}

// The race the advisory lock closes: the claim's first pass cannot see a submission that has not
// committed, and that submission read "not hungry"; without the lock and the second pass, its
// job would wait for the poll.
TEST_CASE("a claim that turns hungry waits for an open submission that read the node not "
          "hungry, then claims its job" * doctest::timeout(120)) {
  MigratedDb db;
  NotifyListener queued{db.pg, "sandglass_queued"};
  CHECK(submit(db.pg, 0, "{sleep}", "{2}") == "admitted");
  CHECK(claim(db.pg, 1) == "1");  // all it asked for
  CHECK(hunger(db.pg) == "n1/1:false");
  CHECK(queued.payloads() == std::vector<std::string>{"sleep"});

  // Submission 2 (a spin job of class 0) is admitted and inserted, and stays open.
  AsyncSession submitter{db.pg.conninfo()};
  open_spin_submission(submitter, "60000000");

  // The claim finds nothing, turns hungry, and waits for the submission's commit.
  AsyncSession claimer{db.pg.conninfo()};
  claimer.send("SELECT coalesce(string_agg(job_id::text, ','), '') FROM sandglass_claim('n1/1', "
               "'n1', 3, '{sleep,spin}', '{0,0}') WHERE job_id IS NOT NULL");
  await_advisory_wait(db, claimer);
  submitter.exec("COMMIT");
  CHECK(claimer.result() == "2");
  CHECK(hunger(db.pg) == "n1/1:true");
  CHECK(queued.payloads().empty());  // the submission read "not hungry": no NOTIFY, none needed
  CHECK(db.pg.scalar("SELECT string_agg(id || ':' || state || ':' || coalesce(owner, ''), ',' "
                     "ORDER BY id) FROM sandglass_jobs") == "1:running:n1/1,2:running:n1/1");
  CHECK(db.pg.scalar("SELECT sum(queued) FROM sandglass_counters") == "0");
}

// A claim that waited for the lock judges the time left by the clock after its wait: a job whose
// deadline passed while the claim waited is retired, not claimed with time it no longer has.
TEST_CASE("a claim that waited for an open submission retires the job whose deadline passed during "
          "the wait" * doctest::timeout(120)) {
  MigratedDb db;
  CHECK(submit(db.pg, 0, "{sleep}", "{2}") == "admitted");
  CHECK(claim(db.pg, 1) == "1");
  CHECK(hunger(db.pg) == "n1/1:false");

  // Submission 2: a job with 200 ms left, inserted and not committed.
  AsyncSession submitter{db.pg.conninfo()};
  open_spin_submission(submitter, "200000");
  const std::string deadline = submitter.scalar("SELECT deadline FROM sandglass_jobs WHERE id = 2");

  AsyncSession claimer{db.pg.conninfo()};
  claimer.send("SELECT coalesce(string_agg(coalesce(job_id::text, 'retired ' || retired), ','), '') "
               "FROM sandglass_claim('n1/1', 'n1', 3, '{sleep,spin}', '{0,0}')");
  await_advisory_wait(db, claimer);
  // The job's deadline passes by the database's clock while the claim waits.
  REQUIRE(eventually([&] {
    return db.pg.scalar(fmt::format("SELECT clock_timestamp() > '{}'::timestamptz", deadline)) == "t";
  }));
  submitter.exec("COMMIT");
  CHECK(claimer.result() == "retired 1");
  CHECK(db.pg.scalar("SELECT state || ':' || reason FROM sandglass_jobs WHERE id = 2") == "done:expired_in_queue");
  CHECK(db.pg.scalar("SELECT sum(queued) FROM sandglass_counters") == "0");
}

// The idle poll: a claim walks the queue in claim order past every queued job of other kinds.
// A hungry node's claim looks first whether there is anything for it (index descents) and reads
// none of those rows; pg_stat_get_xact_tuples_returned counts the queue index's entries this
// transaction's scans returned.
TEST_CASE("a hungry node's claim reads none of the queued jobs of other kinds when none of its "
          "own is queued and none has expired" * doctest::timeout(120)) {
  MigratedDb db;
  db.pg.execute(
      "INSERT INTO sandglass_jobs (kind, args, priority, budget_us, work_us, deadline) "
      "SELECT CASE WHEN g % 3 = 0 THEN 'spin' ELSE 'exec' END, '{}', (g % 4)::smallint, 60000000, 5, "
      "clock_timestamp() + (30 + g % 30) * interval '1 second' FROM generate_series(1, 300) g");
  db.pg.execute("ANALYZE sandglass_jobs");
  CHECK(hunger(db.pg) == "n1/1:true");
  AsyncSession s{db.pg.conninfo()};
  const std::string read = "SELECT pg_stat_get_xact_tuples_returned('sandglass_jobs_queue'::regclass)";
  const std::string sleep_claim =
      "SELECT coalesce(string_agg(coalesce(job_id::text, 'retired ' || retired), ',' ORDER BY job_id), '') "
      "FROM sandglass_claim('n1/1', 'n1', 2, '{sleep}', '{0}')";

  s.exec("BEGIN");
  CHECK(s.scalar(sleep_claim).empty());
  CHECK(s.scalar(read) == "4");  // the head of each class, for its deadline
  s.exec("COMMIT");
  CHECK(hunger(db.pg) == "n1/1:true");

  SUBCASE("a job of its kind behind them is still found") {
    const std::string id = db.pg.scalar(
        "INSERT INTO sandglass_jobs (kind, args, priority, budget_us, work_us, deadline) VALUES "
        "('sleep', '{}', 3, 60000000, 5, clock_timestamp() + interval '90 s') RETURNING id");
    CHECK(s.scalar(sleep_claim) == id);
    CHECK(hunger(db.pg) == "n1/1:true");  // one of the two it asked for
  }
  SUBCASE("an expired job of another kind is still retired") {
    db.pg.execute("UPDATE sandglass_jobs SET deadline = clock_timestamp() - interval '1 s' WHERE id = 7");
    CHECK(s.scalar(sleep_claim) == "retired 1");
    CHECK(db.pg.scalar("SELECT reason FROM sandglass_jobs WHERE id = 7") == "expired_in_queue");
  }
  SUBCASE("a node that is not hungry reads none of them either: it looks per kind it serves") {
    db.pg.execute("UPDATE sandglass_hunger SET hungry = false");
    s.exec("BEGIN");
    CHECK(s.scalar(sleep_claim).empty());
    CHECK(std::stoi(s.scalar(read)) <= 8);  // at most the head of each class, in each of two passes
    s.exec("COMMIT");
  }
}

}  // TEST_SUITE
