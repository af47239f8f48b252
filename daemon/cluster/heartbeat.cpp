// The heartbeat thread of a cluster node (node_impl.hpp): says the node is alive, sweeps lost
// nodes' jobs (sandglass_sweep), retires expired heads while every worker is busy and forgets
// finished records past records.keep_ms (sandglass_forget). Commit points are written before
// they are passed, by the commit thread (commit_points.cpp).
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <spdlog/spdlog.h>

namespace sandglass::daemon::cluster {

void ClusterNode::Impl::heartbeat_loop(std::stop_token st) {
  std::optional<PgSession> db;
  TimePoint next_beat = Clock::now();
  while (!st.stop_requested()) {
    {
      std::unique_lock lock{heartbeat_mu_};
      heartbeat_cv_.wait_until(lock, st, next_beat, [] { return false; });
    }
    if (st.stop_requested()) return;
    const TimePoint now = Clock::now();
    // What this node runs, for cluster admission (migrations/006_running_work.sql): the jobs it
    // holds and their expected rest, as a lone daemon's admission counts its run slots.
    std::int64_t busy = 0;
    Duration running_rest{};
    {
      std::lock_guard lock{held_mu_};
      for (auto& [id, h] : held_jobs_) {
        ++busy;
        // A job claimed ahead, still in the local queue, has all its work ahead.
        running_rest +=
            h.started_at ? std::max(*h.started_at + h.tail - now, Duration::zero()) : h.work;
      }
    }
    try {
      ensure(db);
      const PgRows alive = db->exec(  // no commit points: commit_points.cpp writes them
          "SELECT sandglass_heartbeat($1, '{}'::bigint[], '{}'::int[], $2::int, $3::bigint)",
          {owner_, std::to_string(busy), std::to_string(us_of(running_rest))});
      if (!alive.boolean(0, 0)) {  // our row was removed: come back
        db->exec("INSERT INTO sandglass_nodes (owner, node, workers, capacity) VALUES ($1, $2, $3, $4) "
                 "ON CONFLICT (owner) DO UPDATE SET heartbeat_at = clock_timestamp()",
                 {owner_, node_, std::to_string(workers_), std::to_string(capacity_)});
      }
      next_beat = now + config_.heartbeat;
      sweep(*db);
      forget_records(*db);
      db_ok_.store(true, std::memory_order_relaxed);
    } catch (const PgError& e) {
      if (db_ok_.exchange(false, std::memory_order_relaxed)) {
        spdlog::error("cluster: the database cannot be reached; /readyz answers 503");
      }
      db_failed(e, "heartbeat");
      db.reset();
      next_beat = Clock::now() + kReconnectBackoff;
    }
  }
}

void ClusterNode::Impl::sweep(PgSession& db) {
  const std::vector<std::int64_t> tails = served_tails();
  const PgRows swept = db.exec("SELECT requeued, lost FROM sandglass_sweep($1, $2, $3::text[], $4::bigint[])",
                               {node_, std::to_string(config_.lease.count()), served_array_,
                                int_array(tails)});
  if (swept.rows() > 0 && (swept.integer(0, 0) > 0 || swept.integer(0, 1) > 0)) {
    metrics_.reclaimed.Increment(static_cast<double>(swept.integer(0, 0)));
    metrics_.lost.Increment(static_cast<double>(swept.integer(0, 1)));
    spdlog::warn("cluster: took back the jobs of a lost node: {} queued again, {} ended node_lost",
                 swept.integer(0, 0), swept.integer(0, 1));
    wake_claimer();
  }
  // Expired heads end even while every worker is busy (a claim of zero jobs retires them).
  const PgRows retired = db.exec(
      "SELECT retired FROM sandglass_claim($1, $2, 0, $3::text[], $4::bigint[]) WHERE retired > 0",
      {owner_, node_, served_array_, int_array(tails)});
  if (retired.rows() > 0) metrics_.retired.Increment(static_cast<double>(retired.integer(0, 0)));
}

void ClusterNode::Impl::forget_records(PgSession& db) {
  const TimePoint now = Clock::now();
  if (now < next_forget_) return;
  next_forget_ = now + kForgetEvery;
  const PgRows forgotten = db.exec("SELECT sandglass_forget($1, $2)",
                                   {std::to_string(keep_records_.count()), std::to_string(kForgetBatch)});
  metrics_.forgotten.Increment(static_cast<double>(forgotten.integer(0, 0)));
}

}  // namespace sandglass::daemon::cluster
