// The [cluster] table: defaults, each key's checks, and errors naming the dotted key.
#include <sandglass/daemon/daemon_config.hpp>

#include <doctest/doctest.h>

#include <string>

using sandglass::daemon::ConfigError;
using sandglass::daemon::parse_config;

namespace {

std::string error_key(const std::string& toml) {
  try {
    parse_config(toml).validate();
  } catch (const ConfigError& e) {
    return e.key();
  }
  return "";
}

}  // namespace

TEST_SUITE("cluster config") {

TEST_CASE("without [cluster] there is no cluster, with it the defaults apply") {
  CHECK_FALSE(parse_config("").cluster.has_value());
  const auto c = parse_config("[cluster]\nconninfo = \"host=10.0.0.5 dbname=q\"\n");
  REQUIRE(c.cluster.has_value());
  CHECK(c.cluster->conninfo == "host=10.0.0.5 dbname=q");
  CHECK(c.cluster->node.empty());
  CHECK(c.cluster->claim_batch == 16);
  CHECK_FALSE(c.cluster->claim_ahead.has_value());
  CHECK(c.cluster->heartbeat == std::chrono::milliseconds{200});
  CHECK(c.cluster->lease == std::chrono::milliseconds{2'000});
  CHECK(c.cluster->kinds.empty());
  c.validate();
}

TEST_CASE("every key is read") {
  const auto c = parse_config(
      "[cluster]\nconninfo = \"dbname=q\"\nnode = \"eu-1\"\nclaim_batch = 64\nclaim_ahead = 5\n"
      "heartbeat_ms = 100\nlease_ms = 900\npoll_ms = 50\nkinds = [\"sleep\", \"sql\"]\n");
  CHECK(c.cluster->node == "eu-1");
  CHECK(c.cluster->claim_batch == 64);
  CHECK(c.cluster->claim_ahead == 5);
  CHECK(c.cluster->heartbeat == std::chrono::milliseconds{100});
  CHECK(c.cluster->lease == std::chrono::milliseconds{900});
  CHECK(c.cluster->poll == std::chrono::milliseconds{50});
  CHECK(c.cluster->kinds == std::vector<std::string>{"sleep", "sql"});
}

TEST_CASE("bad [cluster] keys are errors naming the dotted key") {
  CHECK(error_key("[cluster]\nnode = \"x\"\n") == "cluster.conninfo");
  CHECK(error_key("[cluster]\nconninfo = \"\"\n") == "cluster.conninfo");
  CHECK(error_key("[cluster]\nconninfo = \"dbname=q\"\nclaim_batch = 0\n") == "cluster.claim_batch");
  CHECK(error_key("[cluster]\nconninfo = \"dbname=q\"\nclaim_ahead = -1\n") == "cluster.claim_ahead");
  CHECK(error_key("[cluster]\nconninfo = \"dbname=q\"\nclaim_ahead = \"4\"\n") == "cluster.claim_ahead");
  // Every job a node holds must fit its local queue: capacity 10 − workers 8 leaves room for 2.
  CHECK(error_key("[runtime]\nworkers = 8\ncapacity = 10\n[cluster]\nconninfo = \"dbname=q\"\n"
                  "claim_ahead = 3\n") == "cluster.claim_ahead");
  CHECK_NOTHROW(parse_config("[runtime]\nworkers = 8\ncapacity = 10\n[cluster]\nconninfo = \"dbname=q\"\n"
                             "claim_ahead = 2\n").validate());
  CHECK(error_key("[cluster]\nconninfo = \"dbname=q\"\nheartbeat_ms = 5\n") == "cluster.heartbeat_ms");
  CHECK(error_key("[cluster]\nconninfo = \"dbname=q\"\nheartbeat_ms = 500\nlease_ms = 500\n") ==
        "cluster.lease_ms");
  CHECK(error_key("[cluster]\nconninfo = \"dbname=q\"\nkinds = [\"\"]\n") == "cluster.kinds");
  CHECK(error_key("[cluster]\nconninfo = \"dbname=q\"\nkinds = \"sleep\"\n") == "cluster.kinds");
  CHECK(error_key("[cluster]\nconninfo = \"dbname=q\"\nlease = 3\n") == "cluster.lease");
  CHECK(error_key("cluster = 3\n") == "cluster");
}

}  // TEST_SUITE
