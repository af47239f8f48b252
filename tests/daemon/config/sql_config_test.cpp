// [databases.NAME] and [queries.NAME]: parsed values, and errors that name the dotted key.
#include <sandglass/daemon/sql_config.hpp>
#include <sandglass/daemon/daemon_config.hpp>

#include "config_test_support.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <string_view>

using namespace std::chrono_literals;
using sandglass::daemon::DaemonConfig;
using sandglass::daemon::parse_config;
using sandglass::testing::config_error;
using sandglass::testing::Thrown;

namespace {

constexpr std::string_view kDatabase = "[databases.main]\nconninfo = \"host=127.0.0.1 dbname=app\"\n";

}  // namespace

TEST_SUITE("sql config") {
  TEST_CASE("databases and queries are read with their defaults") {
    const DaemonConfig c = parse_config(std::string{kDatabase} +
                                        "pool_size = 8\nconnect_timeout_ms = 250\nmax_rows = 10\n"
                                        "[databases.spare]\nconninfo = \"postgresql://x/y\"\n"
                                        "[queries.total]\ndatabase = \"main\"\nsql = \"SELECT $1\"\n"
                                        "params = 1\ncommits = true\n");
    REQUIRE(c.databases.size() == 2);
    const auto& main = c.databases.at("main");
    CHECK(main.conninfo == "host=127.0.0.1 dbname=app");
    CHECK(main.pool_size == 8);
    CHECK(main.connect_timeout == 250ms);
    CHECK(main.cancel_grace == 1000ms);
    CHECK(main.max_rows == 10);
    const auto& spare = c.databases.at("spare");
    CHECK(spare.pool_size == 4);
    CHECK(spare.max_rows == 1000);
    const auto& total = c.queries.at("total");
    CHECK(total.database == "main");
    CHECK(total.sql == "SELECT $1");
    CHECK(total.params == 1);
    CHECK(total.commits);
    CHECK_NOTHROW(c.validate());
  }

  TEST_CASE("each bad key is an error that names it") {
    struct Case {
      std::string toml;
      std::string key;
      std::string message;
    };
    const Case cases[] = {
        {"[databases.main]\npool_size = 2\n", "databases.main.conninfo", "is required"},
        {"[databases.main]\nconninfo = \"\"\n", "databases.main.conninfo", "must be a non-empty string, got \"\""},
        {std::string{kDatabase} + "pool_size = 0\n", "databases.main.pool_size",
         "must be an integer between 1 and 1000, got 0"},
        {std::string{kDatabase} + "pool_size = \"4\"\n", "databases.main.pool_size",
         "must be an integer between 1 and 1000, got \"4\""},
        {std::string{kDatabase} + "connect_timeout_ms = 0\n", "databases.main.connect_timeout_ms",
         "must be an integer between 1 and 604800000, got 0"},
        {std::string{kDatabase} + "max_rows = -1\n", "databases.main.max_rows",
         "must be an integer between 0 and 1000000, got -1"},
        {std::string{kDatabase} + "host = \"x\"\n", "databases.main.host",
         "unknown key; known keys here: conninfo, pool_size, connect_timeout_ms, cancel_grace_ms, max_rows"},
        {"[databases]\nmain = 1\n", "databases.main", "must be a table, got 1"},
        {std::string{kDatabase} + "[queries.q]\nsql = \"SELECT 1\"\n", "queries.q.database", "is required"},
        {std::string{kDatabase} + "[queries.q]\ndatabase = \"main\"\n", "queries.q.sql", "is required"},
        {std::string{kDatabase} + "[queries.q]\ndatabase = \"main\"\nsql = \"SELECT 1\"\ncommits = 1\n",
         "queries.q.commits", "must be true or false, got 1"},
        {std::string{kDatabase} + "[queries.q]\ndatabase = \"main\"\nsql = \"SELECT 1\"\nparams = -1\n",
         "queries.q.params", "must be an integer between 0 and 65535, got -1"},
        {std::string{kDatabase} + "[queries.q]\ndatabase = \"main\"\nsql = \"SELECT 1\"\ntext = \"x\"\n",
         "queries.q.text", "unknown key; known keys here: database, sql, params, commits"},
        {std::string{kDatabase} + "[queries.q]\ndatabase = \"other\"\nsql = \"SELECT 1\"\n",
         "queries.q.database", "names no [databases.other] table"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.toml);
      const Thrown e = config_error(c.toml);
      CHECK(e.key == c.key);
      CHECK(e.what == c.key + ": " + c.message);
    }
  }
}
