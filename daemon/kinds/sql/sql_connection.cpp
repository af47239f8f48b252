#include "daemon/kinds/sql/sql_connection.hpp"

#include "daemon/pg/libpq_support.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <system_error>

namespace sandglass::daemon {
namespace {

using std::chrono::milliseconds;

// While a cancel request is unconfirmed, how often it is sent again.
constexpr milliseconds kCancelResendInterval{100};

// Type OIDs (pg_type.dat) whose text form becomes a JSON value other than a string.
constexpr Oid kBool = 16;
constexpr Oid kInt8 = 20;
constexpr Oid kInt2 = 21;
constexpr Oid kInt4 = 23;
constexpr Oid kOid = 26;
constexpr Oid kJson = 114;
constexpr Oid kFloat4 = 700;
constexpr Oid kFloat8 = 701;
constexpr Oid kJsonb = 3802;

struct ResultDeleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

boost::json::value number_or_text(const char* text, bool integer) {
  const std::string_view s{text};
  if (integer) {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc{} && end == s.data() + s.size()) return n;
  } else {
    double d = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
    if (ec == std::errc{} && end == s.data() + s.size() && std::isfinite(d)) return d;
  }
  return boost::json::string{s};  // NaN, Infinity, numbers beyond int64
}

boost::json::value cell(const PGresult* r, int row, int column) {
  if (PQgetisnull(r, row, column)) return nullptr;
  const char* text = PQgetvalue(r, row, column);
  switch (PQftype(r, column)) {
    case kBool: return text[0] == 't';
    case kInt2:
    case kInt4:
    case kInt8:
    case kOid: return number_or_text(text, true);
    case kFloat4:
    case kFloat8: return number_or_text(text, false);
    case kJson:
    case kJsonb: {
      boost::system::error_code ec;
      boost::json::value v = boost::json::parse(text, ec);
      if (!ec) return v;
      return boost::json::string{text};
    }
    default: return boost::json::string{text};
  }
}

void fill_rows(const PGresult* r, std::size_t max_rows, StatementReport& report) {
  const int columns = PQnfields(r);
  for (int c = 0; c < columns; ++c) report.columns.emplace_back(PQfname(r, c));
  const auto rows = static_cast<std::size_t>(PQntuples(r));
  const std::size_t kept = std::min(rows, max_rows);
  report.truncated = rows > kept;
  report.rows.reserve(kept);
  for (std::size_t i = 0; i < kept; ++i) {
    boost::json::array row;
    row.reserve(static_cast<std::size_t>(columns));
    for (int c = 0; c < columns; ++c) row.push_back(cell(r, static_cast<int>(i), c));
    report.rows.push_back(std::move(row));
  }
}

void record_error(const PGresult* r, StatementReport& report) {
  if (!report.error.empty()) return;  // the first error is the cause; the rest follow from it
  report.end = StatementReport::End::error;
  const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  report.error = pg::one_line(primary != nullptr ? primary : PQresultErrorMessage(r));
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  report.sqlstate = state == nullptr ? "" : state;
  // A parameter's value the server cannot take as its type is refused while binding, and the
  // error's context names it: "unnamed portal parameter $2 = '...'" (PostgreSQL 13 and later).
  const char* context = PQresultErrorField(r, PG_DIAG_CONTEXT);
  if (context == nullptr) return;
  const std::string_view text{context};
  constexpr std::string_view kParameter = "parameter $";
  const auto at = text.find(kParameter);
  if (at == std::string_view::npos) return;
  const std::string_view digits = text.substr(at + kParameter.size());
  std::size_t number = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
  if (ec == std::errc{} && end != digits.data() && number >= 1) report.parameter = number - 1;
}

}  // namespace

std::string_view to_string(SqlPhase phase) noexcept {
  switch (phase) {
    case SqlPhase::pool: return "pool";
    case SqlPhase::connect: return "connect";
    case SqlPhase::statement: return "statement";
    case SqlPhase::commit: return "commit";
  }
  return "statement";
}

CancelWake::CancelWake(const CancelToken& token) : fd_{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)} {
  if (!fd_) throw std::system_error{errno, std::generic_category(), "eventfd"};
  registration_ = token.on_cancel([fd = fd_.get()]() noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(fd, &one, sizeof one);
  });
}

// One statement's conversation with the server: waits for results and turns the wake into a
// cancel request, once.
class SqlConnection::Exchange {
 public:
  Exchange(SqlConnection& c, int wake_fd, milliseconds grace) noexcept
      : c_{c}, wake_fd_{wake_fd}, grace_{grace} {}

  bool cancel_sent() const noexcept { return cancel_sent_; }
  // From now on the wake no longer sends a cancel request and the wait for a result ends at
  // `bound`, failing with `why` (past the commit point).
  void bound_by(TimePoint bound, std::string why) {
    may_cancel_ = false;
    resend_at_ = TimePoint::max();
    until_ = bound;
    bound_reason_ = std::move(why);
  }

  // The next result of the current query, or null when its results are over. Sets `lost` (and
  // marks the connection lost) when the connection broke or a cancel went unconfirmed.
  Result next(bool& lost, std::string& error) {
    for (;;) {
      const int flushed = PQflush(c_.conn_);
      if (flushed < 0) return fail(lost, error, pg::one_line(PQerrorMessage(c_.conn_)));
      if (flushed == 0 && !PQisBusy(c_.conn_)) return Result{PQgetResult(c_.conn_)};
      const int socket = PQsocket(c_.conn_);
      std::array<pollfd, 2> fds{{{socket, static_cast<short>(POLLIN | (flushed == 1 ? POLLOUT : 0)), 0},
                                 {wake_fd_, POLLIN, 0}}};
      const int n = ::poll(fds.data(), fds.size(), pg::poll_timeout(std::min(until_, resend_at_)));
      if (n < 0) {
        if (errno == EINTR) continue;
        return fail(lost, error, "poll failed");
      }
      if (fds[1].revents != 0) {
        wake_fd_ = -1;  // poll() skips it from now on
        if (may_cancel_) send_cancel();
        continue;
      }
      if (n == 0 && Clock::now() < until_) {
        // A cancel request that reaches the backend between two messages of the pipeline is
        // dropped by the server; until the statement ends or the grace is over, ask again.
        if (may_cancel_) send_cancel();
        continue;
      }
      if (n == 0 && !bound_reason_.empty()) return fail(lost, error, bound_reason_);
      if (n == 0) {
        return fail(lost, error, "the server did not confirm the cancel request within " +
                                     std::to_string(grace_.count()) + " ms");
      }
      if ((fds[0].revents & (POLLIN | POLLERR | POLLHUP)) != 0 && PQconsumeInput(c_.conn_) == 0) {
        return fail(lost, error, pg::one_line(PQerrorMessage(c_.conn_)));
      }
    }
  }

  // Reads and drops the results of the current query; false when the connection was lost.
  bool drain(StatementReport& report) {
    bool lost = false;
    while (Result r = next(lost, report.error)) {
      if (PQresultStatus(r.get()) == PGRES_FATAL_ERROR) record_error(r.get(), report);
    }
    return !lost;
  }

 private:
  Result fail(bool& lost, std::string& error, std::string message) {
    lost = true;
    c_.lost_ = true;
    if (error.empty()) error = std::move(message);
    return nullptr;
  }

  void send_cancel() {
    // The grace starts before PQcancel, which blocks this thread for a whole TCP connect to the
    // server and one round trip (libpq opens a new connection for the request): the grace
    // covers that time too.
    const TimePoint now = Clock::now();
    if (!cancel_sent_) until_ = saturating_add(now, grace_);
    cancel_sent_ = true;
    std::array<char, 256> buffer{};
    if (c_.cancel_ != nullptr) PQcancel(c_.cancel_, buffer.data(), static_cast<int>(buffer.size()));
    resend_at_ = saturating_add(Clock::now(), kCancelResendInterval);
  }

  SqlConnection& c_;
  int wake_fd_;
  milliseconds grace_;
  bool may_cancel_ = true;
  bool cancel_sent_ = false;
  TimePoint until_ = TimePoint::max();  // set by a cancel request (the grace) or by bound_by
  std::string bound_reason_;            // set by bound_by
  TimePoint resend_at_ = TimePoint::max();  // when to send the cancel request again
};

SqlOpen SqlConnection::open(const std::string& conninfo, Deadline until, int wake_fd) {
  SqlOpen result;
  // The TCP defaults find a peer that is gone or drops packets within about a minute instead
  // of TCP's ~15; the conninfo may override them, not the encoding the kind parses in.
  const pg::ConnectParams params{{{"keepalives_idle", "30"}, {"keepalives_interval", "10"},
                                  {"keepalives_count", "3"}, {"tcp_user_timeout", "60000"}},
                                 conninfo,
                                 {{"client_encoding", "UTF8"}, {"fallback_application_name", "sandglassd"}}};
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn{PQconnectStartParams(params.keys(), params.values(), 1),
                                                    &PQfinish};
  if (!conn) {
    result.error = "out of memory";
    return result;
  }
  PostgresPollingStatusType status = PGRES_POLLING_WRITING;
  while (PQstatus(conn.get()) != CONNECTION_BAD && status != PGRES_POLLING_OK &&
         status != PGRES_POLLING_FAILED) {
    std::array<pollfd, 2> fds{{{PQsocket(conn.get()),
                                static_cast<short>(status == PGRES_POLLING_READING ? POLLIN : POLLOUT), 0},
                               {wake_fd, POLLIN, 0}}};
    const int n = ::poll(fds.data(), fds.size(), pg::poll_timeout(until.time_point()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      result.error = "poll failed";
      return result;
    }
    if (fds[1].revents != 0) {
      result.end = SqlOpen::End::woken;
      return result;
    }
    if (n == 0) {
      result.end = SqlOpen::End::timed_out;
      return result;
    }
    status = PQconnectPoll(conn.get());
  }
  if (PQstatus(conn.get()) != CONNECTION_OK || PQsetnonblocking(conn.get(), 1) != 0) {
    // libpq's message can quote parts of the conninfo (a malformed one verbatim, which may be
    // a password): it is neither logged nor answered.
    result.error = "the connection could not be opened (refused, unreachable, rejected by the "
                   "server or a malformed conninfo)";
    return result;
  }
  PGcancel* cancel = PQgetCancel(conn.get());
  result.connection.reset(new SqlConnection{conn.release(), cancel});
  result.end = SqlOpen::End::ok;
  return result;
}

SqlConnection::~SqlConnection() {
  if (cancel_ != nullptr) PQfreeCancel(cancel_);
  PQfinish(conn_);
}

int SqlConnection::backend_pid() const noexcept { return PQbackendPID(conn_); }

bool SqlConnection::reusable() noexcept {
  if (lost_ || PQstatus(conn_) != CONNECTION_OK) return false;
  if (PQpipelineStatus(conn_) != PQ_PIPELINE_OFF) return false;
  // What the server sent to an idle connection: a server that ends the session sends an error
  // and closes the socket, which PQconsumeInput alone may not report yet.
  for (;;) {
    pollfd fd{PQsocket(conn_), POLLIN | POLLRDHUP, 0};
    if (::poll(&fd, 1, 0) < 0) return false;
    if ((fd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) return false;
    if ((fd.revents & POLLIN) == 0) break;
    if (PQconsumeInput(conn_) == 0) return false;
  }
  if (PQisBusy(conn_) != 0 || PQflush(conn_) != 0) return false;
  return PQtransactionStatus(conn_) == PQTRANS_IDLE;
}

StatementReport SqlConnection::run(const StatementRequest& request, int wake_fd,
                                   milliseconds cancel_grace,
                                   const std::function<bool()>& commit_point) {
  using End = StatementReport::End;
  StatementReport report;
  Exchange x{*this, wake_fd, cancel_grace};
  const auto lose = [&](End end = End::lost) {
    lost_ = true;
    report.end = end;
    if (report.error.empty()) report.error = pg::one_line(PQerrorMessage(conn_));
    return report;
  };

  std::vector<const char*> values;
  values.reserve(request.params.size());
  for (const auto& p : request.params) values.push_back(p ? p->c_str() : nullptr);
  const std::string timeout = std::to_string(request.statement_timeout.count());
  const std::array<const char*, 1> timeout_value{timeout.c_str()};
  // Local to the transaction: the pipeline's implicit one (up to the sync), or the BEGIN block.
  // Nothing of it stays on the session for the next job.
  const char* set_timeout = "SELECT set_config('statement_timeout', $1, true)";

  if (PQenterPipelineMode(conn_) != 1) return lose();
  const bool sent =
      (!request.transaction || PQsendQueryParams(conn_, "BEGIN", 0, nullptr, nullptr, nullptr, nullptr, 0) == 1) &&
      PQsendQueryParams(conn_, set_timeout, 1, nullptr, timeout_value.data(), nullptr, nullptr, 0) == 1 &&
      PQsendQueryParams(conn_, request.sql.c_str(), static_cast<int>(values.size()), nullptr,
                        values.data(), nullptr, nullptr, 0) == 1 &&
      PQpipelineSync(conn_) == 1;
  if (!sent) return lose();

  // Results: one run per query, each ended by a null result, then the sync.
  const int statement_step = request.transaction ? 2 : 1;
  for (int step = 0;;) {
    bool lost = false;
    Result r = x.next(lost, report.error);
    if (lost) return lose();
    if (!r) {
      ++step;
      continue;
    }
    const ExecStatusType status = PQresultStatus(r.get());
    if (status == PGRES_PIPELINE_SYNC) break;
    if (status == PGRES_FATAL_ERROR) {
      record_error(r.get(), report);
    } else if (step == statement_step && (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK)) {
      fill_rows(r.get(), request.max_rows, report);
      const std::string_view affected = PQcmdTuples(r.get());
      std::int64_t count = 0;
      const auto [end, ec] = std::from_chars(affected.data(), affected.data() + affected.size(), count);
      if (!affected.empty() && ec == std::errc{}) report.affected_rows = count;
    }
  }
  if (PQexitPipelineMode(conn_) != 1) return lose();

  report.cancel_sent = x.cancel_sent();
  if (report.end == End::error && report.sqlstate == "57014") {
    report.end = report.cancel_sent ? End::cancelled : End::statement_timeout;
  }
  if (!request.transaction) return report;

  // The statement's results are in: no more cancel requests (nor their timers, which may have
  // passed), and the answer to ROLLBACK or COMMIT is awaited until the job's deadline (or now,
  // if later) plus the grace.
  const auto finish = [&](const char* command, std::string if_unanswered) {
    x.bound_by(saturating_add(std::max(request.deadline, Clock::now()), cancel_grace),
               "no answer to " + std::string{command} + " by the job's deadline plus cancel_grace_ms (" +
                   std::to_string(cancel_grace.count()) + ")" + if_unanswered);
    if (PQsendQuery(conn_, command) != 1 || !x.drain(report)) lose();
  };
  if (report.end != End::ok) {
    finish("ROLLBACK", "");
    return report;
  }
  if (!commit_point()) {
    report.end = End::commit_refused;
    finish("ROLLBACK", "");
    return report;
  }
  report.phase = SqlPhase::commit;
  finish("COMMIT", "; whether it committed is unknown");
  if (report.end == End::ok) report.committed = true;
  return report;
}

}  // namespace sandglass::daemon
