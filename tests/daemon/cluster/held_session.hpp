// held_session.hpp — one PostgreSQL session of a test's own, kept open (PostgresServer::query
// opens one per statement), to hold a transaction or a lock across a node's statements, as a
// DBA's psql would.
//
//   HeldSession dba{c.pg.conninfo()};
//   dba.exec("BEGIN");
//   dba.exec("SELECT * FROM sandglass_jobs WHERE id = 1 FOR UPDATE");
//
// Thread safety: one thread uses a session.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace sandglass::testing {

class HeldSession {
 public:
  // Throws std::runtime_error when it cannot connect.
  explicit HeldSession(const std::string& conninfo) : conn_{PQconnectdb(conninfo.c_str()), PQfinish} {
    if (PQstatus(conn_.get()) != CONNECTION_OK) throw std::runtime_error{PQerrorMessage(conn_.get())};
  }
  // Runs `sql`. Blocks. Throws std::runtime_error with the server's message.
  void exec(const std::string& sql) {
    const std::unique_ptr<PGresult, void (*)(PGresult*)> r{PQexec(conn_.get(), sql.c_str()), PQclear};
    const ExecStatusType s = PQresultStatus(r.get());
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) throw std::runtime_error{PQerrorMessage(conn_.get())};
  }
  // The first value of `sql`'s first row ("" when none). Blocks. Throws as `exec`.
  std::string scalar(const std::string& sql) {
    const std::unique_ptr<PGresult, void (*)(PGresult*)> r{PQexec(conn_.get(), sql.c_str()), PQclear};
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) throw std::runtime_error{PQerrorMessage(conn_.get())};
    return PQntuples(r.get()) > 0 ? std::string{PQgetvalue(r.get(), 0, 0)} : std::string{};
  }

 private:
  std::unique_ptr<PGconn, void (*)(PGconn*)> conn_;
};

}  // namespace sandglass::testing
