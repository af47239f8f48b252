// A cluster node's claims whose answer was lost (node_impl.hpp). A claim commits in the
// database before its rows reach the node; when the connection drops in between, the rows are
// running under this live owner, whose heartbeat keeps their lease, and nothing here knows to
// run them. So every statement that may claim and fails marks the claims unknown, and the
// claimer, once it reaches the database again, gives back this owner's running rows that it
// does not hold (migrations/005_take_back.sql): queued again when they may still run, else
// ended node_lost, so that each gets exactly one outcome.
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <spdlog/spdlog.h>

namespace sandglass::daemon::cluster {

PgRows ClusterNode::Impl::exec_claiming(PgSession& db, const std::string& sql,
                                        const std::vector<std::optional<std::string>>& params,
                                        bool may_claim) {
  try {
    return db.exec(sql, params);
  } catch (const PgError&) {
    if (may_claim) {  // the claim may have committed all the same
      claims_unknown_.store(true, std::memory_order_relaxed);
      wake_claimer();
    }
    throw;
  }
}

void ClusterNode::Impl::take_back_unheld(PgSession& db, const std::vector<Finish>& carried) {
  // Exclusive: no claim of this node is in flight, so each claim that reached this node has
  // put its jobs in held_jobs_ (run_claimed) or, once ended, in an outcome not yet written.
  std::unique_lock no_claims{claim_run_mu_};
  std::vector<std::int64_t> known;
  {
    std::lock_guard lock{held_mu_};  // before outcomes_: a job that ends moves from here to there
    for (const auto& [id, held] : held_jobs_) known.push_back(static_cast<std::int64_t>(id));
  }
  {
    std::lock_guard lock{claim_mu_};
    for (const Finish& f : outcomes_) known.push_back(static_cast<std::int64_t>(f.id));
  }
  for (const Finish& f : carried) known.push_back(static_cast<std::int64_t>(f.id));
  claims_unknown_.store(false, std::memory_order_relaxed);
  try {
    const PgRows taken = db.exec(
        "SELECT requeued, lost FROM sandglass_take_back_unheld($1, $2, $3::bigint[], $4::text[], "
        "$5::bigint[])",
        {owner_, node_, int_array(known), served_array_, int_array(served_tails())});
    const std::int64_t requeued = taken.integer(0, 0);
    const std::int64_t lost = taken.integer(0, 1);
    if (requeued + lost > 0) {
      metrics_.lost_answers.Increment(static_cast<double>(requeued + lost));
      spdlog::warn("cluster: {} claimed job(s) whose answer was lost taken back: {} queued again, "
                   "{} ended node_lost", requeued + lost, requeued, lost);
    }
  } catch (const PgError&) {
    claims_unknown_.store(true, std::memory_order_relaxed);
    throw;
  }
}

}  // namespace sandglass::daemon::cluster
