// outcome_listener.hpp — the test's own LISTEN on sandglass_outcome, to see which outcomes the
// cluster announces (daemon/cluster/migrations/008_awaited_outcomes.sql).
//
//   OutcomeListener heard{c.pg};        // LISTENs from now on
//   ... jobs end ...
//   std::vector<std::uint64_t> ids = heard.announced();   // every id announced until now
//
// `announced` is exact, not a sample: it sends a NOTIFY on a channel of its own from another
// connection and reads until that one arrives. PostgreSQL delivers a session's notifications
// in commit order, so every outcome announced by a transaction that committed before the call
// has arrived by then.
//
// Thread safety: one thread uses an object.
#pragma once

#include "postgres_server.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::testing {

class OutcomeListener {
 public:
  explicit OutcomeListener(const PostgresServer& pg) : pg_{pg}, conn_{PQconnectdb(pg.conninfo().c_str())} {
    if (PQstatus(conn_.get()) != CONNECTION_OK) throw std::runtime_error{PQerrorMessage(conn_.get())};
    exec("LISTEN sandglass_outcome; LISTEN outcome_listener_fence");
  }

  // The job ids of every line announced on sandglass_outcome since the last call (or since
  // construction), in the order announced. Blocks up to 10 s for its own fence.
  std::vector<std::uint64_t> announced() {
    const std::string fence = std::to_string(++fences_);
    pg_.execute("SELECT pg_notify('outcome_listener_fence', '" + fence + "')");
    std::vector<std::uint64_t> ids;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
    while (std::chrono::steady_clock::now() < until) {
      if (PQconsumeInput(conn_.get()) == 0) throw std::runtime_error{PQerrorMessage(conn_.get())};
      while (PGnotify* n = PQnotifies(conn_.get())) {
        const std::string channel = n->relname;
        const std::string payload = n->extra;
        PQfreemem(n);
        if (channel == "outcome_listener_fence") {
          if (payload == fence) return ids;
          continue;
        }
        // One line "ID KIND RUN_US" per outcome (003_batched.sql).
        std::string_view lines{payload};
        while (!lines.empty()) {
          const std::size_t nl = lines.find('\n');
          const std::string_view line = lines.substr(0, nl);
          ids.push_back(std::stoull(std::string{line.substr(0, line.find(' '))}));
          lines = nl == std::string_view::npos ? std::string_view{} : lines.substr(nl + 1);
        }
      }
      pollfd p{.fd = PQsocket(conn_.get()), .events = POLLIN, .revents = 0};
      ::poll(&p, 1, 100);
    }
    throw std::runtime_error{"OutcomeListener: its own fence NOTIFY did not arrive within 10 s"};
  }

 private:
  struct ConnDeleter {
    void operator()(PGconn* c) const noexcept { PQfinish(c); }
  };

  void exec(const std::string& sql) {
    PGresult* r = PQexec(conn_.get(), sql.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    if (!ok) throw std::runtime_error{PQerrorMessage(conn_.get())};
  }

  const PostgresServer& pg_;
  std::unique_ptr<PGconn, ConnDeleter> conn_;
  int fences_ = 0;
};

}  // namespace sandglass::testing
