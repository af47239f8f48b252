// jobs_listing.hpp (private) — GET /v1/jobs: the recent jobs, newest first, filtered.
//
//   GET /v1/jobs?state=running&kind=sleep&limit=20
//   {"jobs": [<record>, ...], "next_cursor": "1234"}      next page: ...&cursor=1234
//
// Query parameters, each at most once: `state` (scheduled, queued, claimed, running, completed,
// failed, rejected, expired, cancelled; claimed only in cluster mode: a job its node claimed
// ahead and has not started), `kind`, `reason` (a reason code, e.g. queue_full), `cause` (caller,
// deadline, upstream, shutdown), `limit` (1..1000, default 100) and `cursor` (a next_cursor
// from an earlier page: the jobs submitted before the last one listed). Values are
// percent-decoded ('+' is a space). Anything else is a RequestError naming the parameter.
//
// Each record is the JSON of GET /v1/jobs/{id}; a live job's also carries "remaining_ms": its
// deadline minus now (negative past it). The listing reads JobRecords' bounded index (the most
// recent records.max_count + 1024 submissions, and the live jobs), copies each record it looks
// at under a short lock and renders outside it; it never walks the records under a lock.
// next_cursor is null when no older job is left to look at; a page may come out shorter than
// `limit`, even empty, when the filters match nothing older.
//
// In cluster mode the listing comes from the database instead, with the same parameters and
// shape and each job's "node" (daemon/cluster/cluster_view.hpp).
//
// Thread safety: pure functions over a JobRecords (which is thread-safe).
#pragma once

#include "daemon/api/job_records.hpp"
#include "daemon/api/job_request.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace sandglass::daemon {

inline constexpr std::size_t kDefaultListingLimit = 100;
inline constexpr std::size_t kMaxListingLimit = 1000;

struct ListingQuery {
  std::string state;  // empty: any; else one of the states above
  std::optional<std::string> kind;
  std::optional<Reason> reason;
  std::optional<CancelCause> cause;
  std::size_t limit = kDefaultListingLimit;
  std::optional<JobId> before;  // the cursor: only ids below it
};

// Parses the query part of the target (without '?').
std::variant<ListingQuery, RequestError> parse_listing_query(std::string_view query);

// The listing's JSON body.
std::string listing_json(const JobRecords& records, const ListingQuery& query, TimePoint now);

}  // namespace sandglass::daemon
