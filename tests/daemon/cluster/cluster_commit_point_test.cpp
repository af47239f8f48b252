// Commit points in cluster mode (daemon/cluster/commit_points.cpp,
// functions.sql, sandglass_record_commits): a handler passes its commit point only once its job's
// row says committed, so a node killed right after a commit() leaves a row that the sweep never
// queues again.
#include "cluster/cluster_fixture.hpp"
#include "cluster/migrated_db.hpp"

#include <doctest/doctest.h>

#include <signal.h>

#include <future>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

// The [databases] and [queries] of a node whose `sql` kind writes to `ledger` on the cluster's
// own server (any database would do; this one is there).
std::string sql_tables(const PostgresServer& pg) {
  return fmt::format(R"toml(
[databases.main]
conninfo = "{}"
pool_size = 2

[queries.record]
database = "main"
sql = "INSERT INTO ledger (note) VALUES ($1)"
params = 1
commits = true

[queries.slow_record]
database = "main"
sql = "INSERT INTO slow_ledger (note) VALUES ($1)"
params = 1
commits = true
)toml",
                     pg.conninfo());
}

// `ledger`: at the COMMIT of each insert (a deferred constraint trigger, which runs after the
// sql kind's commit() returned), commit_seen records whether the row of the job that wrote it
// (the one whose args name the note) said committed. `slow_ledger`: its COMMIT takes 3 s.
void create_ledgers(const PostgresServer& pg) {
  pg.execute(
      "CREATE TABLE ledger (note text); CREATE TABLE commit_seen (note text, committed boolean);"
      "CREATE FUNCTION ledger_seen() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
      "  INSERT INTO commit_seen SELECT NEW.note, (SELECT bool_and(j.committed) FROM sandglass_jobs j"
      "    WHERE j.state = 'running' AND j.args LIKE '%\"' || NEW.note || '\"%');"
      "  RETURN NULL; END $$;"
      "CREATE CONSTRAINT TRIGGER ledger_seen AFTER INSERT ON ledger DEFERRABLE INITIALLY DEFERRED"
      "  FOR EACH ROW EXECUTE FUNCTION ledger_seen();"
      "CREATE TABLE slow_ledger (note text);"
      "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
      "  PERFORM pg_sleep(3); RETURN NULL; END $$;"
      "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON slow_ledger DEFERRABLE INITIALLY DEFERRED"
      "  FOR EACH ROW EXECUTE FUNCTION slow_commit();");
}

double total_metric(ClusterFixture& c, const std::string& name) {
  double sum = 0;
  for (auto& n : c.nodes) sum += metric(n->port(), name);
  return sum;
}

}  // namespace

TEST_SUITE("cluster commit points") {

TEST_CASE("sandglass_record_commits marks only the current owner's attempt of a running job not "
          "asked to cancel" * doctest::timeout(120)) {
  MigratedDb db;
  // id, state, owner, attempt, cancel_requested
  db.pg.execute(
      "INSERT INTO sandglass_jobs (id, kind, args, priority, budget_us, deadline, state, owner, attempt, cancel_requested) "
      "SELECT v.id, 'sleep', '{}', 2, 60000000, clock_timestamp() + interval '60 s', v.st, v.ow, v.at, v.cr "
      "FROM (VALUES (1, 'running', 'n1/1', 1, false), (2, 'running', 'n1/1', 2, false), "
      "             (3, 'running', 'n2/1', 1, false), (4, 'running', 'n1/1', 1, true), "
      "             (5, 'done', 'n1/1', 1, false), (6, 'queued', NULL, 0, false), "
      "             (7, 'running', 'n1/1', 3, false)) AS v(id, st, ow, at, cr)");
  // 2 is asked with a stale attempt, 3 is another owner's, 4 was asked to cancel, 5 ended, 6 is
  // queued; 1 and 7 are the caller's.
  const auto marked = db.rows(
      "SELECT * FROM sandglass_record_commits('n1/1', '{1,2,3,4,5,6,7}', '{1,1,1,1,1,0,3}') ORDER BY 1");
  REQUIRE(marked.size() == 2);
  CHECK(marked[0][0] == "1");
  CHECK(marked[1][0] == "7");
  CHECK(db.pg.scalar("SELECT string_agg(id::text, ',' ORDER BY id) FROM sandglass_jobs WHERE committed") == "1,7");
  // Asked again: the same mark, the same answer.
  CHECK(db.pg.scalar("SELECT count(*) FROM sandglass_record_commits('n1/1', '{1}', '{1}')") == "1");
}

TEST_CASE("a handler passes its commit point only after its row says committed, under a mixed "
          "load of three kinds, four classes and several budgets" * doctest::timeout(180)) {
  ClusterFixture c;
  create_ledgers(c.pg);
  const std::string tables = sql_tables(c.pg);
  DaemonProcess& a = c.node({"sql", "sleep"}, 2, {}, tables);
  c.node({"sql", "spin"}, 2, {}, tables);
  c.node({"sleep"}, 2, {}, tables);

  struct Sent {
    std::string kind;
    bool commits;
    std::future<HttpAnswer> answer;
  };
  std::vector<Sent> sent;
  const char* priorities[] = {"critical", "high", "normal", "sheddable"};
  int notes = 0;
  for (int i = 0; i < 24; ++i) {
    const std::uint16_t port = c.nodes[static_cast<std::size_t>(i % 3)]->port();
    std::string kind, args;
    bool commits = true;
    switch (i % 4) {
      case 0:
      case 1:
        kind = "sql";
        args = fmt::format(R"({{"query":"record","params":["note-{}"]}})", notes++);
        break;
      case 2:
        kind = "sleep";
        args = fmt::format(R"({{"ms":{},"commit_at_ms":{}}})", 20 + i, i % 5);
        break;
      default:
        kind = "spin";
        args = fmt::format(R"({{"ms":{}}})", 2 + i % 5);
        commits = false;
    }
    const std::string body = fmt::format(R"({{"kind":"{}","args":{},"priority":"{}","timeout_ms":{}}})",
                                         kind, args, priorities[i % 4], 8'000 + 2'000 * (i % 5));
    sent.push_back({kind, commits, std::async(std::launch::async, [port, body] { return post_job(port, body); })});
  }
  int committing = 0;
  for (Sent& s : sent) {
    const HttpAnswer answer = s.answer.get();
    INFO(s.kind, ": ", answer.body);
    REQUIRE(answer.status == 200);
    const auto o = json_of(answer);
    CHECK(text(o, "state") == "completed");
    CHECK(text(o, "kind") == s.kind);
    CHECK(o.at("committed").as_bool() == s.commits);
    committing += s.commits ? 1 : 0;
  }
  // Every insert found its job's row committed when its transaction committed, which the sql
  // kind does only after commit() returned. (Polled marks came up to 5 ms late: false here.)
  CHECK(c.pg.scalar("SELECT count(*) FROM ledger") == std::to_string(notes));
  CHECK(c.pg.scalar("SELECT count(*) FROM commit_seen WHERE committed") == std::to_string(notes));
  CHECK(total_metric(c, "sandglass_cluster_commit_points_total") == committing);
  CHECK(total_metric(c, "sandglass_cluster_commit_points_refused_total") == 0);
  CHECK(metric(a.port(), "sandglass_cluster_commit_points_total") > 0);
}

TEST_CASE("a commit point the row refuses (the job was asked to cancel) is never passed: the job "
          "ends cancelled by the caller, uncommitted, while the job beside it commits" *
          doctest::timeout(120)) {
  ClusterFixture c;
  c.node({"spin"});  // the entry node
  DaemonProcess& runner = c.node({"sleep"});
  const std::uint16_t entry = c.nodes[0]->port();
  const std::uint64_t refused = submit_later(
      entry, R"({"kind":"sleep","args":{"ms":5000,"commit_at_ms":1500},"priority":"high","timeout_ms":30000})");
  const std::uint64_t passed = submit_later(
      entry, R"({"kind":"sleep","args":{"ms":100,"commit_at_ms":50},"priority":"sheddable","timeout_ms":20000})");
  REQUIRE(eventually([&] { return text(record(entry, refused), "state") == "running"; }));
  // The cancel's row change without its NOTIFY: the node learns of it only from the refusal.
  c.pg.execute("UPDATE sandglass_jobs SET cancel_requested = true WHERE id = " + std::to_string(refused));
  REQUIRE(eventually([&] { return text(record(entry, refused), "state") == "cancelled"; }, 20s));
  const auto o = record(entry, refused);
  CHECK(text(o, "cause") == "caller");
  CHECK(text(o, "reason") == "cancelled_while_running");
  CHECK_FALSE(o.at("committed").as_bool());
  REQUIRE(eventually([&] { return text(record(entry, passed), "state") == "completed"; }, 20s));
  CHECK(record(entry, passed).at("committed").as_bool());
  CHECK(metric(runner.port(), "sandglass_cluster_commit_points_refused_total") == 1);
  CHECK(metric(runner.port(), "sandglass_cluster_commit_points_total") == 1);
}

TEST_CASE("kill -9 while a committed job's transaction commits: it ends node_lost, its effect is "
          "there once, and a job that had not committed runs again elsewhere" *
          doctest::timeout(180)) {
  ClusterFixture c;
  create_ledgers(c.pg);
  const std::string tables = sql_tables(c.pg);
  c.node({"spin"}, 2, {}, tables);  // the entry node
  DaemonProcess& runner = c.node({"sql", "sleep"}, 2, {}, tables);
  const std::uint16_t entry = c.nodes[0]->port();
  const std::uint64_t committed = submit_later(
      entry, R"({"kind":"sql","args":{"query":"slow_record","params":["once"]},"priority":"high","timeout_ms":30000})");
  const std::uint64_t open = submit_later(entry, R"({"kind":"sleep","args":{"ms":3000},"priority":"normal","timeout_ms":30000})");
  // The sql job has passed commit() and its COMMIT runs (3 s) when the node dies.
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE query = 'COMMIT' AND state = 'active'") == "1";
  }, 20s));
  REQUIRE(eventually([&] { return text(record(entry, open), "state") == "running"; }));
  CHECK(record(entry, committed).at("committed").as_bool());
  runner.signal(SIGKILL);
  REQUIRE(runner.wait_exit(10s).has_value());
  c.node({"sql", "sleep"}, 2, {}, tables);  // another node to run what may run again

  REQUIRE(eventually([&] { return text(record(entry, committed), "state") == "failed"; }, 30s));
  const auto lost = record(entry, committed);
  CHECK(text(lost, "reason") == "node_lost");
  CHECK(lost.at("attempt").as_int64() == 1);
  REQUIRE(eventually([&] { return text(record(entry, open), "state") == "completed"; }, 30s));
  CHECK(record(entry, open).at("attempt").as_int64() == 2);
  // The server finished the dead node's COMMIT: the effect is there, once, and stays so.
  REQUIRE(eventually([&] { return c.pg.scalar("SELECT count(*) FROM slow_ledger") == "1"; }, 10s));
  std::this_thread::sleep_for(std::chrono::milliseconds{2 * kLeaseMs});
  CHECK(c.pg.scalar("SELECT count(*) FROM slow_ledger") == "1");
}

}  // TEST_SUITE
