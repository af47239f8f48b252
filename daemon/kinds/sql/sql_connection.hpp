// sql_connection.hpp (private) — `SqlConnection`, one libpq connection driven without blocking
// on the server: every wait is a poll() on the connection's socket and on a job's `CancelWake`,
// so cancellation reaches a running statement without a thread or a timer per job.
//
//   CancelWake wake{ctx.token()};
//   SqlOpen opened = SqlConnection::open(conninfo, Deadline::after(5s), wake.fd());
//   StatementReport r = opened.connection->run(request, wake.fd(), 1s, [&] { return commit(); });
//   if (opened.connection->reusable()) pool_it(); else drop_it();
//
// `run` sends, in one pipeline (one round trip), `set_config('statement_timeout', ..., true)`
// with the budget the caller computed right before, then the statement; with `transaction`,
// BEGIN first and, after `commit_point` agreed, COMMIT. When the wake fires during the
// statement it sends a cancel request (PQcancel, again every 100 ms while unconfirmed) and waits
// at most `cancel_grace` for the server to confirm. Past the commit point the wake no longer
// cancels, but the wait for COMMIT's answer ends at max(deadline, now) + cancel_grace: a server
// that stops answering then ends the job as lost in phase commit (whether it committed is
// unknown) instead of holding the worker until TCP gives up. A ROLLBACK is bounded the same way.
//
// Thread safety: a connection belongs to one thread at a time; `CancelWake` is written by the
// cancelling thread and read by the job's.
#pragma once

#include "daemon/kinds/exec/child_process.hpp"

#include <sandglass/cancel.hpp>
#include <sandglass/deadline.hpp>

#include <boost/json/array.hpp>

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::daemon {

// An eventfd that becomes readable when `token` is cancelled (at once if it already is).
class CancelWake {
 public:
  // Throws std::system_error when no eventfd can be made.
  explicit CancelWake(const CancelToken& token);
  int fd() const noexcept { return fd_.get(); }

 private:
  UniqueFd fd_;
  CancelRegistration registration_;  // last: deregistered before the fd closes
};

// Where a sql job was when it ended.
enum class SqlPhase : std::uint8_t { pool, connect, statement, commit };
std::string_view to_string(SqlPhase phase) noexcept;

class SqlConnection;

struct SqlOpen {
  enum class End : std::uint8_t { ok, failed, woken, timed_out };
  End end = End::failed;
  std::unique_ptr<SqlConnection> connection;  // set when ok
  std::string error;  // when failed: a fixed text, never libpq's (it can quote the conninfo)
};

struct StatementRequest {
  const std::string& sql;
  const std::vector<std::optional<std::string>>& params;  // nullopt is SQL NULL; text format
  std::chrono::milliseconds statement_timeout{1};         // positive
  bool transaction = false;
  std::size_t max_rows = 0;
  TimePoint deadline = TimePoint::max();  // the job's: bounds the wait for COMMIT (see run)
};

struct StatementReport {
  enum class End : std::uint8_t {
    ok,                 // done (and committed, with a transaction)
    error,              // the server refused or failed it; see error, sqlstate
    cancelled,          // we sent a cancel request and the statement ended
    statement_timeout,  // the server's statement_timeout ended it
    lost,               // the connection broke, or the server did not confirm a cancel in time
    commit_refused,     // commit_point said no (the job was cancelled); rolled back
  };
  End end = End::ok;
  SqlPhase phase = SqlPhase::statement;  // statement, or commit once COMMIT was sent
  std::string error;
  std::string sqlstate;
  // With an error: the parameter (0-based) the server says it is about, when it names one.
  std::optional<std::size_t> parameter;
  boost::json::array columns;                 // column names
  boost::json::array rows;                    // at most max_rows arrays of values
  bool truncated = false;                     // the result had more rows
  std::optional<std::int64_t> affected_rows;  // for INSERT, UPDATE, DELETE, ...
  bool cancel_sent = false;
  bool committed = false;
};

class SqlConnection {
 public:
  // Opens a connection to `conninfo` (with client_encoding UTF8). Blocks until it is open or
  // failed, `until` passes (timed_out), or `wake_fd` becomes readable (woken).
  static SqlOpen open(const std::string& conninfo, Deadline until, int wake_fd);

  SqlConnection(const SqlConnection&) = delete;
  SqlConnection& operator=(const SqlConnection&) = delete;
  ~SqlConnection();  // closes the connection

  int backend_pid() const noexcept;

  // Runs one statement as described at the top. Blocks. `commit_point` is called only with a
  // transaction, after the statement succeeded: true sends COMMIT, false rolls back.
  StatementReport run(const StatementRequest& request, int wake_fd,
                      std::chrono::milliseconds cancel_grace,
                      const std::function<bool()>& commit_point);

  // True when the connection is proven clean: open, no result pending, not in pipeline mode, no
  // transaction open. Reads what the server sent since (a server that went away shows here).
  // Does not block.
  bool reusable() noexcept;

 private:
  class Exchange;
  SqlConnection(PGconn* conn, PGcancel* cancel) noexcept : conn_{conn}, cancel_{cancel} {}

  PGconn* conn_;
  PGcancel* cancel_;
  bool lost_ = false;  // a wait ended without proving the state; never reuse
};

}  // namespace sandglass::daemon
