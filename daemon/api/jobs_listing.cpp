#include "daemon/api/jobs_listing.hpp"

#include "daemon/http/query_string.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <functional>
#include <vector>

namespace sandglass::daemon {
namespace {

constexpr std::array<std::string_view, 9> kStates{"scheduled", "queued",   "claimed",
                                                 "running",   "completed", "failed",
                                                 "rejected",  "expired",  "cancelled"};

std::optional<std::uint64_t> whole_number(std::string_view text) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return n;
}

RequestError bad(std::string_view field, std::string message) {
  return RequestError{std::string{field}, std::move(message)};
}

std::string state_name(const JobRecords::View& v) {
  if (v.outcome) return std::string{to_string(v.outcome->state)};
  return std::string{live_state(v.progress)};
}

bool matches(const ListingQuery& q, const JobRecords::View& v) {
  if (!q.state.empty() && state_name(v) != q.state) return false;
  if (q.kind && v.kind != *q.kind) return false;
  if (q.reason && (!v.outcome || v.outcome->reason != *q.reason)) return false;
  if (q.cause) {
    const CancelCause c = v.outcome ? v.outcome->cause : v.cancel_requested;
    if (c != *q.cause) return false;
  }
  return true;
}

}  // namespace

std::variant<ListingQuery, RequestError> parse_listing_query(std::string_view query) {
  ListingQuery q;
  std::vector<std::string> seen;
  for (const auto& [key, raw] : split_query(query)) {
    if (!printable_name(key)) {
      return bad("query", "has a parameter whose name is empty or not printable ASCII");
    }
    if (key != "state" && key != "kind" && key != "reason" && key != "cause" && key != "limit" &&
        key != "cursor") {
      return bad(key, "is not a known query parameter (state, kind, reason, cause, limit, cursor)");
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return bad(key, "is given twice");
    seen.emplace_back(key);
    const auto value = percent_decode(raw);
    if (!value) return bad(key, "has a malformed percent escape");
    if (key == "state") {
      if (std::find(kStates.begin(), kStates.end(), *value) == kStates.end()) {
        return bad(key, "must be one of scheduled, queued, running, completed, failed, rejected, "
                        "expired, cancelled, claimed");
      }
      q.state = *value;
    } else if (key == "kind") {
      if (value->empty()) return bad(key, "must not be empty");
      q.kind = *value;
    } else if (key == "reason") {
      q.reason = reason_from_string(*value);
      if (!q.reason) return bad(key, "is not a reason code (e.g. ok, queue_full, expired_in_queue)");
    } else if (key == "cause") {
      q.cause = cancel_cause_from_string(*value);
      if (!q.cause || *q.cause == CancelCause::none) {
        return bad(key, "must be one of caller, deadline, upstream, shutdown");
      }
    } else if (key == "limit") {
      const auto n = whole_number(*value);
      if (!n || *n < 1 || *n > kMaxListingLimit) return bad(key, "must be a whole number from 1 to 1000");
      q.limit = static_cast<std::size_t>(*n);
    } else {
      const auto n = whole_number(*value);
      if (!n) return bad(key, "must be a next_cursor of an earlier page");
      q.before = *n;
    }
  }
  return q;
}

std::string listing_json(const JobRecords& records, const ListingQuery& q, TimePoint now) {
  const bool live_only = q.state == "scheduled" || q.state == "queued" || q.state == "running";
  std::vector<JobId> ids = live_only ? records.live_ids() : records.recent_ids();
  std::sort(ids.begin(), ids.end(), std::greater<>{});
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  auto it = ids.begin();
  if (q.before) it = std::upper_bound(ids.begin(), ids.end(), *q.before, std::greater<>{});
  // upper_bound with greater<>: the first id strictly below the cursor.
  std::string body = R"({"jobs":[)";
  std::size_t listed = 0;
  JobId last = 0;
  for (; it != ids.end() && listed < q.limit; ++it) {
    const auto v = records.view(*it);
    if (!v || !matches(q, *v)) continue;
    std::string r = record_json(*it, v->kind, v->outcome ? &*v->outcome : nullptr, v->progress, now,
                                v->arrival, v->cancel_requested, v->waiters);
    if (!v->outcome) {
      const auto remaining =
          std::chrono::duration_cast<std::chrono::milliseconds>(v->progress.deadline.slack(now));
      r.pop_back();  // the object's closing brace
      // Appended piece by piece: `"literal" + std::string` trips GCC 12's false -Wrestrict at -O3.
      r += R"(,"remaining_ms":)";
      r += std::to_string(remaining.count());
      r += '}';
    }
    if (listed > 0) body += ',';
    body += r;
    ++listed;
    last = *it;
  }
  body += R"(],"next_cursor":)";
  if (it != ids.end() && listed == q.limit) {
    body += '"';
    body += std::to_string(last);
    body += '"';
  } else {
    body += "null";
  }
  body += '}';
  return body;
}

}  // namespace sandglass::daemon
