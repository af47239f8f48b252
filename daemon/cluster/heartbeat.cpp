// The heartbeat thread of a cluster node (node_impl.hpp): says the node is alive and learns
// whether it still holds its lease (sandglass_beat, migrations/functions.sql, "Nodes and leases").
// An answer "alive" renews the lease as the node knows it (node_lease.hpp); an answer "lost" means
// a sweep has taken this incarnation's jobs: the node cancels every run it holds and joins again
// as a new incarnation. The beat shares its thread and session with nothing else (the sweep,
// expiry and forget passes are maintenance.cpp's; commit points are commit_points.cpp's).
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <random>

namespace sandglass::daemon::cluster {
namespace {

std::string random_suffix() {
  std::random_device rd;
  return fmt::format("{:08x}", rd());
}

}  // namespace

void ClusterNode::Impl::join(PgSession& db) {
  const std::string owner = node_ + "/" + random_suffix();
  const TimePoint sent = Clock::now();
  const PgRows refused = db.exec("SELECT sandglass_join($1, $2, $3::int, $4::int, $5::bigint)",
                                 {owner, node_, std::to_string(workers_), std::to_string(capacity_),
                                  std::to_string(config_.lease.count())});
  if (!refused.null(0, 0)) {
    throw ConfigError{"cluster.node",
                      fmt::format("node name \"{}\" is in use by a live node (owner {}, beating "
                                  "within its lease): give each node its own name",
                                  node_, refused.text(0, 0))};
  }
  lease_.begin(owner, sent);
  announce_kinds(db);  // each incarnation's row names the kinds it serves
}

void ClusterNode::Impl::lease_lost(PgSession& db) {
  const std::string lost = owner();
  // First the epoch moves on: a claim of the lost incarnation whose answer comes after the
  // cancel_all below sees it and cancels its run itself (run_claimed).
  lease_.end();
  std::vector<JobHandle> runs = held_runs_.cancel_all();
  metrics_.leases_lost.Increment();
  metrics_.fenced_runs.Increment(static_cast<double>(runs.size()));
  spdlog::error("cluster: this node lost its lease (owner {}): its jobs were taken back; {} run(s) "
                "held here cancelled; joining again as a new incarnation",
                lost, runs.size());
  for (JobHandle& h : runs) h.cancel();  // cause caller; their outcomes are stale
  join(db);
  spdlog::info("cluster node {} joined again (owner {})", node_, owner());
  wake_claimer();
  listener_wake_.wake();  // it LISTENs for the new incarnation's cancels
}

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
    // What this node runs, for cluster admission (migrations/functions.sql, "Admission and
    // intake"): the jobs it holds and their expected rest, as a lone daemon's admission counts its
    // run slots; and the standing-queue detector's target while it sees a standing queue, else 0.
    const auto [busy, running_rest] = held_runs_.load(now);
    const StandingState standing = standing_queue();
    const Duration standing_target = standing.standing ? standing.target : Duration::zero();
    try {
      ensure(db);
      const TimePoint sent = Clock::now();
      const PgRows alive = db->exec(
          "SELECT sandglass_beat($1, $2::bigint, $3::int, $4::bigint, $5::bigint)",
          {owner(), std::to_string(config_.lease.count()), std::to_string(busy),
           std::to_string(us_of(running_rest)), std::to_string(us_of(standing_target))});
      if (alive.boolean(0, 0)) {
        lease_.acknowledged(sent);
      } else {
        lease_lost(*db);
      }
      next_beat = now + config_.heartbeat;
      db_ok_.store(true, std::memory_order_relaxed);
    } catch (const PgError& e) {
      if (db_ok_.exchange(false, std::memory_order_relaxed)) {
        spdlog::error("cluster: the database cannot be reached; /readyz answers 503");
      }
      db_failed(e, "heartbeat");
      db.reset();
      next_beat = Clock::now() + kReconnectBackoff;
    } catch (const ConfigError& e) {
      spdlog::error("cluster: cannot join again: {}", e.what());
      next_beat = Clock::now() + config_.heartbeat;
    }
  }
}

}  // namespace sandglass::daemon::cluster
