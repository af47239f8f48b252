// outcome_listener.hpp — the test's own LISTEN on one of the cluster's channels, to see what the
// cluster announces: NotifyListener for any channel (payloads as sent), OutcomeListener for
// sandglass_outcome or a node's outcome channel (job ids; migrations/functions.sql, "Announced
// outcomes"), node_channel for a node's channel names.
//
//   OutcomeListener heard{c.pg};        // LISTENs from now on
//   ... jobs end ...
//   std::vector<std::uint64_t> ids = heard.announced();   // every id announced until now
//
//   OutcomeListener waited{c.pg, node_channel(c.pg, "outcome", "HOST:PORT")};  // one node's
//   NotifyListener queued{c.pg, "sandglass_queued"};
//   ... jobs are queued ...
//   std::vector<std::string> kinds = queued.payloads();    // every payload sent until now
//
// Both are exact, not samples: they send a NOTIFY on a channel of their own from another
// connection and read until that one arrives. PostgreSQL delivers a session's notifications in
// commit order, so everything announced by a transaction that committed before the call has
// arrived by then.
//
// Thread safety: one thread uses an object.
#pragma once

#include "postgres_server.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::testing {

class NotifyListener {
 public:
  NotifyListener(const PostgresServer& pg, std::string channel)
      : pg_{pg}, channel_{std::move(channel)}, conn_{PQconnectdb(pg.conninfo().c_str())} {
    if (PQstatus(conn_.get()) != CONNECTION_OK) throw std::runtime_error{PQerrorMessage(conn_.get())};
    exec("LISTEN " + channel_ + "; LISTEN notify_listener_fence");
  }

  // The payloads of every NOTIFY on the channel since the last call (or since construction), in
  // the order sent. Blocks up to 10 s for its own fence.
  std::vector<std::string> payloads() {
    // Unique among all listeners: each hears the others' fences too.
    static std::atomic<std::uint64_t> fences{0};
    const std::string fence = std::to_string(++fences);
    pg_.execute("SELECT pg_notify('notify_listener_fence', '" + fence + "')");
    std::vector<std::string> out;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
    while (std::chrono::steady_clock::now() < until) {
      if (PQconsumeInput(conn_.get()) == 0) throw std::runtime_error{PQerrorMessage(conn_.get())};
      while (PGnotify* n = PQnotifies(conn_.get())) {
        const std::string channel = n->relname;
        const std::string payload = n->extra;
        PQfreemem(n);
        if (channel == "notify_listener_fence") {
          if (payload == fence) return out;
          continue;
        }
        out.push_back(payload);
      }
      pollfd p{.fd = PQsocket(conn_.get()), .events = POLLIN, .revents = 0};
      ::poll(&p, 1, 100);
    }
    throw std::runtime_error{"NotifyListener: its own fence NOTIFY did not arrive within 10 s"};
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
  std::string channel_;
  std::unique_ptr<PGconn, ConnDeleter> conn_;
};

// The channel of `what` ("outcome": a node name; "cancel": an incarnation, its owner) of one
// node (functions.sql, sandglass_channel).
inline std::string node_channel(const PostgresServer& pg, const std::string& what, const std::string& name) {
  return pg.scalar("SELECT sandglass_channel('" + what + "', '" + name + "')");
}

class OutcomeListener {
 public:
  // On `channel`: sandglass_outcome (shared), or a node's outcome channel (node_channel).
  explicit OutcomeListener(const PostgresServer& pg, std::string channel = "sandglass_outcome")
      : listener_{pg, std::move(channel)} {}

  // The job ids of every line announced on the channel since the last call (or since
  // construction), in the order announced. Blocks up to 10 s for its own fence.
  std::vector<std::uint64_t> announced() {
    std::vector<std::uint64_t> ids;
    for (const std::string& payload : listener_.payloads()) {
      // One line "ID KIND RUN_US" per outcome (functions.sql, sandglass_notify_outcomes).
      std::string_view lines{payload};
      while (!lines.empty()) {
        const std::size_t nl = lines.find('\n');
        const std::string_view line = lines.substr(0, nl);
        ids.push_back(std::stoull(std::string{line.substr(0, line.find(' '))}));
        lines = nl == std::string_view::npos ? std::string_view{} : lines.substr(nl + 1);
      }
    }
    return ids;
  }

 private:
  NotifyListener listener_;
};

}  // namespace sandglass::testing
