// A cluster node's outcomes (node_impl.hpp): a local job's end frees its worker and queues its
// outcome for the claimer, whose next statement writes it with the fencing of
// sandglass_finish (only the current owner and attempt of a running job); an outcome that is
// not written is stale: discarded and counted.
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <spdlog/spdlog.h>

namespace sandglass::daemon::cluster {

void ClusterNode::Impl::finished(JobId id, int attempt, const Outcome& o) {
  {
    std::lock_guard lock{held_mu_};
    held_jobs_.erase(id);
  }
  {
    std::lock_guard lock{claim_mu_};  // the claimer's wait reads held_ under it: no lost wake-up
    outcomes_.push_back({id, attempt, o});
    claim_wanted_ = true;
    held_.fetch_sub(1, std::memory_order_relaxed);
  }
  claim_cv_.notify_all();
}

ClusterNode::Impl::OutcomeArrays ClusterNode::Impl::outcome_arrays(const std::vector<Finish>& batch) {
  std::vector<std::int64_t> ids, attempts, run_us;
  std::vector<std::optional<std::string>> states, reasons, causes, results, errors;
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
  }
  return {.ids = int_array(ids), .attempts = int_array(attempts), .states = text_array(states),
          .reasons = text_array(reasons), .causes = text_array(causes),
          .committed = text_array(committed), .results = text_array(results),
          .errors = text_array(errors), .run_us = int_array(run_us)};
}

void ClusterNode::Impl::outcomes_written(const std::vector<Finish>& batch,
                                         const std::vector<JobId>& written, TimePoint sent) {
  if (written.size() < batch.size()) {
    metrics_.stale.Increment(static_cast<double>(batch.size() - written.size()));
    spdlog::info("cluster: {} stale outcome(s) discarded: those jobs were no longer this node's",
                 batch.size() - written.size());
  }
  std::lock_guard lock{lag_mu_};
  if (finish_sent_.size() > 4 * kFinishBatch) finish_sent_.clear();  // NOTIFYs lost: forget
  for (const JobId id : written) finish_sent_[id] = sent;
}

}  // namespace sandglass::daemon::cluster
