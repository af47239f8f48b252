// PgSession (daemon/cluster/pg_session.hpp) against a real PostgreSQL: a statement with
// parameters is prepared once per session and run by name after; a statement the server
// dropped (DEALLOCATE, as a pooler's DISCARD does) or whose plan no longer fits (a function
// replaced with another result type) is prepared again and runs; past kMaxPrepared texts the
// others still run, unprepared; errors still name the server and carry its message; the server
// is named as libpq reached it, also when the environment (PGHOST, PGPORT) gave its address.
#include "daemon/cluster/pg_session.hpp"

#include "postgres_server.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <string>

using sandglass::daemon::cluster::PgError;
using sandglass::daemon::cluster::PgSession;
using sandglass::testing::PostgresServer;

namespace {

// The statements this session has prepared, as the server lists them: "name: text" lines.
std::string prepared(PgSession& db) {
  const auto rows = db.exec("SELECT coalesce(string_agg(name || ': ' || statement, E'\\n' ORDER BY name), '') "
                            "FROM pg_prepared_statements WHERE name LIKE 'sandglass_%'");
  return std::string{rows.text(0, 0)};
}

}  // namespace

TEST_SUITE("cluster pg session") {
  TEST_CASE("a statement with parameters is prepared once per session, then run by name" *
            doctest::timeout(120)) {
    PostgresServer pg;
    PgSession db = PgSession::open(pg.conninfo());
    CHECK(prepared(db).empty());
    for (int n = 1; n <= 3; ++n) {
      CHECK(db.exec("SELECT $1::int + 1", {std::to_string(n)}).text(0, 0) == std::to_string(n + 1));
    }
    CHECK(db.exec("SELECT $1::text IS NULL", {std::nullopt}).text(0, 0) == "t");
    CHECK(prepared(db) == "sandglass_1: SELECT $1::int + 1\nsandglass_2: SELECT $1::text IS NULL");
    // Without parameters nothing is prepared, and one text may hold several statements.
    CHECK(db.exec("CREATE TABLE t (a int); INSERT INTO t VALUES (7)").rows() == 0);
    CHECK(db.exec("SELECT a FROM t").text(0, 0) == "7");
    CHECK(prepared(db) == "sandglass_1: SELECT $1::int + 1\nsandglass_2: SELECT $1::text IS NULL");
    // Another session prepares its own.
    PgSession other = PgSession::open(pg.conninfo());
    CHECK(prepared(other).empty());
    CHECK(other.exec("SELECT a + $1::int FROM t", {"1"}).text(0, 0) == "8");
    CHECK(prepared(other) == "sandglass_1: SELECT a + $1::int FROM t");
  }

  TEST_CASE("a prepared statement the server dropped, or whose plan no longer fits, is prepared again" *
            doctest::timeout(120)) {
    PostgresServer pg;
    PgSession db = PgSession::open(pg.conninfo());
    db.exec("CREATE FUNCTION f(p int) RETURNS TABLE (a int) LANGUAGE sql AS 'SELECT p'");
    CHECK(db.exec("SELECT * FROM f($1)", {"5"}).text(0, 0) == "5");
    db.exec("DEALLOCATE ALL");
    CHECK(prepared(db).empty());
    CHECK(db.exec("SELECT * FROM f($1)", {"6"}).text(0, 0) == "6");
    CHECK(prepared(db) == "sandglass_1: SELECT * FROM f($1)");
    // Another result type under the same name: the cached plan may not change its result type.
    db.exec("DROP FUNCTION f(int); CREATE FUNCTION f(p int) RETURNS TABLE (a text, b int) "
            "LANGUAGE sql AS 'SELECT p::text || ''!'', p'");
    const auto rows = db.exec("SELECT * FROM f($1)", {"7"});
    CHECK(rows.text(0, 0) == "7!");
    CHECK(rows.text(0, 1) == "7");
    // Inside a transaction the failed statement has aborted it: no second try, the error shows,
    // and after the rollback (which restored f) the statement runs again.
    db.exec("BEGIN");
    db.exec("DROP FUNCTION f(int); CREATE FUNCTION f(p int) RETURNS TABLE (c int) LANGUAGE sql AS 'SELECT p'");
    CHECK_THROWS_WITH_AS(db.exec("SELECT * FROM f($1)", {"9"}),
                         doctest::Contains("cached plan must not change result type"), PgError);
    db.exec("ROLLBACK");
    CHECK(db.exec("SELECT * FROM f($1)", {"10"}).text(0, 0) == "10!");
  }

  TEST_CASE("past the limit of prepared texts the others run unprepared, errors name the server" *
            doctest::timeout(120)) {
    PostgresServer pg;
    PgSession db = PgSession::open(pg.conninfo());
    const std::size_t texts = PgSession::kMaxPrepared + 6;
    for (std::size_t k = 0; k < texts; ++k) {
      CHECK(db.exec(fmt::format("SELECT $1::int + {}", k), {"1"}).text(0, 0) == std::to_string(k + 1));
      CHECK(db.exec(fmt::format("SELECT $1::int + {}", k), {"2"}).text(0, 0) == std::to_string(k + 2));
    }
    CHECK(db.exec("SELECT count(*) FROM pg_prepared_statements").text(0, 0) ==
          std::to_string(PgSession::kMaxPrepared));
    // A statement that cannot be prepared fails with the server's words and leaves nothing
    // prepared behind: the session goes on.
    PgSession fresh = PgSession::open(pg.conninfo());
    for (int n = 0; n < 2; ++n) {
      CHECK_THROWS_WITH_AS(fresh.exec("SELECT $1::int FROM no_such_table", {"1"}),
                           doctest::Contains("cluster database at host 127.0.0.1"), PgError);
      CHECK_THROWS_WITH_AS(fresh.exec("SELECT $1::int FROM no_such_table", {"1"}),
                           doctest::Contains("relation \"no_such_table\" does not exist"), PgError);
    }
    CHECK(fresh.exec("SELECT $1::int * 2", {"21"}).text(0, 0) == "42");
    CHECK(prepared(fresh) == "sandglass_1: SELECT $1::int * 2");
  }

  TEST_CASE("a session names the server libpq reached, also when PGHOST and PGPORT name it" *
            doctest::timeout(120)) {
    PostgresServer pg;
    const std::string port = std::to_string(pg.port());
    ::setenv("PGHOST", "127.0.0.1", 1);
    ::setenv("PGPORT", port.c_str(), 1);
    PgSession db = PgSession::open("dbname=postgres user=postgres");
    ::unsetenv("PGHOST");
    ::unsetenv("PGPORT");
    CHECK(db.server() == "host 127.0.0.1 port " + port + " database postgres");
    const std::string named = "cluster database at host 127.0.0.1 port " + port + " database postgres";
    CHECK_THROWS_WITH_AS(db.exec("SELECT 1 FROM no_such_table"), doctest::Contains(named.c_str()),
                         PgError);
  }
}
