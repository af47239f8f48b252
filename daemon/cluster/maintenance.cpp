// The maintenance thread of a cluster node (node_impl.hpp), once per heartbeat interval on a
// session of its own: sweeps lost nodes' jobs (sandglass_sweep, migrations/functions.sql, "Nodes
// and leases": only once this node has itself held its lease for a whole lease since the database
// started), retires expired heads while every worker is busy, and forgets finished records past
// records.keep_ms or beyond records.max_count (sandglass_forget); it also reports the runs held
// here unstarted (cluster_view.cpp). Any of these may wait on a lock; none delays a beat.
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <spdlog/spdlog.h>

namespace sandglass::daemon::cluster {

void ClusterNode::Impl::maintenance_loop(std::stop_token st) {
  std::optional<PgSession> db;
  while (!st.stop_requested()) {
    {
      std::unique_lock lock{maintenance_mu_};
      maintenance_cv_.wait_for(lock, st, config_.heartbeat, [] { return false; });
    }
    if (st.stop_requested()) return;
    try {
      ensure(db);
      note_unstarted(*db);
      sweep(*db);
      forget_records(*db);
    } catch (const PgError& e) {
      db_failed(e, "maintenance");
      db.reset();
    }
  }
}

void ClusterNode::Impl::sweep(PgSession& db) {
  const std::vector<std::int64_t> tails = served_tails();
  const std::string owner = this->owner();
  const PgRows swept = db.exec(
      "SELECT requeued, lost, lost_owners FROM sandglass_sweep($1, $2, $3::bigint, $4::text[], "
      "$5::bigint[])",
      {owner, node_, std::to_string(config_.lease.count()), served_array_, int_array(tails)});
  if (swept.rows() > 0 && (swept.integer(0, 0) > 0 || swept.integer(0, 1) > 0)) {
    metrics_.reclaimed.Increment(static_cast<double>(swept.integer(0, 0)));
    metrics_.lost.Increment(static_cast<double>(swept.integer(0, 1)));
    spdlog::warn("cluster: took back the jobs of lost nodes {}: {} queued again, {} ended node_lost",
                 swept.text(0, 2), swept.integer(0, 0), swept.integer(0, 1));
    wake_claimer();
  }
  // Expired heads end even while every worker is busy (a claim of zero jobs retires them).
  const PgRows retired = db.exec(
      "SELECT retired FROM sandglass_claim($1, $2, 0, $3::text[], $4::bigint[]) WHERE retired > 0",
      {owner, node_, served_array_, int_array(tails)});
  if (retired.rows() > 0) metrics_.retired.Increment(static_cast<double>(retired.integer(0, 0)));
}

void ClusterNode::Impl::forget_records(PgSession& db) {
  const TimePoint now = Clock::now();
  if (now < next_forget_) return;
  next_forget_ = now + kForgetEvery;
  const PgRows forgotten = db.exec(
      "SELECT sandglass_forget($1, $2, $3, $4)",
      {std::to_string(keep_records_.count()), std::to_string(kForgetBatch),
       std::to_string(records_max_count_), std::to_string(std::chrono::milliseconds{kLeastKeep}.count())});
  metrics_.forgotten.Increment(static_cast<double>(forgotten.integer(0, 0)));
}

}  // namespace sandglass::daemon::cluster
