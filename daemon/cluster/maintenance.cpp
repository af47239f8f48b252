// The maintenance thread of a cluster node (node_impl.hpp), on a session of its own: admits the
// delayed jobs whose start has come (sandglass_promote_due), at the next scheduled start or when
// this node scheduled one; and once per heartbeat interval sweeps lost nodes' jobs
// (sandglass_sweep, migrations/functions.sql, "Nodes and leases": only once this node has itself
// held its lease for a whole lease since the database started), retires expired heads while
// every worker is busy, forgets finished records past records.keep_ms or beyond
// records.max_count (sandglass_forget), and reports the runs held here unstarted
// (cluster_view.cpp). Any of these may wait on a lock; none delays a beat.
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <spdlog/spdlog.h>

namespace sandglass::daemon::cluster {

void ClusterNode::Impl::maintenance_loop(std::stop_token st) {
  std::optional<PgSession> db;
  TimePoint next_sweep = Clock::now() + config_.heartbeat;
  // Every node promotes: a node that scheduled a job wakes its own pass, and a job scheduled by a
  // node that died is promoted by the others' next pass (at most a heartbeat interval late).
  TimePoint next_start = next_sweep;
  while (!st.stop_requested()) {
    {
      std::unique_lock lock{maintenance_mu_};
      maintenance_cv_.wait_until(lock, st, std::min(next_sweep, next_start),
                                 [this] { return promote_wanted_; });
      promote_wanted_ = false;
    }
    if (st.stop_requested()) return;
    try {
      ensure(db);
      const std::optional<Duration> until_start = promote_due(*db);
      const TimePoint now = Clock::now();
      if (now >= next_sweep) {
        note_unstarted(*db);
        sweep(*db);
        forget_records(*db);
        next_sweep = Clock::now() + config_.heartbeat;
      }
      next_start = until_start ? saturating_add(now, std::max(*until_start, Duration::zero()))
                               : next_sweep;
    } catch (const PgError& e) {
      db_failed(e, "maintenance");
      db.reset();
      next_start = next_sweep = Clock::now() + kReconnectBackoff;
    }
  }
}

void ClusterNode::Impl::wake_maintenance() {
  {
    std::lock_guard lock{maintenance_mu_};
    promote_wanted_ = true;
  }
  maintenance_cv_.notify_all();
}

std::optional<Duration> ClusterNode::Impl::promote_due(PgSession& db) {
  const PgRows rows = db.exec(
      "SELECT promoted, refused, next_start_us FROM sandglass_promote_due($1, $2, $3, $4::text[], "
      "$5::bigint[])",
      {node_, std::to_string(config_.lease.count()), std::to_string(kPromoteBatch), served_array_,
       int_array(served_tails())});
  if (rows.integer(0, 0) > 0) wake_claimer();  // it may be hungry for them
  if (rows.null(0, 2)) return std::nullopt;
  return std::chrono::microseconds{rows.integer(0, 2)};
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
