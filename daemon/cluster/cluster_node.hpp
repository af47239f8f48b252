// cluster_node.hpp (private) — `ClusterNode`, one sandglassd's part in cluster mode: many daemons
// share one deadline-ordered queue, a table in PostgreSQL (schema: migrations/001_schema.sql).
//
//   ClusterNode node{config, kinds, runtime};   // connects, migrates; throws PgError
//   node.start("127.0.0.1:8080");               // registers the node, starts its threads
//   ... Api delegates POST/GET/DELETE /v1/jobs to node.submit / job_record / cancel ...
//   node.stop_claiming(); runtime.shutdown(...); node.stop();
//
// Where the rules live (docs/architecture.md). The tables are migrations/001_schema.sql
// (later schema changes: numbered files after it); every function, each written once, is
// migrations/functions.sql, applied at every start and by --migrate (migrations.hpp). There,
// sandglass_submit_claim admits a batch (sandglass_admit) with claims at insert;
// sandglass_finish_claim writes outcomes and claims the next jobs in one statement; the
// take-back of claims whose answer was lost is sandglass_take_back_unheld (lost_claims.cpp);
// admission counts the running jobs' expected rest that each node reports with its heartbeat
// (heartbeat.cpp). An outcome is announced only when someone waits for it, on the waiting
// nodes' own channels (the row's `awaited_by`, set in the statement that inserts the job or
// attaches a waiter to it), or when its node shares its run times, on sandglass_outcome (all
// outcomes of one exchange per kShareRunTimes, run_time_sharing.hpp): each announcing commit
// takes PostgreSQL's one NOTIFY lock. A cancel is announced on its owner's own channel.
// - Admission: sandglass_admit — the lone daemon's order and reasons, with the queued work of
//   the job's class and higher ones from the counters plus, while no worker is idle, the
//   running rest, divided by the live nodes' workers. A node refuses alone only what that rule
//   refuses with nothing ahead (intake.cpp, refused_here).
// - The clock: the database's. A deadline is written as clock_timestamp() + the budget left at
//   insert (sandglass_submit_claim); every "is it too late" is decided in SQL by that clock
//   (sandglass_claim, sandglass_sweep). A node only receives "remaining_us" at a claim and turns
//   it into its own steady-clock Deadline (claimer.cpp, intake.cpp), so machine clocks never
//   matter.
// - The claim rule: sandglass_claim — at most the node's free workers (reserved before the
//   statement, `reserve_workers`), plus, while the queue has a backlog, a quarter of its
//   workers' worth that waits in the local Runtime's queue so that no worker waits for a claim's
//   round trip (claimer.cpp, "claiming ahead"); class then deadline, SKIP LOCKED, retiring head
//   rows that can no longer finish. A claim at insert (sandglass_submit_claim) takes only jobs that come
//   before every queued job the node serves, within the workers it reserved: what a claim right
//   after the insert would take. While some workers are busy the claimer waits up to 1 ms for
//   a group of them to free up (`claimer_loop`), so that one statement serves several jobs.
// - Fencing: sandglass_finish (called by sandglass_finish_claim) writes a batch of outcomes,
//   each only WHERE its id, attempt and owner match a running job; the others are stale
//   outcomes, discarded and counted (outcome_writer.cpp). Waiters learn of a batch's awaited
//   outcomes by NOTIFYs of many lines each.
// - Commit points: a handler's `commit()` returns only once its row says committed
//   (commit_points.cpp; sandglass_record_commits: fenced like outcomes, refused for a
//   job asked to cancel); a lost node's committed job is never queued again (node_lost
//   instead), so a job past its commit point never runs twice.
//
// Threads (node_impl.hpp names the file of each): two intake threads (submissions, reads,
// cancels; each its own connection), a claimer (outcomes and claims, one statement per round
// trip), a listener (LISTEN sandglass_outcome, sandglass_queued and the node's own outcome
// and cancel channels; answers waiters, cancels local jobs, wakes the claimer), a heartbeat thread (heartbeat, sweep of
// lost nodes, retiring expired heads) and a commit thread (commit points). Each reconnects on
// its own after a lost connection; /readyz says 503 while the heartbeat cannot reach the DB.
//
// Thread safety: `submit`, `job_record`, `cancel`, `metrics_text` and `ready` may be called from
// any thread; `start`, `stop_claiming` and `stop` from one thread, in that order.
#pragma once

#include "daemon/api/job_request.hpp"
#include "daemon/api/jobs_listing.hpp"
#include "daemon/http/http_message.hpp"

#include <sandglass/daemon/daemon_config.hpp>
#include <sandglass/daemon/kind_registry.hpp>
#include <sandglass/runtime.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sandglass::daemon::cluster {

class ClusterNode {
 public:
  using Respond = std::function<void(HttpResponse)>;
  using ClientGone = std::function<void()>;

  // Connects to config.cluster->conninfo and applies missing migrations. Blocks. Throws PgError
  // naming the server (never the password) when it cannot, or when the schema is too new.
  // `kinds` and `runtime` must outlive the node.
  ClusterNode(const DaemonConfig& config, const KindRegistry& kinds, Runtime& runtime);
  ClusterNode(const ClusterNode&) = delete;
  ClusterNode& operator=(const ClusterNode&) = delete;
  ~ClusterNode();  // stop() if not yet. Blocks.

  // Registers this node (named `listen_address` unless cluster.node names it) and starts the
  // threads. Throws PgError.
  void start(const std::string& listen_address);
  // Called with the outcome of every run of a claimed job here (on the runtime's thread that
  // publishes it), before the outcome is written: the daemon counts its retries. Set before
  // start(), or never.
  void observe_runs(std::function<void(const Outcome&)> observer);
  // No claim starts after this returns. Blocks for at most one claim statement.
  void stop_claiming();
  // After the runtime has drained: writes the outcomes still pending (for up to `flush_for`),
  // queues again the claimed jobs the drain deadline removed before they started (another
  // node runs them), answers waiters of jobs that run elsewhere with 503, leaves the cluster,
  // stops the threads.
  void stop(Duration flush_for = std::chrono::seconds{5});

  // POST /v1/jobs with a validated request whose kind this daemon knows. Answers through
  // `respond` exactly once, from another thread. Returns what to call when the client leaves
  // before its answer (a job with no key and no other waiter here is then cancelled).
  ClientGone submit(JobRequest request, TimePoint arrived_at, Respond respond);
  // POST /v1/jobs/batch with validated requests whose kinds this daemon knows, none of them
  // waited for: one statement admits and inserts them all. Calls `answered` exactly once, from
  // another thread, with each request's answer in order (as submit's with wait=false).
  void submit_many(std::vector<JobRequest> requests, TimePoint arrived_at,
                   std::function<void(std::vector<HttpResponse>)> answered);
  // GET /v1/jobs/ID, from the database; with `wait`, once the job is over or at its deadline
  // plus the reserve with the row as it stands (as a lone daemon's record_waits.hpp).
  void job_record(JobId id, bool wait, Respond respond);
  // DELETE /v1/jobs/ID: 200 with the final record once the job is over, waiting up to 100 ms
  // for a running one (it ends on its node); else 202 {"id", "state": "cancelling"}.
  void cancel(JobId id, Respond respond);
  std::string metrics_text() const;            // the cluster series, Prometheus text format
  // GET /v1/jobs from the database (cluster_view.hpp): the whole cluster's jobs, each with its
  // "node". Answers through `respond` exactly once, from another thread.
  void list_jobs(const ListingQuery& query, Respond respond);
  // GET /v1/stats: `local_stats` (this node's snapshot, stats_json) with the "cluster" object
  // from the database added (cluster_view.hpp). Answers through `respond` exactly once, from
  // another thread.
  void stats(std::string local_stats, Respond respond);
  // Sets the standing-queue rule's state in `stats` (standing_queue, queue_delay_target) to
  // this node's detector's, which sees the cluster's queue through its claims (functions.sql,
  // "Admission and intake"): the local Runtime admits nothing itself in cluster mode.
  void describe_admission(RuntimeStats& stats) const noexcept;
  bool ready() const noexcept;                 // false while the database is unreachable
  const std::string& node_name() const noexcept;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// `sandglassd --migrate`: applies the missing migrations and returns what it did, for printing.
// Throws PgError.
std::string migrate_only(const ClusterConfig& config);

}  // namespace sandglass::daemon::cluster
