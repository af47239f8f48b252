// cluster_view.hpp (private) — the whole cluster as an operator sees it, read from the database
// in bounded statements: the job listing (GET /v1/jobs in cluster mode) and the "cluster" object
// of GET /v1/stats. The rules of what a row shows are SQL (migrations/functions.sql, "The cluster
// view"); ClusterNode::list_jobs and ClusterNode::stats run these on an intake thread.
//
//   std::string body = cluster_listing_json(db, query, 11'024);   // {"jobs": [...], "next_cursor"}
//   std::string stats = with_cluster(local_stats, cluster_stats_json(db, me, lease));
//
// The listing has the lone daemon's query parameters and shape (jobs_listing.hpp). Each record
// is the cluster's GET /v1/jobs/{id} record (its "node": the node that ran it, "attempt",
// "priority"); a live one also carries "remaining_ms". A running row its node holds unstarted
// (claimed ahead, in its local queue, as the node last reported: once per heartbeat interval)
// is listed "claimed", and `state=claimed` selects those. A state, kind, reason or cause filter
// reads at most `scan` of the newest rows (older than the cursor); `state` queued, running or
// claimed reads the live rows through their partial indexes instead. A page shorter than
// `limit` with a next_cursor means the rows read ran out before the page was full: the next page
// goes on from the oldest row read.
//
// Thread safety: free functions; a PgSession belongs to the calling thread.
#pragma once

#include "daemon/api/jobs_listing.hpp"
#include "daemon/cluster/pg_session.hpp"

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace sandglass::daemon::cluster {

// The listing's JSON body. Throws PgError.
std::string cluster_listing_json(PgSession& db, const ListingQuery& query, std::size_t scan);

// Who asks for the cluster's figures: this node's name and incarnation (owner), and its lease
// (the sweep's rule for a row that states none).
struct ViewingNode {
  std::string_view name;
  std::string_view owner;
  std::chrono::milliseconds lease;
};

// The "cluster" object of /v1/stats, in one statement:
//   {"node": NAME, "incarnation": OWNER,
//    "nodes": [{"name", "incarnation", "workers", "capacity", "busy", "claimed_ahead",
//               "lease_age_ms", "lease_ms", "lost", "swept", "kinds", "standing_queue_target_ms",
//               "up_ms"}, ...],
//    "jobs": {"queued": {"critical": N, ..., "total": N}, "running": {...}, "claimed": {...}}}
// Nodes are the rows of sandglass_nodes (each incarnation; at most kMostNodesShown, the most
// recently beaten first), "lost" once a sweep judged it so ("swept") or its lease has lapsed;
// queued totals come from the admission counters, running and claimed from the running rows;
// "standing_queue_target_ms" is the standing-queue target a node's last beat reported (0: it
// sees no standing queue; functions.sql, "Admission and intake"). Throws PgError.
inline constexpr std::size_t kMostNodesShown = 256;
std::string cluster_stats_json(PgSession& db, const ViewingNode& me);

// `stats` (a JSON object's text) with "cluster": `cluster` (a JSON value's text) added.
std::string with_cluster(std::string stats, std::string_view cluster);

}  // namespace sandglass::daemon::cluster
