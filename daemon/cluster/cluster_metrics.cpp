#include "daemon/cluster/cluster_metrics.hpp"

#include <fmt/format.h>
#include <prometheus/text_serializer.h>

namespace sandglass::daemon::cluster {
namespace {

prometheus::Counter& counter(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}

prometheus::Histogram& histogram(prometheus::Registry& r, const char* name, const char* help,
                                 prometheus::Histogram::BucketBoundaries bounds) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, std::move(bounds));
}

}  // namespace

ClusterMetrics::ClusterMetrics()
    : claims{counter(*registry_, "sandglass_cluster_claims_total", "Claim statements run by this node")},
      claimed{counter(*registry_, "sandglass_cluster_claimed_jobs_total", "Jobs this node claimed")},
      claimed_at_submit{counter(*registry_, "sandglass_cluster_claimed_at_submit_total",
                                "Jobs this node inserted already claimed by itself (also counted "
                                "in sandglass_cluster_claimed_jobs_total)")},
      retired{counter(*registry_, "sandglass_cluster_retired_at_claim_total",
                      "Queued jobs ended by this node's claims: expired or too late to start")},
      stale{counter(*registry_, "sandglass_cluster_stale_outcomes_total",
                    "Outcomes discarded by fencing: the job was no longer this node's")},
      reclaimed{counter(*registry_, "sandglass_cluster_reclaimed_total",
                        "Jobs of lost nodes queued again by this node's sweeps")},
      lost{counter(*registry_, "sandglass_cluster_node_lost_total",
                   "Jobs of lost nodes ended node_lost by this node's sweeps")},
      lost_answers{counter(*registry_, "sandglass_cluster_lost_answers_total",
                           "Jobs this node claimed but never learned of (the claim's answer was "
                           "lost with its connection), taken back after the reconnect")},
      take_backs{counter(*registry_, "sandglass_cluster_take_backs_total",
                         "Checks for claims whose answer was lost, each run after a claiming "
                         "statement failed (whether or not they found any)")},
      refused_here{counter(*registry_, "sandglass_cluster_refused_here_total",
                           "Submissions this node refused deadline_implausible without asking the "
                           "database: the tail estimate alone exceeds the time left")},
      db_errors{counter(*registry_, "sandglass_cluster_db_errors_total",
                        "Statements or connections to the cluster database that failed")},
      forgotten{counter(*registry_, "sandglass_cluster_records_forgotten_total",
                        "Rows of finished jobs this node deleted, records.keep_ms after they ended")},
      commit_points{counter(*registry_, "sandglass_cluster_commit_points_total",
                            "Commit points of this node's jobs written to their rows before the "
                            "handlers passed them")},
      commit_refused{counter(*registry_, "sandglass_cluster_commit_points_refused_total",
                             "Commit points refused: the job was asked to cancel, or was no "
                             "longer this node's attempt (the job is cancelled)")},
      stale_runs{counter(*registry_, "sandglass_cluster_stale_runs_cancelled_total",
                         "Runs this node cancelled because it claimed a newer attempt of their job "
                         "(their rows say the newer attempt)")},
      leases_lost{counter(*registry_, "sandglass_cluster_leases_lost_total",
                          "Times this node found its lease lost (its heartbeat's answer) and "
                          "rejoined as a new incarnation")},
      fenced_runs{counter(*registry_, "sandglass_cluster_fenced_runs_total",
                          "Runs this node cancelled because it lost its lease (their jobs are no "
                          "longer its own)")},
      intake_settled{counter(*registry_, "sandglass_cluster_intake_settled_total",
                             "Submissions whose statement broke with its connection and whose "
                             "row was then found by its intake token (answered, not inserted "
                             "again)")},
      waits_timed{counter(*registry_, "sandglass_cluster_waits_timed_total",
                          "Waiting clients answered by their timer (the job's deadline plus the "
                          "reserve) rather than by a NOTIFY")},
      claim_latency{histogram(*registry_, "sandglass_cluster_claim_seconds",
                              "Time of one claim statement (with the outcomes it writes), as this "
                              "node waits for it",
                              {0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5})},
      batch_size{histogram(*registry_, "sandglass_cluster_claim_batch_size",
                           "Jobs one claim statement took", {0, 1, 2, 4, 8, 16, 32, 64, 128})},
      notify_lag{histogram(*registry_, "sandglass_cluster_notify_lag_seconds",
                           "From writing an outcome to receiving its NOTIFY, on this node (announced "
                           "outcomes only: awaited ones, and those of exchanges that share run times)",
                           {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5})},
      intake_wait{histogram(*registry_, "sandglass_cluster_intake_wait_seconds",
                            "From a submission's arrival to the sending of the statement that "
                            "admits or refuses it (the wait for an intake thread)",
                            {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1})},
      intake_statement{histogram(*registry_, "sandglass_cluster_intake_statement_seconds",
                                 "Time of one admission statement (sandglass_submit_claim), as "
                                 "this node waits for it",
                                 {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5})},
      intake_batch{histogram(*registry_, "sandglass_cluster_intake_batch_size",
                             "Submissions one admission statement carried",
                             {1, 2, 4, 8, 16, 32, 64, 128})},
      commit_latency{histogram(*registry_, "sandglass_cluster_commit_point_seconds",
                               "From a handler's commit() to its mark written in the job's row",
                               {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5})} {}

std::string ClusterMetrics::text(bool database_up, std::size_t held_jobs) const {
  std::string text = prometheus::TextSerializer{}.Serialize(registry_->Collect());
  text += fmt::format(
      "# HELP sandglass_cluster_database_up Whether the last heartbeat reached the cluster "
      "database\n# TYPE sandglass_cluster_database_up gauge\nsandglass_cluster_database_up {}\n",
      database_up ? 1 : 0);
  text += fmt::format(
      "# HELP sandglass_cluster_held_jobs Claimed jobs this node holds (running or about to)\n"
      "# TYPE sandglass_cluster_held_jobs gauge\nsandglass_cluster_held_jobs {}\n",
      held_jobs);
  return text;
}

}  // namespace sandglass::daemon::cluster
