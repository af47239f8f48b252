// pg_session.hpp (private) — `PgSession`, one blocking libpq connection owned by one thread of a
// cluster node, and `PgRows`, a result. Cluster threads each hold their own session and block on
// it (the sql kind's SqlConnection, by contrast, waits on a job's cancellation too; a cluster
// thread has no job to cancel, only its own stop, which `wait_notifications` watches).
//
//   PgSession db = PgSession::open(conninfo);            // throws PgError
//   PgRows rows = db.exec("SELECT $1::int + 1", {"41"});  // throws PgError
//   rows.text(0, 0);                                      // "42"
//
// Errors never carry the conninfo: they name the server by `describe_server(conninfo)` (host,
// port, database), never the password. A broken connection is reported by `broken()`; the owner
// opens a new session.
//
// Thread safety: a session belongs to one thread at a time.
#pragma once

#include <sandglass/deadline.hpp>

#include <libpq-fe.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::daemon::cluster {

class PgError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "host 127.0.0.1 port 5432 database app" from a conninfo (libpq's defaults for what it omits);
// never its password. An unparsable conninfo: "an invalid conninfo".
std::string describe_server(const std::string& conninfo);

class PgRows {
 public:
  explicit PgRows(PGresult* result) noexcept : result_{result} {}
  int rows() const noexcept { return PQntuples(result_.get()); }
  bool null(int row, int column) const noexcept { return PQgetisnull(result_.get(), row, column); }
  std::string_view text(int row, int column) const noexcept {
    return {PQgetvalue(result_.get(), row, column),
            static_cast<std::size_t>(PQgetlength(result_.get(), row, column))};
  }
  std::int64_t integer(int row, int column) const;  // 0 for NULL
  bool boolean(int row, int column) const noexcept { return text(row, column) == "t"; }

 private:
  struct Clear {
    void operator()(PGresult* r) const noexcept { PQclear(r); }
  };
  std::unique_ptr<PGresult, Clear> result_;
};

struct Notification {
  std::string channel;
  std::string payload;
};

class PgSession {
 public:
  // Connects (connect_timeout 5 s unless the conninfo names one; TCP keepalives and a 10 s TCP
  // user timeout, so a vanished server breaks the session instead of hanging it). Blocks.
  // Throws PgError naming the server.
  static PgSession open(const std::string& conninfo);

  PgSession(PgSession&&) noexcept = default;
  PgSession& operator=(PgSession&&) noexcept = default;

  // Runs one statement with text parameters (nullopt is NULL). Blocks. Throws PgError with the
  // server's message (or "connection lost"), naming the server.
  PgRows exec(const std::string& sql, const std::vector<std::optional<std::string>>& params = {});

  // Waits until a notification arrives, `wake_fd` is readable (when not -1) or `until` passes;
  // returns the notifications received (maybe none). Blocks. Throws PgError when the connection
  // broke.
  std::vector<Notification> wait_notifications(Deadline until, int wake_fd);

  bool broken() const noexcept { return conn_ == nullptr || PQstatus(conn_.get()) != CONNECTION_OK; }
  const std::string& server() const noexcept { return server_; }

  // The server process behind this session, as pg_stat_activity names it: its pid and its
  // backend_start (text, exact to the microsecond), which together tell it apart from a later
  // process that reuses the pid. Read at open; still valid after the session broke (the process
  // may outlive the connection: see lost_claims.cpp).
  struct Backend {
    int pid = 0;
    std::string started;
  };
  const Backend& backend() const noexcept { return backend_; }

 private:
  struct Finish {
    void operator()(PGconn* c) const noexcept { PQfinish(c); }
  };
  PgSession(PGconn* conn, std::string server) : conn_{conn}, server_{std::move(server)} {}
  [[noreturn]] void fail(std::string_view what);

  std::unique_ptr<PGconn, Finish> conn_;
  std::string server_;
  Backend backend_;
};

// A text array literal for a parameter: {"a","b"} with quotes and backslashes escaped.
std::string text_array(const std::vector<std::string>& items);
std::string text_array(const std::vector<std::optional<std::string>>& items);  // nullopt: NULL
std::string int_array(const std::vector<std::int64_t>& items);

}  // namespace sandglass::daemon::cluster
