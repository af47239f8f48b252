#include "daemon/cluster/pg_session.hpp"

#include "daemon/pg/libpq_support.hpp"

#include <fmt/format.h>

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

namespace sandglass::daemon::cluster {
namespace {

// The server a connection reached or last tried, as libpq resolved it (PGHOST, PGPORT and
// PGDATABASE included): "host db.example port 5432 database app", or "socket /run/postgresql
// port 5432 database app" for a Unix-domain socket; empty when libpq names no host.
std::string describe_connection(const PGconn* conn) {
  const char* host = PQhost(conn);
  if (host == nullptr || host[0] == '\0') return {};
  std::string out = fmt::format("{} {}", host[0] == '/' ? "socket" : "host", host);
  if (const char* port = PQport(conn); port != nullptr && port[0] != '\0') {
    out += fmt::format(" port {}", port);
  }
  if (const char* db = PQdb(conn); db != nullptr && db[0] != '\0') {
    out += fmt::format(" database {}", db);
  }
  return out;
}

}  // namespace

std::string describe_server(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    PQfreemem(error);
    return "an invalid conninfo";
  }
  std::string host, hostaddr, port, dbname;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    const std::string_view key = o->keyword;
    const std::string value = o->val != nullptr ? o->val : "";
    if (key == "host") host = value;
    if (key == "hostaddr") hostaddr = value;
    if (key == "port") port = value;
    if (key == "dbname") dbname = value;
  }
  PQconninfoFree(options);
  if (host.empty()) host = hostaddr.empty() ? "the local socket" : hostaddr;
  std::string out = "host " + host;
  if (!port.empty()) out += " port " + port;
  if (!dbname.empty()) out += " database " + dbname;
  return out;
}

std::int64_t PgRows::integer(int row, int column) const {
  if (null(row, column)) return 0;
  const std::string_view t = text(row, column);
  std::int64_t value = 0;
  std::from_chars(t.data(), t.data() + t.size(), value);
  return value;
}

PgSession PgSession::open(const std::string& conninfo, const SessionTimeouts& timeouts) {
  std::string server = describe_server(conninfo);
  const pg::ConnectParams params{{{"connect_timeout", "5"}, {"keepalives_idle", "5"},
                                  {"keepalives_interval", "2"}, {"keepalives_count", "3"},
                                  {"tcp_user_timeout", "10000"}, {"application_name", "sandglassd-cluster"}},
                                 conninfo};
  PGconn* conn = PQconnectdbParams(params.keys(), params.values(), 1);
  if (conn == nullptr) throw PgError{"cannot connect to the cluster database at " + server + ": out of memory"};
  if (std::string resolved = describe_connection(conn); !resolved.empty()) server = std::move(resolved);
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string why = pg::one_line(PQerrorMessage(conn));
    PQfinish(conn);
    throw PgError{"cannot connect to the cluster database at " + server + ": " + why};
  }
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);  // NOTICEs are not ours to log
  // The server's synchronous_commit holds (durable by default). Turning it off was not
  // harmless: a database crash could lose an outcome already answered to its waiter (the job
  // then runs again), a written commit point (a committed job could run twice) or an admitted
  // job whose id was answered. An operator who accepts that sets it for the role (docs/cluster.md).
  PgSession session{conn, std::move(server)};
  const PgRows self = session.exec(
      "SELECT backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid()", {});
  session.backend_ = {.pid = PQbackendPID(conn), .started = self.rows() > 0 ? std::string{self.text(0, 0)} : ""};
  session.limit(timeouts);
  return session;
}

void PgSession::limit(const SessionTimeouts& timeouts) {
  std::string sets;
  const auto set = [&](std::string_view name, std::chrono::milliseconds value) {
    if (value.count() > 0) sets += fmt::format("SET {} = {}; ", name, value.count());
  };
  set("statement_timeout", timeouts.statement);
  set("lock_timeout", timeouts.lock);
  set("idle_in_transaction_session_timeout", timeouts.idle_in_transaction);
  if (!sets.empty()) exec(sets);
}

void PgSession::fail(std::string_view what) {
  const std::string why = conn_ ? pg::one_line(PQerrorMessage(conn_.get())) : "not connected";
  throw PgError{fmt::format("cluster database at {}: {}: {}", server_, what, why)};
}

PgRows PgSession::checked(PGresult* result) {
  PgRows rows{result};
  const ExecStatusType status = result == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(result);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    if (result != nullptr && PQresultErrorMessage(result)[0] != '\0') {
      const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
      throw PgError{fmt::format("cluster database at {}: {}", server_,
                                pg::one_line(PQresultErrorMessage(result))),
                    state != nullptr ? state : ""};
    }
    fail("statement failed");
  }
  return rows;
}

void PgSession::prepare(const std::string& name, const std::string& sql, int params) {
  checked(PQprepare(conn_.get(), name.c_str(), sql.c_str(), params, nullptr));
}

const std::string* PgSession::prepared_name(const std::string& sql, int params) {
  if (const auto at = prepared_.find(sql); at != prepared_.end()) return &at->second;
  if (prepared_.size() >= kMaxPrepared) return nullptr;
  std::string name = fmt::format("sandglass_{}", prepared_.size() + 1);
  prepare(name, sql, params);
  return &prepared_.emplace(sql, std::move(name)).first->second;
}

PgRows PgSession::exec(const std::string& sql, const std::vector<std::optional<std::string>>& params) {
  if (!conn_) fail("no connection");
  // Without parameters, PQexec: it takes several statements (a migration file).
  if (params.empty()) return checked(PQexec(conn_.get(), sql.c_str()));
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  const int n = static_cast<int>(values.size());
  const std::string* name = prepared_name(sql, n);
  if (name == nullptr) {
    return checked(PQexecParams(conn_.get(), sql.c_str(), n, nullptr, values.data(), nullptr, nullptr, 0));
  }
  PGresult* r = PQexecPrepared(conn_.get(), name->c_str(), n, values.data(), nullptr, nullptr, 0);
  const char* state = r == nullptr ? nullptr : PQresultErrorField(r, PG_DIAG_SQLSTATE);
  // 26000: no such prepared statement; 0A000: "cached plan must not change result type".
  const bool stale = state != nullptr && (std::string_view{state} == "26000" || std::string_view{state} == "0A000");
  if (stale && PQtransactionStatus(conn_.get()) == PQTRANS_IDLE) {
    PQclear(r);
    PQclear(PQexec(conn_.get(), ("DEALLOCATE " + *name).c_str()));  // fails harmlessly if gone
    prepare(*name, sql, n);
    r = PQexecPrepared(conn_.get(), name->c_str(), n, values.data(), nullptr, nullptr, 0);
  }
  return checked(r);
}

std::vector<Notification> PgSession::wait_notifications(Deadline until, int wake_fd) {
  std::vector<Notification> out;
  auto drain = [&] {
    if (PQconsumeInput(conn_.get()) == 0) fail("connection lost");
    while (PGnotify* n = PQnotifies(conn_.get())) {
      out.push_back({n->relname, n->extra});
      PQfreemem(n);
    }
  };
  if (!conn_) fail("no connection");
  drain();
  if (!out.empty()) return out;
  pollfd fds[2] = {{PQsocket(conn_.get()), POLLIN, 0}, {wake_fd, POLLIN, 0}};
  const int n = ::poll(fds, wake_fd >= 0 ? 2 : 1, pg::poll_timeout(until.time_point()));
  if (n < 0 && errno != EINTR) fail("poll failed");
  if (n > 0 && fds[0].revents != 0) drain();
  return out;
}

std::string text_array(const std::vector<std::string>& items) {
  std::string out = "{";
  for (const std::string& item : items) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (const char c : item) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::string text_array(const std::vector<std::optional<std::string>>& items) {
  std::string out = "{";
  for (const std::optional<std::string>& item : items) {
    if (out.size() > 1) out += ',';
    if (!item) {
      out += "NULL";
      continue;
    }
    out += '"';
    for (const char c : *item) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::string int_array(const std::vector<std::int64_t>& items) {
  std::string out = "{";
  for (const std::int64_t item : items) {
    if (out.size() > 1) out += ',';
    out += std::to_string(item);
  }
  return out + "}";
}

}  // namespace sandglass::daemon::cluster
