// sql {"query": NAME, "params": [...]}: runs a statement from the config's `[queries.NAME]` on
// its database's pool (see sql_config.hpp). Clients never send SQL text.
//
//   result  {"query": NAME, "columns": ["id", ...], "rows": [[1, ...], ...], "row_count": 1,
//            "truncated": false, "affected_rows": 1, "committed": true}
//
// `rows` holds at most the database's max_rows rows; `truncated` says whether there were more.
// Values: SQL NULL is null; booleans, integers and floats become JSON booleans and numbers; json
// and jsonb become JSON; everything else (numeric, text, dates, ...) is the server's text.
// `affected_rows` is there for statements that report a count (INSERT, UPDATE, DELETE, SELECT);
// `committed` for queries with `commits = true`.
//
// Time: the job waits for a connection (phase `pool`) and opens one when its slot has none
// (phase `connect`, at most connect_timeout_ms) on its own budget. Right before the statement
// is sent, the server's statement_timeout is set to the remaining budget minus the reserve
// (budget.reserve_ms) in the same round trip, so the server stops the statement on time even if
// this daemon is gone. Cancellation (deadline, caller, upstream, shutdown) sends a cancel
// request to the server; the job ends once the server confirms, or after cancel_grace_ms with
// the connection closed. A connection goes back to the pool only when it is proven clean.
//
// Commit point (`commits = true`): the statement runs inside BEGIN ... COMMIT. Once COMMIT is
// sent, cancellation no longer stops the job; if one arrives, the outcome is
// completed_after_cancel, and an idempotency key returns the committed result afterwards.
//
// Failures name the phase in the result ("phase": pool, connect, statement or commit):
//   - a job that ran out of budget or was cancelled: cancelled, with its cause (504, 499, ...)
//   - the server's statement_timeout: cancelled with cause deadline (504)
//   - a database that cannot be reached: failed, "database NAME is unavailable: ..." with a
//     fixed reason (libpq's message can quote the conninfo); at once when refused, after up to
//     connect_timeout_ms (and the budget) when the host drops packets
//   - COMMIT or ROLLBACK unanswered by the deadline plus cancel_grace_ms: failed, connection
//     lost (for COMMIT: whether it committed is unknown)
//   - an error of the statement: failed, with the server's message and "sqlstate"; a value the
//     server refuses (SQLSTATE class 22, data exception: "abc" for a numeric parameter) is the
//     client's when the server names the parameter: failed, invalid_input (400), the result's
//     "field" naming it ("args.params[1]"); one it ties to no parameter (a division by zero)
//     stays a failed statement
#include "daemon/kinds/builtin_kinds.hpp"
#include "daemon/kinds/configured_estimate_key.hpp"
#include "daemon/kinds/sql/sql_connection.hpp"
#include "daemon/kinds/sql/sql_metrics.hpp"
#include "daemon/kinds/sql/sql_pool.hpp"

#include <sandglass/deadline.hpp>

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sandglass::daemon {
namespace {

using std::chrono::milliseconds;

struct Database {
  Database(std::string database_name, DatabaseConfig c, SqlMetrics& m)
      : name{std::move(database_name)}, config{std::move(c)}, pool{config.pool_size}, metrics{m} {}
  const std::string name;
  const DatabaseConfig config;
  SqlPool pool;
  SqlMetrics& metrics;
};

struct Query {
  std::string name;
  QueryConfig config;
  Database* database;
};

struct SqlKind {
  SqlMetrics metrics;  // first: the pools it reads at render time go before it
  std::map<std::string, std::unique_ptr<Database>, std::less<>> databases;
  std::map<std::string, Query, std::less<>> queries;
};

using Params = std::vector<std::optional<std::string>>;

Params read_params(const boost::json::object& args, const Query& query) {
  const std::size_t want = query.config.params;
  const std::string takes = "query \"" + query.name + "\" takes " + std::to_string(want) +
                            (want == 1 ? " parameter" : " parameters");
  const boost::json::value* value = args.if_contains("params");
  if (value == nullptr) {
    if (want == 0) return {};
    throw ArgsError{"args.params", "is required: " + takes};
  }
  if (!value->is_array()) throw ArgsError{"args.params", "must be an array"};
  const boost::json::array& items = value->get_array();
  if (items.size() != want) {
    throw ArgsError{"args.params", takes + ", got " + std::to_string(items.size())};
  }
  Params params;
  params.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const boost::json::value& item = items[i];
    if (item.is_string()) {
      // libpq passes parameters as C strings: a NUL would silently cut the value short.
      if (item.get_string().find('\0') != boost::json::string::npos) {
        throw ArgsError{"args.params[" + std::to_string(i) + "]", "must not contain a NUL character"};
      }
      params.emplace_back(std::string{item.get_string()});
    } else if (item.is_bool()) {
      params.emplace_back(item.get_bool() ? "true" : "false");
    } else if (item.is_null()) {
      params.emplace_back(std::nullopt);
    } else if (item.is_number()) {
      params.emplace_back(boost::json::serialize(item));  // 42, 1.5E0: both valid SQL numbers
    } else {
      throw ArgsError{"args.params[" + std::to_string(i) + "]",
                      "must be a string, number, boolean or null"};
    }
  }
  return params;
}

CancelCause cause_of(const JobContext& ctx) {
  return ctx.cancelled() ? ctx.cause() : CancelCause::deadline;
}

// Records what the job had reached, then ends it as described at the top.
class SqlJob {
 public:
  SqlJob(const Query& query, JobContext& ctx)
      : query_{query}, db_{*query.database}, ctx_{ctx}, result_{{"query", query.name}} {}

  void run(const Params& params) {
    ctx_.checkpoint();
    CancelWake wake{ctx_.token()};
    const TimePoint wait_start = Clock::now();
    std::optional<SqlPool::Lease> lease = db_.pool.acquire_until(ctx_.deadline(), ctx_.token());
    db_.metrics.pool_wait(db_.name, Clock::now() - wait_start);
    if (!lease) cancelled(SqlPhase::pool);
    if (lease->connection() == nullptr) connect(*lease, wake.fd());

    // The statement's budget, computed right before it is sent.
    ctx_.checkpoint();
    const ChildBudget budget = ctx_.child_budget();
    if (!budget.ok()) {
      end(SqlPhase::statement);
      throw JobFailed{Reason::deadline_exceeded_before_dispatch,
                      "too little budget left to run query " + query_.name};
    }
    const milliseconds timeout =
        std::max(milliseconds{1}, std::chrono::floor<milliseconds>(budget.budget));
    const StatementRequest request{.sql = query_.config.sql, .params = params,
                                   .statement_timeout = timeout,
                                   .transaction = query_.config.commits,
                                   .max_rows = db_.config.max_rows,
                                   .deadline = ctx_.deadline().time_point()};
    const TimePoint start = Clock::now();
    StatementReport report = lease->connection()->run(request, wake.fd(), db_.config.cancel_grace, [this] {
      try {
        ctx_.commit();
        return true;
      } catch (const Cancelled&) {
        return false;
      }
    });
    db_.metrics.statement(db_.name, Clock::now() - start);
    if (report.cancel_sent) db_.metrics.cancel_sent(db_.name);
    finish(std::move(report));
  }

 private:
  void connect(SqlPool::Lease& lease, int wake_fd) {
    const Deadline until = earlier(ctx_.deadline(), Deadline::after(db_.config.connect_timeout));
    SqlOpen opened = SqlConnection::open(db_.config.conninfo, until, wake_fd);
    switch (opened.end) {
      case SqlOpen::End::ok:
        lease.set(std::move(opened.connection));
        return;
      case SqlOpen::End::woken:
        cancelled(SqlPhase::connect);
      case SqlOpen::End::timed_out:
        if (ctx_.deadline().expired()) cancelled(SqlPhase::connect);
        opened.error = "no connection within connect_timeout_ms (" +
                       std::to_string(db_.config.connect_timeout.count()) + ")";
        break;
      case SqlOpen::End::failed: break;
    }
    db_.metrics.connect_failed(db_.name);
    result_["error"] = opened.error;
    end(SqlPhase::connect);
    throw std::runtime_error{"database " + db_.name + " is unavailable: " + opened.error};
  }

  void finish(StatementReport report) {
    using End = StatementReport::End;
    switch (report.end) {
      case End::ok: {
        result_["columns"] = std::move(report.columns);
        result_["row_count"] = report.rows.size();
        result_["rows"] = std::move(report.rows);
        result_["truncated"] = report.truncated;
        if (report.affected_rows) result_["affected_rows"] = *report.affected_rows;
        if (query_.config.commits) result_["committed"] = report.committed;
        ctx_.set_result(boost::json::serialize(result_));
        return;
      }
      case End::cancelled:
      case End::commit_refused: cancelled(report.phase);
      case End::statement_timeout:
        db_.metrics.statement_timeout(db_.name);
        result_["error"] = report.error;
        end(report.phase);
        throw Cancelled{CancelCause::deadline};  // the server enforced this job's budget
      case End::lost:
        if (ctx_.cancelled() && report.phase != SqlPhase::commit) cancelled(report.phase);
        result_["error"] = report.error;
        end(report.phase);
        throw std::runtime_error{"database " + db_.name + ": the connection was lost during the " +
                                 std::string{to_string(report.phase)} + ": " + report.error};
      case End::error: break;
    }
    result_["error"] = report.error;
    result_["sqlstate"] = report.sqlstate;
    if (report.sqlstate.starts_with("22") && report.phase == SqlPhase::statement &&
        report.parameter && *report.parameter < query_.config.params) {
      // Data exception in a parameter the client sent, which the server refused as its type
      // (text for a number, a malformed date, ...): the client's input, 400 naming it. A data
      // exception the server does not tie to a parameter (a division by zero in the query)
      // may come from the tables as well: it stays a failed statement.
      const std::string field = "args.params[" + std::to_string(*report.parameter) + "]";
      result_["field"] = field;
      end(report.phase);
      throw JobFailed{Reason::invalid_input, field + ": " + report.error};
    }
    end(report.phase);
    throw std::runtime_error{"query " + query_.name + " failed" +
                             (report.phase == SqlPhase::commit ? " at COMMIT: " : ": ") + report.error};
  }

  void end(SqlPhase phase) {
    result_["phase"] = to_string(phase);
    ctx_.set_result(boost::json::serialize(result_));
  }

  [[noreturn]] void cancelled(SqlPhase phase) {
    end(phase);
    throw Cancelled{cause_of(ctx_)};
  }

  const Query& query_;
  Database& db_;
  JobContext& ctx_;
  boost::json::object result_;
};

// Opens one connection per database at start-up, so that a database that cannot be reached is
// reported in the log at once; the daemon serves all other work either way.
void warm_up(Database& db) {
  SqlOpen opened = SqlConnection::open(db.config.conninfo, Deadline::after(db.config.connect_timeout), -1);
  if (opened.end == SqlOpen::End::ok) {
    spdlog::info("database {}: connected (pool of at most {})", db.name, db.config.pool_size);
    db.pool.add_idle(std::move(opened.connection));
    return;
  }
  if (opened.end == SqlOpen::End::timed_out) {
    opened.error = "no connection within connect_timeout_ms (" +
                   std::to_string(db.config.connect_timeout.count()) + ")";
  }
  db.metrics.connect_failed(db.name);
  spdlog::warn("database {} is unavailable at start-up: {}; sql jobs that use it fail until it "
               "can be reached (each job tries again)", db.name, opened.error);
}

}  // namespace

JobKind make_sql_kind(const DaemonConfig& config) {
  auto kind = std::make_shared<SqlKind>();
  for (const auto& [name, db] : config.databases) {
    auto database = std::make_unique<Database>(name, db, kind->metrics);
    kind->metrics.watch_pool(name, database->pool);
    kind->databases.emplace(name, std::move(database));
  }
  for (const auto& [name, q] : config.queries) {
    const auto db = kind->databases.find(q.database);
    if (db == kind->databases.end()) {
      throw ConfigError{"queries." + name + ".database", "names no [databases." + q.database + "] table"};
    }
    kind->queries.emplace(name, Query{name, q, db->second.get()});
  }
  for (auto& [name, db] : kind->databases) warm_up(*db);

  return {.prepare = [kind](const boost::json::object& args) -> JobHandler {
            reject_unknown_keys(args, {"query", "params"});
            const std::string name = require_string(args, "query");
            const auto it = kind->queries.find(name);
            if (it == kind->queries.end()) throw ArgsError{"args.query", "unknown query \"" + name + "\""};
            Params params = read_params(args, it->second);
            return [kind, query = &it->second, params = std::move(params)](JobContext& ctx) {
              SqlJob{*query, ctx}.run(params);
            };
          },
          .metrics = [kind] { return kind->metrics.render(); },
          // One estimate per configured query (names from the config: bounded).
          .estimate_key = [kind](const boost::json::object& args) {
            return configured_estimate_key(args, "query", kind->queries, "sql");
          }};
}

}  // namespace sandglass::daemon
