// job_rows.hpp (private) — a cluster job's row as the daemon answers it, and the small JSON
// helpers the cluster node's parts share.
//
//   std::vector<Record> found = fetch_records(db, {id});   // throws PgError
//   respond(answer_of(found.front()));                    // the status its outcome maps to
//
// Thread safety: free functions; a PgSession belongs to the calling thread.
#pragma once

#include "daemon/cluster/pg_session.hpp"
#include "daemon/http/http_message.hpp"
#include "daemon/http/http_status.hpp"

#include <sandglass/job_spec.hpp>

#include <boost/json/object.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::daemon::cluster {

inline std::int64_t us_of(Duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

std::string json_text(const boost::json::object& o);
HttpResponse json_error(unsigned status, std::string_view message, std::string_view field = {});
std::optional<std::int64_t> parse_int(std::string_view text);

struct Record {
  JobId id = 0;
  bool terminal = false;
  std::string state;    // as the record says: scheduled, queued, running, or the outcome's
  HttpStatus status{};  // for a terminal record answered to a waiter
  std::string json;
  // The job's deadline (arrival + budget - reserve) less the database's clock at the read, or
  // at the job's end once it is over.
  std::int64_t remaining_us = 0;
};

// The columns `record_of` reads, in its order (of sandglass_jobs, unqualified): a query may
// select more after them, from column kRecordColumnCount on.
std::string_view record_columns() noexcept;
inline constexpr int kRecordColumnCount = 19;
// Row `r` of a result that starts with record_columns() as the job record the daemon answers
// with (the local record's fields, and "node": the node that ran it, "attempt", "priority").
Record record_of(const PgRows& rows, int r);
// The rows of `ids` that exist (any order). Throws PgError.
std::vector<Record> fetch_records(PgSession& db, const std::vector<JobId>& ids);
// A terminal record as a waiter's answer: the status its reason and cause map to.
HttpResponse answer_of(const Record& rec);

}  // namespace sandglass::daemon::cluster
