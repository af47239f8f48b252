#include "daemon/cluster/cluster_view.hpp"

#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <sandglass/cancel.hpp>
#include <sandglass/reason.hpp>

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace sandglass::daemon::cluster {
namespace {

constexpr std::array<std::string_view, 5> kTerminalStates{"completed", "failed", "rejected", "expired",
                                                          "cancelled"};
// The state the listing shows for a row (functions.sql, "The cluster view").
constexpr std::string_view kListedState = "sandglass_listed_state(state, outcome_state, id, owner)";

// A statement's parameters, numbered as they are added.
class Params {
 public:
  std::string add(std::string value) {
    values_.emplace_back(std::move(value));
    return fmt::format("${}", values_.size());
  }
  const std::vector<std::optional<std::string>>& values() const noexcept { return values_; }

 private:
  std::vector<std::optional<std::string>> values_;
};

bool live_state(std::string_view state) {
  return state == "queued" || state == "running" || state == "claimed";
}

// The WHERE conditions of `q`'s filters (none: "true").
std::string conditions(const ListingQuery& q, Params& params) {
  std::vector<std::string> where;
  if (q.state == "queued") {
    where.emplace_back("state = 'queued'");
  } else if (q.state == "running" || q.state == "claimed") {
    where.push_back(fmt::format("state = 'running' AND {} = {}", kListedState, params.add(q.state)));
  } else if (std::find(kTerminalStates.begin(), kTerminalStates.end(), q.state) != kTerminalStates.end()) {
    where.push_back("state = 'done' AND outcome_state = " + params.add(q.state));
  } else if (!q.state.empty()) {
    where.push_back("state = " + params.add(q.state));
  }
  if (q.kind) where.push_back("kind = " + params.add(*q.kind));
  if (q.reason) where.push_back("state = 'done' AND reason = " + params.add(std::string{to_string(*q.reason)}));
  if (q.cause) {
    // A live job asked to cancel shows cause "caller" (job_rows.cpp).
    const std::string p = params.add(std::string{to_string(*q.cause)});
    where.push_back(fmt::format(
        "CASE WHEN state = 'done' THEN cause IS NOT DISTINCT FROM {0} ELSE cancel_requested AND {0} = 'caller' END", p));
  }
  if (where.empty()) return "true";
  std::string all;
  for (const std::string& w : where) all += (all.empty() ? "(" : " AND (") + w + ")";
  return all;
}

// One listed row: its record, the state it shows, and a live one's "remaining_ms".
std::string listed_json(const PgRows& rows, int r) {
  const Record rec = record_of(rows, r);
  boost::json::object o = boost::json::parse(rec.json).as_object();
  if (!rec.terminal) o["remaining_ms"] = rec.remaining_us / 1000;
  return boost::json::serialize(o);
}

std::int64_t whole_ms(std::chrono::milliseconds d) { return d.count(); }

}  // namespace

std::string cluster_listing_json(PgSession& db, const ListingQuery& q, std::size_t scan) {
  Params params;
  const std::string where = conditions(q, params);
  const std::string limit = params.add(std::to_string(q.limit + 1));
  // Live states: their rows through the partial indexes on state (001_schema.sql), however old.
  // Any other filter: at most `scan` of the newest rows older than the cursor, newest first,
  // read only as far as the page needs.
  const bool windowed = !live_state(q.state);
  const std::string before = q.before ? "id < " + params.add(std::to_string(*q.before)) + "::bigint" : "true";
  const std::string from =
      windowed ? fmt::format("(SELECT * FROM sandglass_jobs WHERE {} ORDER BY id DESC LIMIT {}::bigint) j", before,
                             params.add(std::to_string(scan)))
               : "sandglass_jobs";
  const PgRows rows =
      db.exec(fmt::format("SELECT {} FROM {} WHERE {} AND {} ORDER BY id DESC LIMIT {}::bigint",
                          record_columns(), from, where, before, limit),
              params.values());
  const int listed = std::min<int>(rows.rows(), static_cast<int>(q.limit));
  std::string body = R"({"jobs":[)";
  for (int r = 0; r < listed; ++r) {
    if (r > 0) body += ',';
    body += listed_json(rows, r);
  }
  body += R"(],"next_cursor":)";
  std::optional<std::int64_t> next;
  if (rows.rows() > listed) {
    next = rows.integer(listed - 1, 0);
  } else if (windowed) {
    // The page is not full: were there older rows than the window read?
    Params w;
    const std::string older = q.before ? " WHERE id < " + w.add(std::to_string(*q.before)) + "::bigint" : "";
    const PgRows read = db.exec(
        fmt::format("SELECT count(*), min(id) FROM (SELECT id FROM sandglass_jobs{} ORDER BY id DESC "
                    "LIMIT {}::bigint) w",
                    older, w.add(std::to_string(scan))),
        w.values());
    if (static_cast<std::size_t>(read.integer(0, 0)) == scan) next = read.integer(0, 1);
  }
  if (next) {
    body += '"';
    body += std::to_string(*next);
    body += '"';
  } else {
    body += "null";
  }
  body += '}';
  return body;
}

std::string cluster_stats_json(PgSession& db, const ViewingNode& me) {
  const PgRows rows = db.exec(
      fmt::format(
          "WITH v AS (SELECT clock_timestamp() AS now) "
          "SELECT (SELECT coalesce(json_agg(json_build_object("
          "  'name', n.node, 'incarnation', n.owner, 'workers', n.workers, 'capacity', n.capacity,"
          "  'busy', n.busy, 'claimed_ahead', cardinality(n.unstarted),"
          "  'lease_age_ms', floor(extract(epoch FROM v.now - n.heartbeat_at) * 1000)::bigint,"
          "  'lease_ms', n.lease_ms,"
          "  'lost', n.lost OR n.heartbeat_at < v.now - greatest($1::bigint, coalesce(n.lease_ms, 0))"
          "                                             * interval '1 millisecond',"
          "  'swept', n.lost, 'kinds', n.kinds,"
          "  'standing_queue_target_ms', n.standing_target_us / 1000.0,"
          "  'up_ms', floor(extract(epoch FROM v.now - n.started_at) * 1000)::bigint)"
          "  ORDER BY n.node, n.started_at DESC), '[]'::json)"
          "   FROM (SELECT * FROM sandglass_nodes ORDER BY heartbeat_at DESC LIMIT {}) n),"
          " (SELECT coalesce(json_agg(json_build_array(t.state, t.priority, t.n)), '[]'::json) FROM ("
          "   SELECT 'queued' AS state, c.priority, sum(c.queued)::bigint AS n"
          "     FROM sandglass_counters c GROUP BY c.priority"
          "   UNION ALL"
          "   SELECT {}, j.priority, count(*) FROM sandglass_jobs j WHERE j.state = 'running'"
          "    GROUP BY 1, 2"
          "   UNION ALL"
          "   SELECT 'scheduled', j.priority, count(*) FROM sandglass_jobs j WHERE j.state = 'scheduled'"
          "    GROUP BY 2) t)"
          " FROM v",
          kMostNodesShown, kListedState),
      {std::to_string(whole_ms(me.lease))});
  boost::json::object jobs;
  for (const std::string_view state : {"scheduled", "queued", "running", "claimed"}) {
    boost::json::object by_class;
    for (std::size_t p = 0; p < kPriorityCount; ++p) by_class[to_string(static_cast<Priority>(p))] = 0;
    by_class["total"] = 0;
    jobs[state] = std::move(by_class);
  }
  const boost::json::value counts = boost::json::parse(rows.text(0, 1));
  for (const boost::json::value& t : counts.as_array()) {
    const auto& row = t.as_array();
    const std::string_view state = row.at(0).as_string();
    const auto priority = row.at(1).to_number<std::int64_t>();
    const auto n = row.at(2).to_number<std::int64_t>();
    if (!jobs.contains(state) || priority < 0 || priority >= static_cast<std::int64_t>(kPriorityCount)) continue;
    boost::json::object& by_class = jobs[state].as_object();
    for (const std::string_view key : {to_string(static_cast<Priority>(priority)), std::string_view{"total"}}) {
      by_class[key] = by_class[key].to_number<std::int64_t>() + n;
    }
  }
  boost::json::object cluster{{"node", me.name}, {"incarnation", me.owner}};
  cluster["nodes"] = boost::json::parse(rows.text(0, 0));
  cluster["jobs"] = std::move(jobs);
  return boost::json::serialize(cluster);
}

std::string with_cluster(std::string stats, std::string_view cluster) {
  if (stats.empty() || stats.back() != '}') return stats;
  stats.pop_back();  // the object's closing brace
  stats += stats.ends_with('{') ? R"("cluster":)" : R"(,"cluster":)";
  stats += cluster;
  stats += '}';
  return stats;
}

// ---- ClusterNode's part

void ClusterNode::Impl::list_jobs(const ListingQuery& query, Respond respond) {
  // As many rows as a lone daemon's listing looks at: its records' bounded index.
  const std::size_t scan = records_max_count_ + 1024;
  post([query, scan, respond](PgSession& db) { respond({.body = cluster_listing_json(db, query, scan)}); },
       respond);
}

void ClusterNode::Impl::stats(std::string local_stats, Respond respond) {
  // Without the database the node's own figures still answer, "cluster" saying why not (the
  // 503's {"error": ...}).
  auto without = [local_stats, respond](HttpResponse failed) {
    respond({.body = with_cluster(local_stats, failed.body)});
  };
  post([this, local_stats, respond](PgSession& db) {
    const std::string owner = this->owner();
    respond({.body = with_cluster(local_stats,
                                  cluster_stats_json(db, {.name = node_, .owner = owner, .lease = config_.lease}))});
  }, std::move(without));
}

void ClusterNode::Impl::note_unstarted(PgSession& db) {
  std::vector<JobId> ids = held_runs_.unstarted();
  const std::string owner = this->owner();
  if (owner == noted_owner_ && ids == noted_unstarted_) return;
  db.exec("SELECT sandglass_note_unstarted($1, $2::bigint[])",
          {owner, int_array(std::vector<std::int64_t>(ids.begin(), ids.end()))});
  noted_owner_ = owner;
  noted_unstarted_ = std::move(ids);
}

void ClusterNode::list_jobs(const ListingQuery& query, Respond respond) {
  impl_->list_jobs(query, std::move(respond));
}
void ClusterNode::stats(std::string local_stats, Respond respond) {
  impl_->stats(std::move(local_stats), std::move(respond));
}
void ClusterNode::describe_admission(RuntimeStats& stats) const noexcept {
  const Impl::StandingState standing = impl_->standing_queue();
  stats.standing_queue = standing.standing;
  stats.queue_delay_target = standing.target;
}

}  // namespace sandglass::daemon::cluster
