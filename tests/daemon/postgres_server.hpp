// postgres_server.hpp — a real PostgreSQL 15 server for tests: a fresh cluster (initdb) in a
// temporary folder, listening on 127.0.0.1 on a free port, its unix socket inside that folder,
// trust authentication for local connections only. When the tests run as root, the server runs
// as the unprivileged user `postgres` (PostgreSQL refuses root) and the folder is theirs.
//
//   PostgresServer pg;                                   // Blocks: initdb, start, wait ready
//   pg.execute("CREATE TABLE t (x int)");
//   std::string n = pg.scalar("SELECT count(*) FROM t");   // "0"
//   pg.stop(); pg.start();                               // same port, same data
//
// The destructor stops the server by its own PID (fast shutdown) and removes the folder.
// Missing server binaries are an error with a clear message (`make test` installs them).
//
// Thread safety: one thread uses a server object.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sandglass::testing {

class PostgresServer {
 public:
  // Throws std::runtime_error (with initdb's or the server's log) when it cannot start.
  PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;
  ~PostgresServer();

  std::uint16_t port() const noexcept { return port_; }
  // "host=127.0.0.1 port=N dbname=postgres user=postgres"
  std::string conninfo() const;

  // Starts the server on the same port and folder. Blocks until it accepts connections.
  void start();
  // Fast shutdown (SIGINT to the postmaster: sessions are ended). Blocks until it has exited.
  void stop();

  // Runs `sql` on a fresh connection; the rows as text (SQL NULL as ""). Throws on error.
  std::vector<std::vector<std::string>> query(const std::string& sql) const;
  void execute(const std::string& sql) const { query(sql); }
  // The first column of the first row; throws when there is no row.
  std::string scalar(const std::string& sql) const;

 private:
  std::string folder_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace sandglass::testing
