// The claimer thread of a cluster node (node_impl.hpp). One statement per round trip
// (sandglass_finish_claim) writes the outcomes that are ready and claims as many jobs as this
// node has free workers, so that a worker's outcome and its next job share a round trip; the
// claimed jobs are started here. After stop_claiming it only writes outcomes. The outcomes
// are announced to the other nodes when awaited, and all of one exchange per kShareRunTimes
// (the other nodes' run-time learning): exchange.
//
// Wake-ups. Every place that frees up here (a job's end, a claimed job refused or dropped, an
// unused reservation of a claim at insert) brings the claimer to claim again, so a node needs
// sandglass_queued only while its last claim came back short: the database sends it only then
// (the node is hungry, functions.sql, "Hungry nodes" relies on this); the poll (poll_ms) stays the
// fallback.
//
// Claiming ahead. A worker that ends a job would otherwise wait for the next claim's round trip
// (plus the gather's wait) before it has work again: under overload, with 100 ms jobs, 10-20 %
// of the workers' time on this 2-core machine, while admission counts every worker as draining
// the queue. So while the queue has a backlog (the last claim got all it asked for), the
// claimer also claims up to claim_ahead_ jobs beyond the free workers ([cluster] claim_ahead,
// by default a quarter of the workers: claim_ahead_for in node_impl.hpp);
// they wait in the local Runtime's EDF queue, and a worker that frees up takes one at once.
// Such a job is claimed like any other (a running row of this owner and attempt): a cancel
// reaches it through held_runs_, a lost node's sweep queues it again (it has not passed its
// commit point, it has not even started), the local Runtime drops it unstarted at its deadline
// with an outcome (written like any), and shutdown drains it like a running job, or gives it
// back to the queue at the drain deadline (give_back). Claims at insert never claim ahead: with
// no backlog, another node's free worker may be about to take the job.
//
// The standing queue. Each exchange feeds this node's detector (standing_, the lone daemon's
// StandingQueue): every job it claims starts a sojourn, its queue wait by the database's clock;
// a claim that comes back short (the queue had no more of this node's kinds) ends the
// detector's standing queue at once; each run time moves the adaptive target. Once the
// detector says a queue stands, the node holds that verdict (standing_held_) until a claim finds
// nothing at all, not until one job waited less than the target: while the rule holds,
// admission takes only jobs predicted to start within the target, so jobs that start within it
// are the rule working, not the queue draining, and with the detector's own exit the queue
// would fill to the edge of the budgets for a whole interval each time. Nor does a short claim
// end it: the rule keeps about a target's worth of jobs queued, which one claim with its
// claim-ahead places may take whole. Only a queue found empty says the overload is over. The
// heartbeat reports the held verdict; admission applies it (functions.sql, "Admission and
// intake"). Claims at insert are not fed: such a job never waited, and a claim of an empty
// queue finds nothing anyway.
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <boost/json/parse.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace sandglass::daemon::cluster {
namespace {

// The exchange's columns, in the order its statement selects them.
enum ExchangeColumn : int {
  kWritten, kNotified, kJobId, kKind, kArgs, kPriority, kAttempt, kRemainingUs, kRetired,
  kRetryMax, kRetryBackoffUs, kWaitedUs,
};

// A claimed row's retry spec (NULL retry_max: none).
std::optional<JobRetry> retry_of(const PgRows& rows, int r) {
  if (rows.null(r, kRetryMax)) return std::nullopt;
  return JobRetry{.max_attempts = static_cast<int>(rows.integer(r, kRetryMax)),
                  .backoff = std::chrono::microseconds{
                      rows.null(r, kRetryBackoffUs) ? 0 : rows.integer(r, kRetryBackoffUs)}};
}

}  // namespace

void ClusterNode::Impl::wake_claimer() {
  {
    std::lock_guard lock{claim_mu_};
    claim_wanted_ = true;
  }
  claim_cv_.notify_all();  // the claimer, and stop() waiting for the outcomes
}

std::size_t ClusterNode::Impl::claim_room(bool ahead) const noexcept {
  return ahead && backlog_.load(std::memory_order_relaxed) ? workers_ + claim_ahead_ : workers_;
}

std::size_t ClusterNode::Impl::reserve_workers(std::size_t most, bool ahead) noexcept {
  const std::size_t room = claim_room(ahead);
  std::size_t held = held_.load(std::memory_order_relaxed);
  while (true) {
    if (held >= room || most == 0) return 0;
    const std::size_t n = std::min(most, room - held);
    if (held_.compare_exchange_weak(held, held + n, std::memory_order_relaxed)) return n;
  }
}

void ClusterNode::Impl::release_workers(std::size_t n, bool for_claimer) noexcept {
  if (n == 0) return;
  {
    std::lock_guard lock{claim_mu_};  // the claimer's wait reads held_ under it: no lost wake-up
    held_.fetch_sub(n, std::memory_order_relaxed);
    // A claim that found too few jobs does not ask again (the queue had no more); workers an
    // insert held back may have been free while the claimer looked, so it looks again.
    if (for_claimer) claim_wanted_ = true;
  }
  claim_cv_.notify_all();
}

// Claims go in groups: while some workers are busy, the claimer waits a little (kClaimGather at
// most) for a group of them to be free, so that a round trip serves several jobs and their
// outcomes. An idle node claims at once.
void ClusterNode::Impl::gather(std::unique_lock<std::mutex>& lock, std::stop_token st) {
  const std::size_t group = std::max<std::size_t>(1, std::min(config_.claim_batch, workers_ / 2));
  claim_cv_.wait_for(lock, st, kClaimGather, [this, group] {
    const std::size_t held = held_.load(std::memory_order_relaxed);
    return held == 0 || held + group <= claim_room(/*ahead=*/true);
  });
}

void ClusterNode::Impl::claimer_loop(std::stop_token st) {
  std::optional<PgSession> db;
  std::vector<Finish> outcomes;  // taken from outcomes_; kept across a failed statement
  while (!st.stop_requested()) {
    {
      std::unique_lock lock{claim_mu_};
      if (outcomes.empty()) {
        outcomes_in_flight_ = false;
        claim_cv_.notify_all();  // stop() waits for every outcome to be written
      }
      // A poll every poll_ms claims even when no NOTIFY came.
      claim_cv_.wait_for(lock, st, config_.poll, [this, &outcomes] {
        return !outcomes.empty() || !outcomes_.empty() ||
               (claim_wanted_ &&
                held_.load(std::memory_order_relaxed) < claim_room(/*ahead=*/true));
      });
      if (st.stop_requested()) return;
      gather(lock, st);
      if (st.stop_requested()) return;
      claim_wanted_ = false;
    }
    try {
      ensure(db);
      if (claims_unknown_.load(std::memory_order_relaxed)) take_back_unheld(*db, outcomes);
      bool more = true;
      bool first = true;
      while (more && !st.stop_requested()) {
        {
          std::unique_lock lock{claim_mu_};
          // The jobs the last statement claimed are still ending (no-op jobs end within
          // microseconds of their start): the next statement waits for them as the first did.
          if (!std::exchange(first, false)) gather(lock, st);
          while (!outcomes_.empty() && outcomes.size() < kFinishBatch) {
            outcomes.push_back(std::move(outcomes_.front()));
            outcomes_.pop_front();
          }
          outcomes_in_flight_ = !outcomes.empty();
        }
        std::shared_lock claim_lock{claim_run_mu_, std::defer_lock};
        std::size_t limit = 0;
        // A node whose lease may have lapsed claims nothing (the claim rule checks it too).
        if (!claims_closing_.load(std::memory_order_relaxed) && lease_.fresh(Clock::now())) {
          claim_lock.lock();
          if (!claiming_stopped_) limit = reserve_workers(config_.claim_batch, /*ahead=*/true);
          if (limit == 0) claim_lock.unlock();
        }
        if (limit == 0 && outcomes.empty()) break;
        more = exchange(*db, outcomes, limit);
        outcomes.clear();
      }
    } catch (const PgError& e) {
      db_failed(e, "claimer");
      db.reset();
      std::this_thread::sleep_for(kReconnectBackoff);
      wake_claimer();
    }
  }
}

bool ClusterNode::Impl::exchange(PgSession& db, const std::vector<Finish>& outcomes,
                                 std::size_t limit) {
  struct Unreserve {  // gives back the workers no job took, also when the statement throws
    Impl* self;
    std::size_t n;
    ~Unreserve() { self->release_workers(n, /*for_claimer=*/false); }
  } unreserve{this, limit};
  const OutcomeArrays o = outcome_arrays(outcomes);
  const std::vector<std::int64_t> tails = limit > 0 ? served_tails() : std::vector<std::int64_t>{};
  const TimePoint asked = Clock::now();
  // Share this exchange's run times (announce all its outcomes) when none were shared for
  // kShareRunTimes (run_time_sharing.hpp); a statement that fails shares again next time.
  const bool share = !outcomes.empty() && sharing_.due(asked);
  const NodeLease::Incarnation claimer = lease_.incarnation();
  const PgRows rows = exec_claiming(
      db,
      "SELECT written, notified, job_id, kind, args, priority, attempt, remaining_us, retired, "
      "retry_max, retry_backoff_us, waited_us "
      "FROM sandglass_finish_claim($1, $2, $3::bigint[], $4::int[], $5::text[], $6::text[], "
      "$7::text[], $8::boolean[], $9::text[], $10::text[], $11::bigint[], $12, $13::text[], "
      "$14::bigint[], $15, $16::text[], $17::text[])",
      {claimer.owner, node_, o.ids, o.attempts, o.states, o.reasons, o.causes, o.committed, o.results,
       o.errors, o.run_us, std::to_string(limit), served_array_, int_array(tails),
       share ? "t" : "f", o.attempt_logs, o.retry_stopped},
      /*may_claim=*/limit > 0);
  const TimePoint answered = Clock::now();
  if (share) sharing_.shared(asked);
  std::vector<Written> written;
  std::vector<Claimed> claimed;
  for (int r = 0; r < rows.rows(); ++r) {
    if (!rows.null(r, kWritten)) {
      written.push_back(
          {.id = static_cast<JobId>(rows.integer(r, kWritten)), .notified = rows.boolean(r, kNotified)});
    } else if (rows.null(r, kJobId)) {
      metrics_.retired.Increment(static_cast<double>(rows.integer(r, kRetired)));
    } else if (claimed.size() < limit) {  // the claim rule takes no more; checked all the same
      // Remaining by the database's clock at the claim, counted from when the statement was
      // sent: the round trip is charged to the job, never granted to it.
      claimed.push_back(
          {.id = static_cast<JobId>(rows.integer(r, kJobId)),
           .kind = std::string{rows.text(r, kKind)},
           .args = std::string{rows.text(r, kArgs)},
           .priority = static_cast<Priority>(rows.integer(r, kPriority)),
           .attempt = static_cast<int>(rows.integer(r, kAttempt)),
           .deadline = Deadline::after(std::chrono::microseconds{rows.integer(r, kRemainingUs)}, asked),
           .epoch = claimer.epoch,
           .retry = retry_of(rows, r)});
      // Its queue wait by the database's clock: a sojourn of the cluster's queue.
      standing_.on_start(std::chrono::microseconds{rows.integer(r, kWaitedUs)}, answered);
    }
  }
  for (const Finish& f : outcomes) {
    if (f.outcome.timings.run_time > Duration::zero()) standing_.on_run(f.outcome.timings.run_time);
  }
  // A short claim: nothing more of this node's kinds was queued, so no queue stands now. The
  // held verdict ends only with a claim that found nothing at all (see "The standing queue").
  if (limit > 0 && claimed.size() < limit) standing_.on_empty();
  if (limit > 0 && claimed.empty()) {
    standing_held_.store(false, std::memory_order_relaxed);
  } else if (standing_.standing()) {
    standing_held_.store(true, std::memory_order_relaxed);
  }
  if (!outcomes.empty()) outcomes_written(outcomes, written, asked);
  if (limit > 0) {
    // All it asked for: the queue may hold more, so the next claim may claim ahead.
    backlog_.store(claimed.size() == limit, std::memory_order_relaxed);
    metrics_.claims.Increment();
    metrics_.claim_latency.Observe(std::chrono::duration<double>(answered - asked).count());
    metrics_.claimed.Increment(static_cast<double>(claimed.size()));
    metrics_.batch_size.Observe(static_cast<double>(claimed.size()));
  }
  unreserve.n = limit - claimed.size();  // the others are the claimed jobs' workers now
  for (Claimed& job : claimed) run_claimed(std::move(job));
  return limit > 0 && claimed.size() == limit;
}

// Starts a claimed job on a worker reserved for it (held_ counts it already): its args are
// checked by this node's kind (refused: the job fails, handler_error), its outcome comes back
// through finished().
void ClusterNode::Impl::run_claimed(Claimed job) {
  const JobId id = job.id;
  const int attempt = job.attempt;
  const std::string& kind_name = job.kind;
  const JobKind* kind = kinds_.find(kind_name);
  JobHandler handler;
  Duration size{};  // its own size, stated by its args (sleep, spin); zero: the kind's estimate
  std::string error = "no such kind";
  try {
    if (kind == nullptr) throw std::invalid_argument{"this daemon has no kind " + kind_name};
    boost::json::value args = boost::json::parse(job.args);
    if (!args.is_object()) throw ArgsError{"args", "must be an object"};
    handler = kind->prepare(args.as_object());
    if (kind->expected) size = kind->expected(args.as_object());
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!handler) {
    Outcome o{.id = id, .kind = kind_name, .state = State::failed, .reason = Reason::handler_error,
              .error = "the job's args are not valid on node " + node_ + ": " + error};
    finished(id, attempt, o);
    return;
  }
  const RunId run{id, attempt};
  {
    // What the node reports as its running work (the heartbeat): by the job's own size when its
    // args state one, as admission counted it, not by the kind's tail (one long job of the kind
    // would make every short one look long).
    const auto [work, tail] = estimates(kind_name, size);
    HeldRuns::Added added = held_runs_.add(run, work, tail);  // a cancel that came first: attach
    // Older attempts of this job here are stale: the row says this one now.
    if (!added.stale.empty()) metrics_.stale_runs.Increment(static_cast<double>(added.stale.size()));
    for (JobHandle& h : added.stale) h.cancel();
  }
  JobHandler wrapped = [this, run, inner = std::move(handler)](JobContext& ctx) mutable {
    // Nothing starts while this node may have lost its lease (a claimed-ahead job waits in the
    // local queue meanwhile): it starts once a beat is answered alive, or is cancelled when
    // the node learns it lost the job.
    if (!lease_.wait_fresh(ctx)) ctx.checkpoint();
    held_runs_.started(run, Clock::now());
    JobCommits commits{*this, run.id, run.attempt};  // commit_points.cpp
    ctx.record_commits_with(&commits);
    struct Forget {  // the recorder ends with this run
      JobContext& ctx;
      ~Forget() { ctx.record_commits_with(nullptr); }
    } forget{ctx};
    inner(ctx);
  };
  // The claim was this job's admission (the cluster's estimates, the database's clock): the
  // node's Runtime runs it without deciding again. Its deadline and cancellation still apply,
  // and its run teaches the Runtime's estimate, which is the node's (estimates): its key is the
  // kind, as the cluster shares run times and claims by kind (a shared line names no finer
  // key), and it states no size, as a shared line carries none.
  // A retry runs here within this claim (same attempt and owner), by the Runtime's retry rules.
  JobSpec spec{.kind = kind_name, .priority = job.priority, .deadline = job.deadline,
               .admitted = true, .retry = job.retry};
  JobHandle handle = runtime_.submit(std::move(spec), std::move(wrapped),
                                     [this, id, attempt](const Outcome& o) {
                                       if (run_observer_) run_observer_(o);
                                       finished(id, attempt, o);
                                     });
  // A cancel that came first, or a claim of an incarnation that has lost its lease since (its
  // row is no longer this node's: the run must not go on under the new incarnation's lease;
  // its outcome is stale).
  if (held_runs_.attach(run, handle) || lease_.epoch() != job.epoch) handle.cancel();
}

void ClusterNode::Impl::cancel_local(JobId id, std::optional<int> attempt) {
  for (JobHandle& h : held_runs_.cancel(id, attempt)) h.cancel();  // cause caller, on this thread
}

}  // namespace sandglass::daemon::cluster
