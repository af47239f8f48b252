#include "daemon/cluster/job_rows.hpp"

#include <sandglass/cancel.hpp>
#include <sandglass/outcome.hpp>
#include <sandglass/reason.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <charconv>

namespace sandglass::daemon::cluster {
namespace {

std::int64_t ms_of(std::int64_t us) { return us / 1000; }

boost::json::value result_value(std::string_view text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec) return boost::json::string{text};
  return v;
}

// The columns `record_of` reads, in its order.
constexpr std::string_view kRecordColumns =
    // A running row claimed ahead and not started yet is "claimed" (functions.sql,
    // sandglass_listed_state); a done row stays "done", its outcome_state beside it.
    "id, kind, CASE WHEN state = 'running' THEN sandglass_listed_state(state, outcome_state, id, owner)"
    " ELSE state END, outcome_state, reason, cause, committed, result, error, node_ran, attempt,"
    " priority, budget_us,"
    // A delayed job waits in the queue from its start: its delay is not queue time.
    " greatest(0, floor(extract(epoch FROM coalesce(claimed_at, finished_at, clock_timestamp())"
    " - coalesce(start_at, created_at)) * 1000000)::bigint),"
    " coalesce(run_us, CASE WHEN state = 'running' THEN"
    " floor(extract(epoch FROM clock_timestamp() - claimed_at) * 1000000)::bigint END),"
    " floor(extract(epoch FROM deadline - coalesce(finished_at, clock_timestamp())) * 1000000)::bigint,"
    " cancel_requested, attempts, retry_stopped";  // kRecordColumnCount of them

}  // namespace

std::string_view record_columns() noexcept { return kRecordColumns; }

// One row of kRecordColumns as the job record the daemon answers with (the local record's
// fields, and "node": the node that ran it, "attempt", "priority"). A job with a retry lists the
// attempts its node ran ("attempts") and why they stopped ("retry_stopped"), as a lone daemon's.
Record record_of(const PgRows& rows, int r) {
  Record rec;
  rec.id = static_cast<JobId>(rows.integer(r, 0));
  boost::json::object o;
  o["id"] = rec.id;
  o["kind"] = rows.text(r, 1);
  const std::string_view state = rows.text(r, 2);
  rec.terminal = state == "done";
  rec.state = rec.terminal ? rows.text(r, 3) : state;
  o["state"] = rec.state;
  Reason reason = Reason::ok;
  CancelCause cause = CancelCause::none;
  if (rows.null(r, 4)) {
    o["reason"] = nullptr;
  } else {
    o["reason"] = rows.text(r, 4);
    reason = reason_from_string(rows.text(r, 4)).value_or(Reason::handler_error);
  }
  if (!rows.null(r, 5)) {
    o["cause"] = rows.text(r, 5);
    cause = cancel_cause_from_string(rows.text(r, 5)).value_or(CancelCause::none);
  } else if (!rec.terminal && rows.boolean(r, 16)) {
    o["cause"] = "caller";  // asked to cancel; not over yet
  }
  o["committed"] = rows.boolean(r, 6);
  if (!rows.null(r, 7) && !rows.text(r, 7).empty()) o["result"] = result_value(rows.text(r, 7));
  if (!rows.null(r, 8) && !rows.text(r, 8).empty()) o["error"] = rows.text(r, 8);
  if (rows.null(r, 9)) {
    o["node"] = nullptr;
  } else {
    o["node"] = rows.text(r, 9);
  }
  o["attempt"] = rows.integer(r, 10);
  o["priority"] = to_string(static_cast<Priority>(rows.integer(r, 11)));
  o["timings"] = {{"budget_ms", ms_of(rows.integer(r, 12))},
                  {"queue_ms", ms_of(rows.integer(r, 13))},
                  {"run_ms", ms_of(rows.integer(r, 14))},
                  {"remaining_ms", ms_of(rows.integer(r, 15))}};
  if (!rows.null(r, 17)) {
    boost::system::error_code ec;
    boost::json::value attempts = boost::json::parse(rows.text(r, 17), ec);
    if (!ec) o["attempts"] = std::move(attempts);
  }
  if (!rows.null(r, 18)) o["retry_stopped"] = rows.text(r, 18);
  rec.status = http_status_of(reason, cause);
  rec.remaining_us = rows.integer(r, 15);
  rec.json = json_text(o);
  return rec;
}

std::string json_text(const boost::json::object& o) { return boost::json::serialize(o); }

HttpResponse json_error(unsigned status, std::string_view message, std::string_view field) {
  boost::json::object body{{"error", message}};
  if (!field.empty()) body["field"] = field;
  return {.status = status, .body = json_text(body)};
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::vector<Record> fetch_records(PgSession& db, const std::vector<JobId>& ids) {
  std::vector<std::int64_t> as_int(ids.begin(), ids.end());
  const PgRows rows = db.exec(
      fmt::format("SELECT {} FROM sandglass_jobs WHERE id = ANY ($1::bigint[])", kRecordColumns),
      {int_array(as_int)});
  std::vector<Record> out;
  for (int r = 0; r < rows.rows(); ++r) out.push_back(record_of(rows, r));
  return out;
}

HttpResponse answer_of(const Record& rec) {
  HttpResponse r{.status = rec.status.code, .body = rec.json};
  if (rec.status.retry_after) r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace sandglass::daemon::cluster
