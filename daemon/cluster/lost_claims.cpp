// A cluster node's claims whose answer was lost (node_impl.hpp). A claim commits in the
// database before its rows reach the node; when the connection drops in between, the rows are
// running under this live owner, whose heartbeat keeps their lease, and nothing here knows to
// run them. So every statement that may claim and fails marks the claims unknown, and the
// claimer, once it reaches the database again, gives back this owner's running rows that it
// does not hold (functions.sql, sandglass_take_back_unheld): queued again when they may still run,
// else ended node_lost, so that each gets exactly one outcome.
//
// The failed statement's server process may outlive its connection: a broken network, or a
// statement waiting for a lock, notices the lost client only when it next writes to it. Until
// that process ends, its transaction may still commit its claims, and a take-back run before
// then cannot see them: in its snapshot those rows are still queued (or, claimed at insert, do
// not exist), so no lock, blocking or SKIP LOCKED, would wait for them. The rows would then be
// running under this live owner with nobody to run them, and never get an outcome. So the
// take-back first ends every such process (pg_terminate_backend, by pid and backend_start so
// that a reused pid is never hit) and waits until pg_stat_activity no longer lists it. A
// process leaves pg_stat_activity only after its transaction has ended (PostgreSQL aborts it
// before it clears its status entry at exit), so what it committed is then visible and what it
// did not is undone.
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <spdlog/spdlog.h>

#include <thread>

namespace sandglass::daemon::cluster {

PgRows ClusterNode::Impl::exec_claiming(PgSession& db, const std::string& sql,
                                        const std::vector<std::optional<std::string>>& params,
                                        bool may_claim) {
  try {
    return db.exec(sql, params);
  } catch (const PgError&) {
    if (may_claim) {  // the claim may have committed all the same
      {
        std::lock_guard lock{orphans_mu_};
        // An error the server reported ended the transaction with nothing committed; a broken
        // session's server process may still be inside it.
        if (db.broken()) orphans_.push_back(db.backend());
        claims_unknown_.store(true, std::memory_order_relaxed);
      }
      wake_claimer();
    }
    throw;
  }
}

void ClusterNode::Impl::end_orphans(PgSession& db, const std::vector<PgSession::Backend>& orphans) {
  if (orphans.empty()) return;
  std::vector<std::int64_t> pids;
  std::vector<std::optional<std::string>> started;  // none: the session could not read it
  for (const PgSession::Backend& b : orphans) {
    pids.push_back(b.pid);
    started.push_back(b.started.empty() ? std::nullopt : std::optional<std::string>{b.started});
  }
  const std::vector<std::optional<std::string>> params{int_array(pids), text_array(started)};
  // Each statement is a transaction of its own, so each reads pg_stat_activity afresh.
  const std::string alive =
      "SELECT a.pid FROM pg_stat_activity a JOIN unnest($1::int[], $2::timestamptz[]) AS o(pid, "
      "started) ON a.pid = o.pid AND (o.started IS NULL OR a.backend_start = o.started)";
  db.exec("SELECT pg_terminate_backend(t.pid) FROM (" + alive + ") t", params);
  const Deadline until = Deadline::after(kOrphanWait);
  while (db.exec(alive, params).rows() > 0) {
    if (until.expired()) {
      throw PgError{"cluster database at " + db.server() + ": a failed claim's session has not "
                    "ended yet; its claims are taken back once it has"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{2});
  }
}

void ClusterNode::Impl::take_back_unheld(PgSession& db, const std::vector<Finish>& carried) {
  // Exclusive: no claim of this node is in flight, so each claim that reached this node has
  // put its runs in held_runs_ (run_claimed) or, once ended, in an outcome not yet written.
  std::unique_lock no_claims{claim_run_mu_};
  // Runs, not jobs: a stale attempt held here does not make the row's newer one known.
  std::vector<std::int64_t> known_ids;
  std::vector<std::int64_t> known_attempts;
  const auto know = [&](JobId id, int attempt) {
    known_ids.push_back(static_cast<std::int64_t>(id));
    known_attempts.push_back(attempt);
  };
  for (const RunId& run : held_runs_.runs()) know(run.id, run.attempt);  // before outcomes_: see finished()
  {
    std::lock_guard lock{claim_mu_};
    for (const Finish& f : outcomes_) know(f.id, f.attempt);
  }
  for (const Finish& f : carried) know(f.id, f.attempt);
  std::vector<PgSession::Backend> orphans;
  {
    std::lock_guard lock{orphans_mu_};
    orphans.swap(orphans_);
    claims_unknown_.store(false, std::memory_order_relaxed);
  }
  try {
    end_orphans(db, orphans);
    const PgRows taken = db.exec(
        "SELECT requeued, lost FROM sandglass_take_back_unheld($1, $2, $3::bigint[], $4::int[], "
        "$5::text[], $6::bigint[])",
        {owner(), node_, int_array(known_ids), int_array(known_attempts), served_array_,
         int_array(served_tails())});
    const std::int64_t requeued = taken.integer(0, 0);
    const std::int64_t lost = taken.integer(0, 1);
    metrics_.take_backs.Increment();
    if (requeued + lost > 0) {
      metrics_.lost_answers.Increment(static_cast<double>(requeued + lost));
      spdlog::warn("cluster: {} claimed job(s) whose answer was lost taken back: {} queued again, "
                   "{} ended node_lost", requeued + lost, requeued, lost);
    }
  } catch (const PgError&) {
    std::lock_guard lock{orphans_mu_};
    orphans_.insert(orphans_.end(), orphans.begin(), orphans.end());  // the next round ends them
    claims_unknown_.store(true, std::memory_order_relaxed);
    throw;
  }
}

}  // namespace sandglass::daemon::cluster
