// sql_config.hpp — `DatabaseConfig` and `QueryConfig`, the `[databases.NAME]` and
// `[queries.NAME]` tables of sandglassd's config, which the `sql` job kind serves.
//
//   [databases.main]
//   conninfo = "host=127.0.0.1 port=5432 dbname=app user=app"
//   pool_size = 4
//
//   [queries.order_total]
//   database = "main"
//   sql = "SELECT sum(amount) AS total FROM orders WHERE customer = $1"
//   params = 1
//
// Clients name a query and pass its parameters; they never send SQL text.
//
// Time rules: durations are whole milliseconds in the file (`connect_timeout_ms`), positive.
//
// Thread safety: value types.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace sandglass::daemon {

// One database the `sql` kind may use, with its own bounded connection pool.
struct DatabaseConfig {
  std::string conninfo;                             // libpq connection string or URI
  std::size_t pool_size = 4;                        // most connections open at once
  std::chrono::milliseconds connect_timeout{5'000}; // to open one connection (within the budget)
  std::chrono::milliseconds cancel_grace{1'000};    // after a cancel request, how long the server
                                                    // may take to confirm it before the connection
                                                    // is closed instead of reused
  std::size_t max_rows = 1'000;                     // rows a result carries; the rest are dropped
};

// One statement a client may run by name.
struct QueryConfig {
  std::string database;  // a key of DaemonConfig::databases
  std::string sql;       // one statement; parameters are $1 .. $N
  std::size_t params = 0;  // N: how many parameters a request must pass
  bool commits = false;  // runs in a transaction whose COMMIT is the job's commit point
};

}  // namespace sandglass::daemon
