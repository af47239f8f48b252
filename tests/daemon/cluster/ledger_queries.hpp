// ledger_queries.hpp — the `sql` kind of a cluster test's node writing a ledger on the cluster's
// own server, so that a test counts a job's effects past its commit point with a query.
//
//   const std::string tables = ledger_queries(c.pg, {{"record", "INSERT INTO ledger (note) VALUES ($1)"}});
//   c.node({"sql"}, 2, {}, tables);   // a job {"kind":"sql","args":{"query":"record","params":["x"]}}
#pragma once

#include "postgres_server.hpp"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

namespace sandglass::testing {

// The [databases.main] table (a pool of `pool_size` sessions) and a [queries.NAME] table per
// (name, sql) of `queries`: one parameter each, `commits = true` (the job passes its commit
// point after its statement and before its COMMIT).
inline std::string ledger_queries(const PostgresServer& pg,
                                  const std::vector<std::pair<std::string, std::string>>& queries,
                                  int pool_size = 4) {
  std::string text = fmt::format("\n[databases.main]\nconninfo = \"{}\"\npool_size = {}\n", pg.conninfo(), pool_size);
  for (const auto& [name, sql] : queries) {
    text += fmt::format("\n[queries.{}]\ndatabase = \"main\"\nsql = \"{}\"\nparams = 1\ncommits = true\n", name, sql);
  }
  return text;
}

}  // namespace sandglass::testing
