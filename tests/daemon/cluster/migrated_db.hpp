// migrated_db.hpp — a real PostgreSQL migrated by `sandglassd --migrate`, with one live node row,
// for the tests that call the cluster's statements directly.
//
//   MigratedDb db{/*workers=*/2, /*capacity=*/100};
//   db.rows("SELECT * FROM sandglass_claim('n1/1', 'n1', 3, '{sleep}', '{0}')");
#pragma once

#include "daemon_test_support.hpp"
#include "postgres_server.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>
#include <vector>

namespace sandglass::testing {

// A migrated database with one live node row ("n1": `workers` workers, queue `capacity`).
struct MigratedDb {
  explicit MigratedDb(int workers = 2, int capacity = 100) {
    const std::string path = write_temp_file("cluster.toml", "[cluster]\nconninfo = \"" + pg.conninfo() + "\"\n");
    const RunResult r = run_sandglassd({"--config", path, "--migrate"});
    REQUIRE(r.exit_code == 0);
    pg.execute(fmt::format("INSERT INTO sandglass_nodes (owner, node, workers, capacity) "
                           "VALUES ('n1/1', 'n1', {}, {})", workers, capacity));
  }
  std::vector<std::vector<std::string>> rows(const std::string& sql) const { return pg.query(sql); }
  PostgresServer pg;
};

}  // namespace sandglass::testing
