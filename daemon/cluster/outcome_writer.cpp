// A cluster node's outcomes (node_impl.hpp): a local job's end frees its worker and queues its
// outcome for the claimer, whose next statement writes it with the fencing of
// sandglass_finish (only the current owner and attempt of a running job); an outcome that is
// not written is stale: discarded and counted. A claimed job the node's drain deadline removed
// unstarted has no outcome here: it is given back to the queue (give_back).
#include "daemon/api/job_records.hpp"
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <spdlog/spdlog.h>

namespace sandglass::daemon::cluster {

void ClusterNode::Impl::finished(JobId id, int attempt, const Outcome& o) {
  // Only a shutdown's drain deadline removes a queued job with cause shutdown: a job claimed
  // (ahead, or just before stop_claiming) that this node never started.
  const bool give_back = o.reason == Reason::cancelled_in_queue && o.cause == CancelCause::shutdown;
  // Its run time is in the Runtime's estimate already: its announced line is not counted again.
  if (o.started()) own_runs_.ran(id, Clock::now());
  {
    std::lock_guard lock{claim_mu_};  // the claimer's wait reads held_ under it: no lost wake-up
    if (give_back) {
      given_back_.push_back({id, attempt, o});
    } else {
      outcomes_.push_back({id, attempt, o});
    }
    claim_wanted_ = true;
    held_.fetch_sub(1, std::memory_order_relaxed);
  }
  // Removed from the held runs only once its outcome is queued: take_back_unheld reads the held
  // runs first and the queued outcomes second, so it finds the run in one of them.
  held_runs_.remove({id, attempt});
  claim_cv_.notify_all();
}

ClusterNode::Impl::OutcomeArrays ClusterNode::Impl::outcome_arrays(const std::vector<Finish>& batch) {
  std::vector<std::int64_t> ids, attempts, run_us;
  std::vector<std::optional<std::string>> states, reasons, causes, results, errors;
  std::vector<std::optional<std::string>> attempt_logs, retry_stopped;
  std::vector<std::string> committed;
  for (const Finish& f : batch) {
    const Outcome& o = f.outcome;
    ids.push_back(static_cast<std::int64_t>(f.id));
    attempts.push_back(f.attempt);
    states.emplace_back(std::string{to_string(o.state)});
    reasons.emplace_back(std::string{to_string(o.reason)});
    causes.push_back(o.cause == CancelCause::none ? std::nullopt
                                                  : std::optional<std::string>{std::string{to_string(o.cause)}});
    committed.emplace_back(o.committed ? "t" : "f");
    results.push_back(o.result.empty() ? std::nullopt : std::optional<std::string>{o.result});
    errors.push_back(o.error.empty() ? std::nullopt : std::optional<std::string>{o.error});
    run_us.push_back(o.started() ? us_of(o.timings.run_time) : -1);
    attempt_logs.push_back(o.attempts.empty() ? std::nullopt
                                              : std::optional<std::string>{attempts_json_text(o.attempts)});
    retry_stopped.push_back(o.retry_stop == RetryStop::none
                                ? std::nullopt
                                : std::optional<std::string>{std::string{to_string(o.retry_stop)}});
  }
  return {.ids = int_array(ids), .attempts = int_array(attempts), .states = text_array(states),
          .reasons = text_array(reasons), .causes = text_array(causes),
          .committed = text_array(committed), .results = text_array(results),
          .errors = text_array(errors), .run_us = int_array(run_us),
          .attempt_logs = text_array(attempt_logs), .retry_stopped = text_array(retry_stopped)};
}

void ClusterNode::Impl::outcomes_written(const std::vector<Finish>& batch,
                                         const std::vector<Written>& written, TimePoint sent) {
  if (written.size() < batch.size()) {
    metrics_.stale.Increment(static_cast<double>(batch.size() - written.size()));
    spdlog::info("cluster: {} stale outcome(s) discarded: those jobs were no longer this node's",
                 batch.size() - written.size());
  }
  // This node's run times are in its Runtime's estimates already: no line comes for an
  // outcome written unannounced or not written at all (stale), so own_runs_ forgets those now.
  std::unordered_set<JobId> announced;
  for (const Written& w : written) {
    if (w.notified) announced.insert(w.id);
  }
  for (const Finish& f : batch) {
    if (!announced.contains(f.id)) own_runs_.not_announced(f.id);
  }
  std::lock_guard lock{lag_mu_};
  if (finish_sent_.size() > 4 * kFinishBatch) finish_sent_.clear();  // NOTIFYs lost: forget
  for (const Written& w : written) {
    if (w.notified) finish_sent_[w.id] = sent;
  }
}

void ClusterNode::Impl::give_back(PgSession& db) {
  std::vector<Finish> jobs;
  {
    std::lock_guard lock{claim_mu_};
    jobs.swap(given_back_);
  }
  if (jobs.empty()) return;
  const std::string tails = int_array(served_tails());
  const std::string why = "node " + node_ + " shut down before it started the job";
  int requeued = 0;
  int lost = 0;
  try {
    for (const Finish& f : jobs) {
      // One transaction per job: sandglass_take_back wants its row locked by the caller, and
      // a single row needs no order among the counter rows it updates.
      db.exec("BEGIN");
      const PgRows mine = db.exec(
          "SELECT 1 FROM sandglass_jobs WHERE id = $1 AND attempt = $2 AND owner = $3 AND "
          "state = 'running' FOR UPDATE",
          {std::to_string(f.id), std::to_string(f.attempt), owner()});
      if (mine.rows() > 0) {
        const PgRows taken = db.exec("SELECT sandglass_take_back($1, $2, $3::text[], $4::bigint[], $5)",
                                     {node_, std::to_string(f.id), served_array_, tails, why});
        ++(taken.boolean(0, 0) ? requeued : lost);
      }
      db.exec("COMMIT");
    }
  } catch (const PgError& e) {
    db_failed(e, "giving back unstarted jobs");
    if (!db.broken()) {
      try {
        db.exec("ROLLBACK");
      } catch (const PgError&) {
      }
    }
  }
  spdlog::info("cluster: {} claimed job(s) not started before the drain deadline given back: {} "
               "queued again, {} ended node_lost", jobs.size(), requeued, lost);
}

}  // namespace sandglass::daemon::cluster
