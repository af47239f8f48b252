// node_impl.hpp (private) — `ClusterNode::Impl`, the parts of a cluster node and the state they
// share. Each part lives in its own file:
//   cluster_node.cpp    lifecycle: connect and migrate, start, stop_claiming, stop
//   intake.cpp          POST/GET/DELETE: admission and insert of batched submissions (with
//                       claims at insert), reads, cancels (two intake threads)
//   intake_retry.cpp    a broken session replaced and the request tried once more; a batch
//                       whose COMMIT went unanswered settled by its intake tokens
//   claimer.cpp         the claimer thread: one statement writes the ready outcomes and claims
//                       the free workers' worth; starting the claimed jobs; local cancels
//   outcome_writer.cpp  a local job's end: its outcome queued for the claimer, the outcome
//                       arrays of a statement, the fencing's stale count
//   listener.cpp        LISTEN/NOTIFY: waiters answered, cancels, claimer wake-ups
//   cluster_view.cpp    the listing and /v1/stats' "cluster" object (on an intake thread), and
//                       the report of the runs held unstarted (maintenance thread)
// and the state with an owner of its own:
//   waiters.hpp         the waiting clients, each with a timer at its deadline + the reserve
//   held_runs.hpp       the runs this node holds, keyed by (job id, attempt)
//   node_lease.hpp      this incarnation's lease as the node knows it (self-fencing)
//   commit_points.cpp   a handler's commit() waits until its row says committed (the commit
//                       thread writes the marks)
//   heartbeat.cpp       heartbeat: the lease kept, or lost and a new incarnation joined
//   maintenance.cpp     delayed jobs admitted at their start; the sweep of lost nodes, expired
//                       heads, forgotten records
//   lost_claims.cpp     after a claiming statement failed: the claims it may have committed
//                       unseen are taken back
// The rules themselves are SQL (migrations/, see cluster_node.hpp).
//
// Thread safety: as ClusterNode; each guarded member names its mutex.
#pragma once

#include "daemon/api/jobs_listing.hpp"
#include "daemon/cluster/cluster_metrics.hpp"
#include "daemon/cluster/cluster_node.hpp"
#include "daemon/cluster/held_runs.hpp"
#include "daemon/cluster/node_lease.hpp"
#include "daemon/cluster/pg_session.hpp"
#include "daemon/cluster/run_time_sharing.hpp"
#include "daemon/cluster/waiters.hpp"
#include "daemon/cluster/wake_fd.hpp"
#include "runtime/standing_queue.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace sandglass::daemon::cluster {

inline constexpr std::size_t kIntakeThreads = 2;
inline constexpr std::chrono::microseconds kClaimGather{1000};  // most a claim waits for more workers to free up
inline constexpr std::chrono::milliseconds kReconnectBackoff{200};  // between attempts to reach the database
inline constexpr std::chrono::seconds kOrphanWait{5};  // most a take-back waits for an old session's end
inline constexpr std::size_t kFinishBatch = 512;      // most outcomes one statement writes
// How long a DELETE waits for the cancelled job to end before it answers 202 "cancelling".
inline constexpr Duration kCancelAnswerWait = std::chrono::milliseconds{100};
inline constexpr std::size_t kSubmitBatch = 128;      // most submissions one statement inserts
inline constexpr std::size_t kRecentOutcomes = 8192;  // outcome ids remembered for late waiters
inline constexpr std::size_t kMostAhead = 16;         // most jobs a node claims beyond its workers
inline constexpr std::size_t kPromoteBatch = 1000;    // most delayed jobs one pass admits
// Finished records (functions.sql, sandglass_forget): looked for this often, at most kForgetBatch
// rows a time, and kept at least kLeastKeep (a waiter reads its record after the outcome's NOTIFY).
inline constexpr std::chrono::seconds kForgetEvery{1};
inline constexpr std::size_t kForgetBatch = 10'000;
inline constexpr std::chrono::seconds kLeastKeep{1};

// How many claimed jobs a node of `workers` holds beyond them while the cluster's queue has a
// backlog (claiming ahead, claimer.cpp): `configured` ([cluster] claim_ahead) if set, else a
// quarter of its workers, at least 1, at most kMostAhead; and never so many that the local
// Runtime's queue of `capacity` could refuse or shed one (queue_full, shed): all the node holds
// fit in it even while no worker has taken one (the config's validation refuses a larger
// claim_ahead).
constexpr std::size_t claim_ahead_for(std::size_t workers, std::size_t capacity,
                                      std::optional<std::size_t> configured = {}) noexcept {
  const std::size_t room = capacity > workers ? capacity - workers : 0;
  return std::min(configured.value_or(std::clamp<std::size_t>(workers / 4, 1, kMostAhead)), room);
}

class ClusterNode::Impl {
 public:
  Impl(const DaemonConfig& config, const KindRegistry& kinds, Runtime& runtime);
  ~Impl() { stop(Duration::zero()); }

  void start(const std::string& listen_address);
  void observe_runs(std::function<void(const Outcome&)> observer) {
    run_observer_ = std::move(observer);
  }
  void stop_claiming();
  void stop(Duration flush_for);

  ClientGone submit(JobRequest req, TimePoint arrived_at, Respond respond);
  void submit_many(std::vector<JobRequest> requests, TimePoint arrived_at,
                   std::function<void(std::vector<HttpResponse>)> answered);
  void job_record(JobId id, bool wait, Respond respond);
  void cancel(JobId id, Respond respond);
  std::string metrics_text() const;
  // The cluster view (cluster_view.hpp), read on an intake thread.
  void list_jobs(const ListingQuery& query, Respond respond);
  void stats(std::string local_stats, Respond respond);
  bool ready() const noexcept { return db_ok_.load(std::memory_order_relaxed); }
  // Whether this node sees a standing queue (standing_held_), and the target delay; any thread.
  struct StandingState {
    bool standing = false;
    Duration target{};
  };
  StandingState standing_queue() const noexcept {
    return {.standing = standing_held_.load(std::memory_order_relaxed), .target = standing_.target()};
  }
  const std::string& node_name() const noexcept { return node_; }

 private:
  struct Submission {
    std::mutex mu;
    std::optional<JobId> id;  // guarded by mu
    bool gone = false;        // guarded by mu
  };

  struct Pending {
    JobRequest request;
    TimePoint arrived_at;
    std::string token;  // the intake token its row carries (new_intake_token)
    Respond respond;  // emptied once answered
    std::shared_ptr<Submission> state;
  };

  using Task = std::function<void(PgSession&)>;
  struct QueuedTask {
    Task run;
    Respond on_failure;  // answers 503 when the database cannot be reached; may be empty
  };

  struct Finish {
    JobId id;
    int attempt;
    Outcome outcome;
  };

  // A claimed job as a claim (or a claim at insert) returned it.
  struct Claimed {
    JobId id;
    std::string kind;
    std::string args;  // JSON text
    Priority priority;
    int attempt;
    Deadline deadline;  // the node's own, from the time left by the database's clock
    std::uint64_t epoch = 0;  // the lease's epoch when the claim was sent (NodeLease)
    std::optional<JobRetry> retry;  // its row's retry spec: retried here, within this claim
  };

  // The outcome arrays of one statement (sandglass_finish_claim's outcome parameters).
  struct OutcomeArrays {
    std::string ids, attempts, states, reasons, causes, committed, results, errors, run_us;
    std::string attempt_logs, retry_stopped;  // a retried job's record parts (NULL: none)
  };

  // ---- lifecycle, shared helpers (cluster_node.cpp)
  // Opens `db` if it has no usable session, named after this incarnation (sandglass_session_name).
  // Throws PgError.
  void ensure(std::optional<PgSession>& db);
  SessionTimeouts session_timeouts() const noexcept {
    return {.statement = config_.statement_timeout, .lock = config_.lock_timeout,
            .idle_in_transaction = config_.idle_in_transaction_timeout};
  }
  void db_failed(const PgError& e, std::string_view where);
  static HttpResponse unreachable();

  // ---- intake (intake.cpp)
  void post(Task run, Respond on_failure = {});
  void intake_loop(std::stop_token st);

  // ---- intake retries (intake_retry.cpp)
  // A random UUID as text: the server-side token of one submission, written with its row.
  static std::string new_intake_token();
  // Inserts `batch` (insert); after a failure the server did not time out, once more. A try
  // whose session broke is settled first (settle_unseen, on a new session), so a submission
  // whose row was committed unseen is answered with its job and never inserted twice; the
  // next try uses that new session. Whatever is still unanswered then gets a 503.
  void submit_batch(std::optional<PgSession>& db, std::vector<Pending>& batch);
  // Runs a read or cancel; when the session broke, once more on a new one; else a 503.
  void run_task(std::optional<PgSession>& db, const QueuedTask& task);
  // After the session of `old` broke during an insert of `batch`: ends that server process (its
  // transaction can then no longer commit), looks up the batch's intake tokens, and answers
  // each submission whose row exists as admitted. The rest were never inserted. Blocks.
  // Throws PgError (then nothing is known about the unanswered ones).
  void settle_unseen(PgSession& db, const PgSession::Backend& old, std::vector<Pending>& batch);
  // The 503 for a request the database did not serve: a timeout (the server is there) or
  // unreachable.
  static HttpResponse not_served(const PgError& e);
  // Tells the cluster which kinds this node serves (sandglass_nodes.kinds, for admission).
  void announce_kinds(PgSession& db);
  // The central and tail estimates of a job of `kind`, the local Runtime's (Runtime::estimate)
  // for the job's estimate key, which here is its kind (run_claimed): with a size (`expected`
  // above zero: JobRequest::expected, or JobKind::expected from its args), that size for both
  // (a claimed job states none to the Runtime, nor does a shared line, so no ratio is learnt);
  // else the kind's recent runs, this node's own and the other nodes' announced ones (each
  // line of an outcome's NOTIFY carries its run time: run_time_sharing.hpp), zero when none
  // are known.
  RunEstimate estimates(const std::string& kind, Duration expected = Duration::zero()) const {
    return runtime_.estimate({.kind = kind, .expected = expected});
  }
  std::vector<std::int64_t> served_tails();  // the tail estimate of each kind in served_
  // POST /v1/jobs on an intake thread, for the submissions that waited together: the budget
  // left becomes each row's deadline by the database's clock; admission and insert are one
  // statement for all of them (sandglass_submit_claim), which also claims for this node the
  // ones it may (free workers, ahead of the queue), and marks the jobs whose submitter waits
  // (awaited: their outcomes are announced). Each one answered gets an empty respond.
  void insert(PgSession& db, std::vector<Pending>& batch);
  void admitted(PgSession& db, const Pending& p, JobId id, std::string_view verdict,
                const Respond& respond);
  static HttpResponse rejection(const std::string& kind, Reason reason, std::string_view why);
  // The budget a submission was granted, and what is left of it less the reserve.
  struct BudgetLeft {
    Duration budget;
    Duration left;
  };
  BudgetLeft budget_left(const JobRequest& req, TimePoint arrived_at) const;
  // A refusal this node can decide without the database, with `left` of the budget and the
  // kind's `tail` estimate: budget_too_small, or deadline_implausible when the tail alone
  // exceeds the time left; none: ask it.
  std::optional<HttpResponse> refused_here(const JobRequest& req, Duration left, Duration tail);
  // The waiting client left. Like a lone daemon: a job without a key that nobody else here
  // waits for is cancelled (cause caller), wherever it runs.
  void client_left(JobId id, bool keyed);

  // ---- listener (listener.cpp)
  // A client waits for the job `id`: answered by its outcome's NOTIFY or, at the latest, by a
  // read of its row at `due` (waiters.hpp).
  // A reader of job `id`'s row (GET ?wait=true, DELETE; after a sandglass_cancel when
  // `cancel_first`): answered `answer_from_row(row)` now if the job is over, else once it is or
  // at the latest `past_deadline` after the job's deadline (without: kCancelAnswerWait from
  // now). On an intake thread; throws PgError.
  void wait_for_row(PgSession& db, JobId id, const Respond& respond,
                    std::optional<Duration> past_deadline,
                    std::function<HttpResponse(const Record&)> answer_from_row,
                    bool cancel_first = false);
  // A submitter's waiter, or with `answer_from_row` a reader's (waiters.hpp).
  void add_waiter(JobId id, const Respond& respond, TimePoint due,
                  std::function<HttpResponse(const Record&)> answer_from_row = {});
  void listener_loop(std::stop_token st);
  // LISTENs on the cancel channel of the current incarnation instead of `cancel_channel` (empty:
  // none yet), which it then names, and cancels what was asked before. Returns the epoch
  // followed. Throws PgError.
  std::uint64_t listen_for_cancels(PgSession& db, std::string& cancel_channel);
  void handle_notifications(PgSession& db, const std::vector<Notification>& notes);
  // One outcome line "ID KIND RUN_US": learns the run time, the notify lag, and moves the job's
  // waiters to `to_answer`.
  void outcome_noticed(std::string_view line, TimePoint now, std::vector<Waiter>& to_answer);
  // Reads the rows of `to_answer`'s jobs and answers the waiters of those that are over (or
  // gone: 404); the others wait on (Waiters::put_back). Returns how many were answered. Throws
  // PgError (all of them wait on).
  std::size_t answer(PgSession& db, std::vector<Waiter> to_answer);
  // After a reconnect: answers every waiter whose job ended meanwhile.
  void answer_all_terminal(PgSession& db);
  // Answers the waiters whose due time has come and whose job is over (waiters.hpp).
  void answer_due(PgSession& db);

  // ---- claimer (claimer.cpp)
  void wake_claimer();
  void claimer_loop(std::stop_token st);
  // Under `lock` (of claim_mu_): waits up to kClaimGather for a group of workers to be free
  // while some are busy (none: returns at once). Blocks.
  void gather(std::unique_lock<std::mutex>& lock, std::stop_token st);
  // Writes `outcomes` and claims up to `limit` jobs (0: none) in one statement, and starts the
  // claimed jobs, for which `limit` workers were reserved (the unused are given back). It
  // announces all the outcomes when sharing_ says so, else only the awaited ones. True when it
  // took `limit` jobs (the queue may hold more). Throws PgError (nothing was started;
  // the reservation is given back; the caller keeps the outcomes).
  bool exchange(PgSession& db, const std::vector<Finish>& outcomes, std::size_t limit);
  // Reserves up to `most` places for jobs about to be claimed; returns how many. A place is a
  // free worker or, with `ahead` while the queue has a backlog, one of the claim_ahead_ places
  // in the local queue beyond the workers (claim_room).
  std::size_t reserve_workers(std::size_t most, bool ahead) noexcept;
  // How many claimed jobs this node may hold now: its workers, plus claim_ahead_ while the
  // cluster's queue has a backlog (backlog_) and `ahead`.
  std::size_t claim_room(bool ahead) const noexcept;
  // Gives back reserved workers no job took. `for_claimer`: they were held back from the
  // claimer (an insert that claimed fewer than it reserved), so it is asked to claim.
  void release_workers(std::size_t n, bool for_claimer) noexcept;
  // Starts a claimed job on a worker reserved for it.
  void run_claimed(Claimed job);
  // Cancels the job `id` this node runs (cause caller): the run of `attempt` only, when given;
  // without it, every run of the job here, also one not started yet (remembered for
  // run_claimed: HeldRuns::cancel).
  void cancel_local(JobId id, std::optional<int> attempt = std::nullopt);

  // ---- lost claims (lost_claims.cpp)
  // Runs a statement that claims jobs when `may_claim`. If it fails, it may have committed
  // without its answer arriving: the claimer is then asked to take back what it finds
  // (take_back_unheld), and the PgError goes on to the caller.
  PgRows exec_claiming(PgSession& db, const std::string& sql,
                       const std::vector<std::optional<std::string>>& params, bool may_claim);
  // On the claimer thread, while no other statement of this node claims: first the server
  // processes of the failed claiming sessions are ended (end_orphans), then this owner's running
  // rows that are neither held here nor in an outcome not yet written (`carried`: the
  // claimer's) are given back by the sweep's rule (sandglass_take_back_unheld). Blocks. Throws
  // PgError (the request stays for the next round).
  void take_back_unheld(PgSession& db, const std::vector<Finish>& carried);
  // Terminates `orphans` (pg_terminate_backend) and waits until pg_stat_activity lists none of
  // them, for at most kOrphanWait. Blocks. Throws PgError when one outlives the wait.
  static void end_orphans(PgSession& db, const std::vector<PgSession::Backend>& orphans);

  // ---- outcomes (outcome_writer.cpp)
  // A local job is over: its worker is free, its outcome goes to the claimer; or, removed
  // unstarted by the local Runtime's drain deadline, it goes to given_back_.
  void finished(JobId id, int attempt, const Outcome& o);
  // In stop(), once the claimer has stopped: each job of given_back_ that is still this owner's
  // and attempt's running row is queued again by the sweep's rule (sandglass_take_back), or
  // ends node_lost when too little of its budget is left. Blocks. After a database error the
  // rest are the other nodes' sweep's, once this node has left.
  void give_back(PgSession& db);
  static OutcomeArrays outcome_arrays(const std::vector<Finish>& batch);
  // One outcome a statement wrote, and whether it announced it (functions.sql, "Announced
  // outcomes").
  struct Written {
    JobId id;
    bool notified;
  };
  // The outcomes a statement wrote, of `batch`: counts the stale rest, remembers when each
  // announced one was sent (for the notify lag), and tells own_runs_ which ones no line will
  // come for (the unannounced and the stale).
  void outcomes_written(const std::vector<Finish>& batch, const std::vector<Written>& written,
                        TimePoint sent);

  // ---- commit points (commit_points.cpp)
  enum class CommitAnswer { pending, recorded, refused };
  struct CommitRequest {
    JobId id = 0;
    int attempt = 0;
    CommitAnswer answer = CommitAnswer::pending;  // guarded by commit_mu_
    bool abandoned = false;                       // guarded by commit_mu_: its handler gave up
                                                  // (the commit thread drops it unsent)
  };
  // The CommitRecorder of attempt `attempt` of the claimed job `id` (its row's id; the local
  // Runtime numbers its jobs itself), installed by run_claimed's handler for its run.
  class JobCommits final : public CommitRecorder {
   public:
    JobCommits(Impl& node, JobId id, int attempt) noexcept : node_{node}, id_{id}, attempt_{attempt} {}
    bool record(const JobContext& ctx) override { return node_.record_commit(id_, attempt_, ctx); }

   private:
    Impl& node_;
    JobId id_;
    int attempt_;
  };
  // On the handler's thread, inside JobContext::commit(). Blocks until the commit thread has
  // written the mark (true), refused it (the job was asked to cancel or is no longer this
  // owner's attempt; the commit thread cancels it, false), or the job is cancelled (false).
  bool record_commit(JobId id, int attempt, const JobContext& ctx);
  void commit_loop(std::stop_token st);

  // The current incarnation's owner (lease_).
  std::string owner() const { return lease_.owner(); }

  // ---- heartbeat (heartbeat.cpp)
  void heartbeat_loop(std::stop_token st);
  // Writes a new incarnation's row (sandglass_join) and makes it this node's. Throws PgError;
  // throws ConfigError when a live incarnation of node_ holds the name.
  void join(PgSession& db);
  // The heartbeat's answer said lost: every run held here is cancelled (claimed-ahead ones
  // too; none of them is this node's any more) and the node joins as a new incarnation.
  // Throws PgError, ConfigError (join).
  void lease_lost(PgSession& db);

  // ---- maintenance (maintenance.cpp): the sweep of lost nodes, expired heads, forgotten
  // records; on a thread and session of their own, so that none of them delays a beat.
  void maintenance_loop(std::stop_token st);
  // Brings the maintenance thread to admit delayed jobs now (this node scheduled one).
  void wake_maintenance();
  // Admits the delayed jobs whose start has come (sandglass_promote_due). Returns how long until
  // the next scheduled start (none: nothing scheduled). Throws PgError.
  std::optional<Duration> promote_due(PgSession& db);
  void sweep(PgSession& db);
  // The finished records older than keep_records_, and beyond records_max_count_ the oldest.
  void forget_records(PgSession& db);
  // Reports the runs held here unstarted (sandglass_note_unstarted, cluster_view.cpp) when they
  // changed since the last report. Maintenance thread.
  void note_unstarted(PgSession& db);

  // ---- state
  const ClusterConfig config_;
  const BudgetPolicy budget_;
  const KindRegistry& kinds_;
  Runtime& runtime_;
  // ClusterNode::observe_runs: set before start(), read-only after it.
  std::function<void(const Outcome&)> run_observer_;
  const std::size_t workers_;
  const std::size_t claim_ahead_;  // claim_ahead_for(workers_, capacity_, [cluster] claim_ahead)
  const std::size_t capacity_;
  const std::chrono::milliseconds keep_records_;  // records.keep_ms, at least kLeastKeep
  const std::size_t records_max_count_;           // records.max_count
  TimePoint next_forget_{};                       // the maintenance thread's
  // What note_unstarted last wrote, and for which owner: the maintenance thread's.
  std::string noted_owner_;
  std::vector<JobId> noted_unstarted_;
  std::vector<std::string> served_;
  std::string served_array_;  // served_ as a text array parameter
  std::string node_;
  // This incarnation (owner: node + "/" + a random suffix, the fencing owner) and its lease.
  NodeLease lease_;
  std::optional<PgSession> main_db_;
  bool started_ = false;
  bool stopped_ = false;
  std::atomic<bool> db_ok_{false};
  std::atomic<bool> listening_{false};  // the listener's first LISTEN is done

  ClusterMetrics metrics_;

  std::mutex intake_mu_;
  std::condition_variable_any intake_cv_;
  std::deque<QueuedTask> intake_queue_;  // guarded by intake_mu_
  std::deque<Pending> submit_queue_;     // guarded by intake_mu_
  std::deque<std::vector<Pending>> batch_queue_;  // guarded by intake_mu_; one statement each

  Waiters waiters_{kRecentOutcomes};
  WakeFd listener_wake_;

  // Held (shared) by every statement that may claim: the claimer's and the intake's. Taken
  // exclusively by stop_claiming, so that no claim runs after it.
  std::shared_mutex claim_run_mu_;
  bool claiming_stopped_ = false;  // guarded by claim_run_mu_ (written exclusively)
  // Set by stop_claiming before it waits for claim_run_mu_: no new claim takes the shared
  // lock, so that stop_claiming is not starved by overlapping ones. (Relaxed: claiming_stopped_
  // under the lock is the rule; this only thins out the readers.)
  std::atomic<bool> claims_closing_{false};

  std::mutex claim_mu_;  // the claimer's inputs; never held during a statement
  std::condition_variable_any claim_cv_;
  bool claim_wanted_ = true;       // guarded by claim_mu_
  std::deque<Finish> outcomes_;    // guarded by claim_mu_: local outcomes not yet sent
  bool outcomes_in_flight_ = false;  // guarded by claim_mu_: a statement carries some
  // Claimed jobs the local Runtime removed unstarted at its drain deadline (cancelled_in_queue,
  // cause shutdown): such a job has not started, so it goes back to the cluster's queue for
  // another node (give_back) instead of ending here. Guarded by claim_mu_.
  std::vector<Finish> given_back_;
  // Claimed jobs without a local outcome yet, and places reserved for claims in flight. Only
  // reserve_workers raises it (a CAS up to claim_room), so claims never exceed the free workers
  // plus, while the queue has a backlog, claim_ahead_ jobs waiting in the local Runtime's queue.
  std::atomic<std::size_t> held_{0};
  // The claimer's last claim took all it asked for: the queue has more than this node's free
  // workers take, so the jobs it claims ahead would have waited in the database's queue anyway
  // rather than for another node's free worker. A claim that finds fewer clears it. (Relaxed:
  // a hint; held_ never exceeds workers_ + claim_ahead_ whatever it reads.)
  std::atomic<bool> backlog_{false};
  // A claiming statement failed since the last take_back_unheld (exec_claiming). Written
  // under orphans_mu_ together with orphans_; read without it only as a hint.
  std::atomic<bool> claims_unknown_{false};
  RunTimeSharing sharing_;  // claimer thread only: when its exchanges announce all outcomes
  std::mutex orphans_mu_;
  // The server processes of sessions that broke during a claiming statement: each may still
  // be inside that statement's transaction (lost_claims.cpp). Guarded by orphans_mu_.
  std::vector<PgSession::Backend> orphans_;

  HeldRuns held_runs_;  // the runs of claimed jobs without a queued outcome (held_runs.hpp)
  OwnRuns own_runs_;    // the runs whose announced outcome the listener skips (run_time_sharing.hpp)

  // The standing-queue detector of the queue this node claims from (functions.sql, "Admission
  // and intake"): written by the claimer thread only (exchange: each claimed job's queue wait,
  // a short claim, each run time), read by the heartbeat (which reports it) and the stats. The
  // target is fixed by admission.queue_delay_target_ms, as the local Runtime's options say.
  detail::StandingQueue standing_{runtime_.options().queue_delay_target};
  // What the node reports: set once the detector says a queue stands, cleared only by a claim
  // that finds nothing (claimer.cpp, "The standing queue"). Written by the claimer thread;
  // relaxed: a hint the heartbeat and the stats read.
  std::atomic<bool> standing_held_{false};

  std::mutex lag_mu_;
  // Announced outcomes of this node not yet heard back (the notify lag). Guarded by lag_mu_.
  std::unordered_map<JobId, TimePoint> finish_sent_;

  std::mutex heartbeat_mu_;  // guards nothing: heartbeat_cv_'s
  std::condition_variable_any heartbeat_cv_;
  std::mutex maintenance_mu_;
  std::condition_variable_any maintenance_cv_;
  bool promote_wanted_ = false;  // guarded by maintenance_mu_: a delayed job was scheduled here

  std::mutex commit_mu_;
  std::condition_variable_any commit_cv_;       // the commit thread waits for requests
  std::condition_variable_any commit_done_cv_;  // handlers wait for their answers
  std::vector<std::shared_ptr<CommitRequest>> commit_queue_;  // guarded by commit_mu_: not yet sent
  bool commits_closed_ = false;  // guarded by commit_mu_: the commit thread has stopped

  // Last: the threads stop (in stop()) before anything above goes.
  std::jthread listener_;
  std::vector<std::jthread> intake_;
  std::jthread heartbeat_;
  std::jthread maintenance_;
  std::jthread claimer_;
  std::jthread committer_;
};

}  // namespace sandglass::daemon::cluster
