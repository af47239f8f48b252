// pg_session.hpp (private) — `PgSession`, one blocking libpq connection owned by one thread of a
// cluster node, and `PgRows`, a result. Cluster threads each hold their own session and block on
// it (the sql kind's SqlConnection, by contrast, waits on a job's cancellation too; a cluster
// thread has no job to cancel, only its own stop, which `wait_notifications` watches).
//
//   PgSession db = PgSession::open(conninfo);            // throws PgError
//   PgRows rows = db.exec("SELECT $1::int + 1", {"41"});  // throws PgError
//   rows.text(0, 0);                                      // "42"
//
// Errors never carry the conninfo: they name the server as libpq resolved it (host or socket,
// port, database; `describe_server(conninfo)` when libpq names none), never the password. A broken connection is reported by `broken()`; the owner
// opens a new session.
//
// Thread safety: a session belongs to one thread at a time.
#pragma once

#include <sandglass/deadline.hpp>

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sandglass::daemon::cluster {

class PgError : public std::runtime_error {
 public:
  explicit PgError(const std::string& what, std::string sqlstate = {})
      : std::runtime_error{what}, sqlstate_{std::move(sqlstate)} {}
  // The server's SQLSTATE; empty when the error is the connection's or the client's.
  const std::string& sqlstate() const noexcept { return sqlstate_; }
  // The session's statement_timeout or lock_timeout ended the statement (SQLSTATE 57014 or
  // 55P03): the server is there but busy or locked; the session is usable.
  bool timed_out() const noexcept { return sqlstate_ == "57014" || sqlstate_ == "55P03"; }

 private:
  std::string sqlstate_;
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

// Server-side limits of a session (statement_timeout, lock_timeout,
// idle_in_transaction_session_timeout): a statement past one fails with the server's error
// (the session stays usable), a session idle in a transaction past the last one is ended.
struct SessionTimeouts {
  std::chrono::milliseconds statement{0};  // 0: the server's (or the role's) setting
  std::chrono::milliseconds lock{0};
  std::chrono::milliseconds idle_in_transaction{0};
};

class PgSession {
 public:
  // Connects (connect_timeout 5 s unless the conninfo names one; TCP keepalives and a 10 s TCP
  // user timeout, so a vanished server breaks the session instead of hanging it) and sets
  // `timeouts` for the session. Blocks. Throws PgError naming the server.
  static PgSession open(const std::string& conninfo, const SessionTimeouts& timeouts = {});

  // Sets `timeouts` for the rest of this session (one statement). Blocks. Throws PgError.
  void limit(const SessionTimeouts& timeouts);

  PgSession(PgSession&&) noexcept = default;
  PgSession& operator=(PgSession&&) noexcept = default;

  // Runs one statement with text parameters (nullopt is NULL). Blocks. Throws PgError with the
  // server's message (or "connection lost"), naming the server.
  //
  // A statement with parameters is prepared on its first run in this session (PQprepare, one
  // more round trip) and then run by name, so the server parses, analyses and plans it once per
  // session instead of once per call: in the claims step 8 claimers in a closed loop went from
  // p50 3.1-3.4 to 2.7-3.0 ms and from 15,900-17,600 to 18,500-21,000 jobs/s (three alternated
  // pairs, as measured with the cluster bench). The server then plans it as it plans every
  // prepared statement (custom plans first, a generic one when that costs no more). Up to
  // kMaxPrepared texts; any beyond run unprepared. A statement the server no longer knows or
  // whose cached plan it refuses (a pooler's DISCARD, a function replaced with another result
  // type) is prepared again and run once more, outside a transaction only. Without parameters
  // the text may hold several statements (a migration file) and is never prepared.
  PgRows exec(const std::string& sql, const std::vector<std::optional<std::string>>& params = {});
  static constexpr std::size_t kMaxPrepared = 64;

  // Waits until a notification arrives, `wake_fd` is readable (when not -1) or `until` passes;
  // returns the notifications received (maybe none). Blocks. Throws PgError when the connection
  // broke.
  std::vector<Notification> wait_notifications(Deadline until, int wake_fd);

  bool broken() const noexcept { return conn_ == nullptr || PQstatus(conn_.get()) != CONNECTION_OK; }
  const std::string& server() const noexcept { return server_; }
  // A number its user keeps with the session (a cluster node: the lease epoch its
  // application_name was set for); 0 when new.
  std::uint64_t label() const noexcept { return label_; }
  void set_label(std::uint64_t label) noexcept { label_ = label; }

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
  PgRows checked(PGresult* result);  // throws PgError unless the statement succeeded
  void prepare(const std::string& name, const std::string& sql, int params);  // throws PgError
  // The name `sql` is prepared under in this session (prepared now if new); nullptr when
  // kMaxPrepared texts are prepared already.
  const std::string* prepared_name(const std::string& sql, int params);

  std::unique_ptr<PGconn, Finish> conn_;
  std::string server_;
  std::uint64_t label_ = 0;
  Backend backend_;
  std::unordered_map<std::string, std::string> prepared_;  // statement text -> its name
};

// A text array literal for a parameter: {"a","b"} with quotes and backslashes escaped.
std::string text_array(const std::vector<std::string>& items);
std::string text_array(const std::vector<std::optional<std::string>>& items);  // nullopt: NULL
std::string int_array(const std::vector<std::int64_t>& items);

}  // namespace sandglass::daemon::cluster
