// The sql kind against a real PostgreSQL 15 (postgres_server.hpp): cancellation reaches the
// running statement, the connection stays reusable, the pool spends the budget, COMMIT is the
// commit point, and bad input or an absent database get clear errors.
#include "daemon_test_support.hpp"
#include "postgres_server.hpp"

#include <boost/json/serialize.hpp>
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <memory>
#include <string>

using namespace sandglass::testing;
using namespace std::chrono_literals;
using boost::json::object;

namespace {

// One server for the test cases of a process (ctest runs each case in its own process).
PostgresServer& shared_server() {
  static PostgresServer server;
  return server;
}

const std::string kQueries = R"toml(
[queries.sleep]
database = "main"
sql = "SELECT pg_sleep($1)"
params = 1

[queries.backend]
database = "main"
sql = "SELECT pg_backend_pid() AS pid"

[queries.record]
database = "main"
sql = "INSERT INTO ledger (note) VALUES ($1)"
params = 1
commits = true

[queries.probe]
database = "main"
sql = "INSERT INTO pool_probe (note) VALUES ($1)"
params = 1
commits = true

[queries.frozen]
database = "main"
sql = "INSERT INTO frozen_ledger (note) VALUES ($1)"
params = 1
commits = true

[queries.slow_write]
database = "main"
sql = "INSERT INTO slow_ledger (note) SELECT $1 FROM pg_sleep(30)"
params = 1
commits = true

[queries.types]
database = "main"
sql = "SELECT $1::text AS t, $2::int AS i, $3::boolean AS b, $4::text AS n, 1.5::float8 AS f, '{\"a\": [1]}'::jsonb AS j, 12.50::numeric AS num"
params = 4

[queries.series]
database = "main"
sql = "SELECT g FROM generate_series(1, $1::int) AS g"
params = 1

[queries.divide]
database = "main"
sql = "SELECT 1 / $1::int"
params = 1
)toml";

// A daemon whose database "main" is the server on `port`, with a pool of `pool_size`.
std::unique_ptr<DaemonProcess> sql_daemon(std::uint16_t port, int pool_size) {
  const std::string config = write_temp_file(
      "sql.toml", "[databases.main]\nconninfo = \"host=127.0.0.1 port=" + std::to_string(port) +
                      " dbname=postgres user=postgres\"\npool_size = " + std::to_string(pool_size) +
                      "\nmax_rows = 3\ncancel_grace_ms = 2000\n" + kQueries);
  return std::make_unique<DaemonProcess>(std::vector<std::string>{"--config", config, "--workers", "4"});
}

std::string sql_job(const std::string& query, const std::string& params, int timeout_ms = 10'000) {
  return R"({"kind":"sql","timeout_ms":)" + std::to_string(timeout_ms) + R"(,"args":{"query":")" +
         query + R"(","params":)" + params + "}}";
}

// Statements of this test's kind that the server is running for someone else.
std::string active(const PostgresServer& pg, const std::string& like) {
  return pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '" +
                   like + "' AND pid <> pg_backend_pid()");
}

std::int64_t backend_pid(std::uint16_t port) {
  const HttpAnswer a = post_job(port, R"({"kind":"sql","args":{"query":"backend"}})");
  REQUIRE(a.status == 200);
  return json_of(a).at("result").as_object().at("rows").as_array().at(0).as_array().at(0).as_int64();
}

std::chrono::milliseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
}

const object& result_of(const object& record) { return record.at("result").as_object(); }

// Creates `table (note text)` whose COMMIT after an insert takes `seconds`: a deferred
// constraint trigger runs at COMMIT and sleeps.
void create_table_with_slow_commit(PostgresServer& pg, const std::string& table, int seconds) {
  pg.execute("CREATE TABLE IF NOT EXISTS " + table + " (note text);"
             "CREATE OR REPLACE FUNCTION " + table + "_slow_commit() RETURNS trigger LANGUAGE plpgsql AS"
             " $$ BEGIN PERFORM pg_sleep(" + std::to_string(seconds) + "); RETURN NULL; END $$;"
             "DROP TRIGGER IF EXISTS " + table + "_slow_commit ON " + table + ";"
             "CREATE CONSTRAINT TRIGGER " + table + "_slow_commit AFTER INSERT ON " + table +
             " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " + table + "_slow_commit();");
}

}  // namespace

TEST_SUITE("sandglassd sql") {
  TEST_CASE("a statement that outlives its budget is answered 504 in time and stops on the server and its connection is reused" *
            doctest::timeout(120)) {
    PostgresServer& pg = shared_server();
    const auto d = sql_daemon(pg.port(), 1);
    const std::int64_t before = backend_pid(d->port());

    const auto start = std::chrono::steady_clock::now();
    const HttpAnswer a = post_job(d->port(), sql_job("sleep", "[60]", 1000));
    const auto took = since(start);
    CHECK(a.status == 504);
    // The statement would run for 60 s, the budget is 1 s: the bound only catches an answer
    // that waited for the statement.
    CHECK(took < 20s);
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "cancelled");
    CHECK(r.at("cause").as_string() == "deadline");
    CHECK(result_of(r).at("phase").as_string() == "statement");

    CHECK(eventually([&] { return active(pg, "%pg_sleep%") == "0"; }));
    CHECK(backend_pid(d->port()) == before);
    // Either the server's statement_timeout or our cancel request ended it, exactly once.
    CHECK(metric(d->port(), R"(sandglass_sql_statement_timeouts_total{database="main"})") +
              metric(d->port(), R"(sandglass_sql_cancel_requests_total{database="main"})") ==
          1);
    CHECK(metric(d->port(), R"(sandglass_sql_pool_connections{database="main"})") == 1);
  }

  TEST_CASE("a caller that disconnects during a statement gets it cancelled on the server" *
            doctest::timeout(120)) {
    PostgresServer& pg = shared_server();
    const auto d = sql_daemon(pg.port(), 1);
    const std::int64_t before = backend_pid(d->port());
    Connection c{d->port()};
    c.send(request_bytes("POST", "/v1/jobs", sql_job("sleep", "[30]", 60'000)));
    REQUIRE(eventually([&] { return active(pg, "%pg_sleep%") == "1"; }));
    c.close();

    CHECK(eventually([&] { return active(pg, "%pg_sleep%") == "0"; }));
    REQUIRE(eventually([&] { return state_of(d->port(), 2) == "cancelled"; }));
    const object r = json_of(http(d->port(), "GET", "/v1/jobs/2"));
    CHECK(r.at("cause").as_string() == "caller");
    CHECK(result_of(r).at("phase").as_string() == "statement");
    CHECK(metric(d->port(), R"(sandglass_sql_cancel_requests_total{database="main"})") == 1);
    CHECK(metric(d->port(), R"(sandglass_sql_statement_timeouts_total{database="main"})") == 0);
    CHECK(backend_pid(d->port()) == before);
  }

  TEST_CASE("a job whose budget ends while the pool is exhausted is answered by its deadline and never reaches the server" *
            doctest::timeout(120)) {
    PostgresServer& pg = shared_server();
    pg.execute("CREATE TABLE IF NOT EXISTS pool_probe (note text)");
    const auto d = sql_daemon(pg.port(), 1);
    Connection holder{d->port()};
    holder.send(request_bytes("POST", "/v1/jobs", sql_job("sleep", "[60]", 90'000)));
    REQUIRE(eventually([&] { return active(pg, "%pg_sleep%") == "1"; }));
    CHECK(metric(d->port(), R"(sandglass_sql_pool_in_use{database="main"})") == 1);
    CHECK(metric(d->port(), R"(sandglass_sql_pool_size{database="main"})") == 1);

    const auto start = std::chrono::steady_clock::now();
    const HttpAnswer a = post_job(d->port(), sql_job("probe", R"(["never"])", 300));
    const auto took = since(start);
    CHECK(a.status == 504);
    // The pool's one connection is busy for 60 s, the budget is 300 ms: the bound only catches
    // a job that waited for the connection.
    CHECK(took < 20s);
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "cancelled");
    CHECK(r.at("cause").as_string() == "deadline");
    CHECK(result_of(r).at("phase").as_string() == "pool");
    CHECK(metric(d->port(), R"(sandglass_sql_pool_wait_seconds_count{database="main"})") == 2);

    CHECK(cancel_job(d->port(), 1).at("state").as_string() == "cancelled");
    CHECK(eventually([&] { return active(pg, "%pg_sleep%") == "0"; }));
    CHECK(pg.scalar("SELECT count(*) FROM pool_probe") == "0");
  }

  TEST_CASE("a write cancelled after its COMMIT was sent completes after cancel and a retry with its key does not insert twice" *
            doctest::timeout(120)) {
    PostgresServer& pg = shared_server();
    // It keeps the COMMIT busy for 2 s.
    create_table_with_slow_commit(pg, "ledger", 2);
    const auto d = sql_daemon(pg.port(), 1);
    const std::string body =
        R"({"kind":"sql","idempotency_key":"transfer-7","timeout_ms":20000,"args":{"query":"record","params":["transfer-7"]}})";
    Connection c{d->port()};
    c.send(request_bytes("POST", "/v1/jobs", body));
    REQUIRE(eventually([&] { return active(pg, "COMMIT") == "1"; }));
    // The COMMIT runs on for 2 s: the DELETE answers 202 cancelling after 100 ms.
    CHECK(http(d->port(), "DELETE", "/v1/jobs/1").status == 202);

    const auto a = c.read_answer();
    const object r = completed_after_caller_cancel(a);
    CHECK(result_of(r).at("affected_rows").as_int64() == 1);
    CHECK(pg.scalar("SELECT count(*) FROM ledger WHERE note = 'transfer-7'") == "1");

    const HttpAnswer again = post_job(d->port(), body);
    CHECK(again.status == 200);
    CHECK(again.body == a->body);
    CHECK(pg.scalar("SELECT count(*) FROM ledger WHERE note = 'transfer-7'") == "1");
    CHECK(metric(d->port(), R"(sandglass_completed_after_cancel_total{kind="sql"})") == 1);
    CHECK(metric(d->port(), R"(sandglass_sql_cancel_requests_total{database="main"})") == 0);
  }

  TEST_CASE("a write cancelled during its statement is rolled back and its connection is reused" *
            doctest::timeout(120)) {
    PostgresServer& pg = shared_server();
    pg.execute("CREATE TABLE IF NOT EXISTS slow_ledger (note text)");
    const auto d = sql_daemon(pg.port(), 1);
    const std::int64_t before = backend_pid(d->port());  // job 1
    Connection c{d->port()};
    c.send(request_bytes("POST", "/v1/jobs", sql_job("slow_write", R"(["w-1"])", 60'000)));
    REQUIRE(eventually([&] { return active(pg, "%pg_sleep%") == "1"; }));
    CHECK(cancel_job(d->port(), 2).at("state").as_string() == "cancelled");

    const auto a = c.read_answer();
    REQUIRE(a.has_value());
    INFO(a->body);
    const object r = json_of(*a);
    CHECK(r.at("state").as_string() == "cancelled");
    CHECK(r.at("cause").as_string() == "caller");
    CHECK(result_of(r).at("phase").as_string() == "statement");
    CHECK(metric(d->port(), R"(sandglass_sql_cancel_requests_total{database="main"})") == 1);
    // The ROLLBACK after the confirmed cancel left the connection clean: it is pooled again.
    CHECK(backend_pid(d->port()) == before);
    CHECK(pg.scalar("SELECT count(*) FROM slow_ledger") == "0");
  }

  TEST_CASE("a COMMIT the server never answers fails the job by its deadline plus the grace with the connection closed" *
            doctest::timeout(120)) {
    PostgresServer& pg = shared_server();
    // The slow COMMIT lasts long enough to freeze its backend with SIGSTOP: the server neither
    // answers nor closes the connection, as when it hangs or packets drop.
    create_table_with_slow_commit(pg, "frozen_ledger", 3);
    const auto d = sql_daemon(pg.port(), 1);  // cancel_grace_ms = 2000
    Connection c{d->port()};
    c.send(request_bytes("POST", "/v1/jobs", sql_job("frozen", R"(["f-1"])", 4000)));
    REQUIRE(eventually([&] { return active(pg, "COMMIT") == "1"; }));
    const pid_t backend = static_cast<pid_t>(std::stol(pg.scalar(
        "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query = 'COMMIT'")));
    REQUIRE(::kill(backend, SIGSTOP) == 0);
    struct Resume {
      pid_t pid;
      ~Resume() { ::kill(pid, SIGCONT); }
    } resume{backend};

    // The frozen server would never answer: an answer at all says the deadline and the grace
    // (4 s + 2 s) ended the wait. 60 s only catches a hang.
    const auto a = c.read_answer(60s);
    REQUIRE(a.has_value());
    CHECK(a->status == 500);
    const object r = json_of(*a);
    CHECK(r.at("state").as_string() == "failed");
    INFO(a->body);
    CHECK(std::string{r.at("error").as_string()}.find("whether it committed is unknown") != std::string::npos);
    CHECK(result_of(r).at("phase").as_string() == "commit");
    CHECK(metric(d->port(), R"(sandglass_sql_pool_connections{database="main"})") == 0);
    CHECK(post_job(d->port(), sql_job("series", "[1]")).status == 200);  // on a new connection
  }

  TEST_CASE("a result carries column names and typed values and is capped by max_rows" *
            doctest::timeout(120)) {
    PostgresServer& pg = shared_server();
    const auto d = sql_daemon(pg.port(), 2);

    const HttpAnswer a = post_job(d->port(), sql_job("types", R"(["x", 42, true, null])"));
    REQUIRE(a.status == 200);
    const object record = json_of(a);
    const object& result = result_of(record);
    CHECK(boost::json::serialize(result.at("columns")) == R"(["t","i","b","n","f","j","num"])");
    CHECK(boost::json::serialize(result.at("rows")) == R"([["x",42,true,null,1.5E0,{"a":[1]},"12.50"]])");
    CHECK(result.at("row_count").as_int64() == 1);
    CHECK_FALSE(result.at("truncated").as_bool());

    const HttpAnswer many = post_job(d->port(), sql_job("series", "[5]"));
    REQUIRE(many.status == 200);
    const object capped_record = json_of(many);
    const object& capped = result_of(capped_record);
    CHECK(boost::json::serialize(capped.at("rows")) == "[[1],[2],[3]]");
    CHECK(capped.at("row_count").as_int64() == 3);
    CHECK(capped.at("truncated").as_bool());
    CHECK(capped.at("affected_rows").as_int64() == 5);

    const HttpAnswer error = post_job(d->port(), sql_job("divide", "[0]"));
    CHECK(error.status == 500);
    const object e = json_of(error);
    CHECK(e.at("state").as_string() == "failed");
    CHECK(std::string{e.at("error").as_string()}.find("division by zero") != std::string::npos);
    CHECK(result_of(e).at("sqlstate").as_string() == "22012");
    CHECK(result_of(e).at("phase").as_string() == "statement");
  }

  TEST_CASE("bad input is answered 400 naming the field" * doctest::timeout(60)) {
    // Arguments are checked before anything reaches the database, which need not exist here.
    const std::string config = write_temp_file(
        "sql.toml", "[databases.main]\nconninfo = \"host=127.0.0.1 port=" + std::to_string(free_port()) +
                        " dbname=postgres user=postgres\"\n" + kQueries);
    DaemonProcess d{{"--config", config}};
    const auto field_of = [&](const std::string& args) {
      const HttpAnswer a = post_job(d.port(), R"({"kind":"sql","args":)" + args + "}");
      CHECK(a.status == 400);
      return std::string{json_of(a).at("field").as_string()};
    };
    CHECK(field_of(R"({"query":"nope"})") == "args.query");
    CHECK(field_of(R"({})") == "args.query");
    CHECK(field_of(R"({"query":"sleep"})") == "args.params");
    CHECK(field_of(R"({"query":"sleep","params":[]})") == "args.params");
    CHECK(field_of(R"({"query":"sleep","params":[1,2]})") == "args.params");
    CHECK(field_of(R"({"query":"sleep","params":"1"})") == "args.params");
    CHECK(field_of(R"({"query":"sleep","params":[[1]]})") == "args.params[0]");
    CHECK(field_of(R"({"query":"types","params":["a",1,true,{"x":1}]})") == "args.params[3]");
    CHECK(field_of(R"({"query":"backend","sql":"SELECT 1"})") == "args.sql");
    CHECK(field_of(R"({"query":"types","params":["a",1,true,"x\u0000y"]})") == "args.params[3]");
    const HttpAnswer nul = post_job(d.port(), R"({"kind":"sql","args":{"query":"sleep","params":["1\u00002"]}})");
    CHECK(nul.status == 400);
    CHECK(std::string{json_of(nul).at("error").as_string()} == "must not contain a NUL character");
    const HttpAnswer count = post_job(d.port(), R"({"kind":"sql","args":{"query":"sleep","params":[]}})");
    CHECK(std::string{json_of(count).at("error").as_string()} ==
          "query \"sleep\" takes 1 parameter, got 0");
  }

  TEST_CASE("a value PostgreSQL refuses as a parameter is answered 400 naming the parameter" *
            doctest::timeout(60)) {
    PostgresServer& pg = shared_server();
    const auto d = sql_daemon(pg.port(), 1);
    // Refused while binding: the server names the parameter.
    const HttpAnswer a = post_job(d->port(), sql_job("types", R"(["a","abc",true,"n"])"));
    CHECK(a.status == 400);
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "failed");
    CHECK(r.at("reason").as_string() == "invalid_input");
    CHECK(result_of(r).at("field").as_string() == "args.params[1]");
    CHECK(result_of(r).at("sqlstate").as_string() == "22P02");
    CHECK(std::string{r.at("error").as_string()}.starts_with("args.params[1]: "));
    const HttpAnswer number = post_job(d->port(), sql_job("series", R"(["12x"])"));
    CHECK(number.status == 400);
    CHECK(result_of(json_of(number)).at("field").as_string() == "args.params[0]");
    // A data exception the server ties to no parameter may come from the tables: it stays a
    // failed statement.
    const HttpAnswer divide = post_job(d->port(), sql_job("divide", "[0]"));
    CHECK(divide.status == 500);
    CHECK(json_of(divide).at("reason").as_string() == "handler_error");
    CHECK(result_of(json_of(divide)).at("sqlstate").as_string() == "22012");
    // The one connection is clean for the next job.
    const HttpAnswer ok = post_job(d->port(), sql_job("divide", "[2]"));
    CHECK(ok.status == 200);
  }

  TEST_CASE("a database that is down at start-up fails sql jobs at once while the daemon serves other kinds" *
            doctest::timeout(60)) {
    const std::string config = write_temp_file(
        "sql.toml", "[databases.main]\nconninfo = \"host=127.0.0.1 port=" + std::to_string(free_port()) +
                        " dbname=postgres user=postgres\"\n" + kQueries);
    DaemonProcess d{{"--config", config}};
    CHECK(d.log().find("database main is unavailable at start-up") != std::string::npos);
    CHECK(post_job(d.port(), R"({"kind":"sleep","args":{"ms":1}})").status == 200);

    // A failure (500, not the budget's 504 a minute on) says it failed without waiting; the
    // bound only catches a wait for the database.
    const auto start = std::chrono::steady_clock::now();
    const HttpAnswer a = post_job(d.port(), sql_job("backend", "[]", 60'000));
    CHECK(since(start) < 20s);
    CHECK(a.status == 500);
    const object r = json_of(a);
    CHECK(r.at("state").as_string() == "failed");
    CHECK(std::string{r.at("error").as_string()}.starts_with("database main is unavailable: "));
    CHECK(result_of(r).at("phase").as_string() == "connect");
    CHECK(metric(d.port(), R"(sandglass_sql_connect_failures_total{database="main"})") == 2);
  }

  TEST_CASE("a malformed conninfo is neither logged nor answered" * doctest::timeout(60)) {
    // libpq's message for this one quotes it: missing "=" after "hunter2" in connection info string
    const std::string config = write_temp_file(
        "sql.toml", "[databases.main]\nconninfo = \"host=127.0.0.1 port=" + std::to_string(free_port()) +
                        " hunter2\"\n" + kQueries);
    DaemonProcess d{{"--config", config}};
    const HttpAnswer a = post_job(d.port(), sql_job("backend", "[]"));
    CHECK(a.status == 500);
    CHECK(a.body.find("hunter2") == std::string::npos);
    CHECK(std::string{json_of(a).at("error").as_string()}.starts_with("database main is unavailable: "));
    CHECK(d.log().find("database main is unavailable at start-up") != std::string::npos);
    CHECK(d.log().find("hunter2") == std::string::npos);
  }

  TEST_CASE("a database that goes away fails sql jobs at once and they work again when it returns" *
            doctest::timeout(180)) {
    PostgresServer pg;  // its own: this test stops it
    const auto d = sql_daemon(pg.port(), 2);
    CHECK(d->log().find("database main: connected") != std::string::npos);
    CHECK(post_job(d->port(), sql_job("series", "[1]")).status == 200);

    pg.stop();
    // As above: failed (500), not expired waiting for the database a minute on.
    const auto start = std::chrono::steady_clock::now();
    const HttpAnswer down = post_job(d->port(), sql_job("series", "[1]", 60'000));
    CHECK(since(start) < 20s);
    CHECK(down.status == 500);
    INFO(down.body);
    CHECK(std::string{json_of(down).at("error").as_string()}.starts_with("database main is unavailable: "));
    CHECK(post_job(d->port(), R"({"kind":"sleep","args":{"ms":1}})").status == 200);

    pg.start();
    const HttpAnswer back = post_job(d->port(), sql_job("series", "[2]"));
    CHECK(back.status == 200);
    const object r = json_of(back);
    CHECK(boost::json::serialize(result_of(r).at("rows")) == "[[1],[2]]");
  }
}
