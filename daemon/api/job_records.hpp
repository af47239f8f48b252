// job_records.hpp (private) — `JobRecords`, what GET and DELETE /v1/jobs/{id} see: every job the
// daemon submitted, live or terminal, and the JSON of its record.
//
//   {"id": 7, "kind": "sleep", "state": "completed", "reason": "ok", "cause"?: "caller",
//    "result"?: <JSON>, "error"?: "...",
//    "timings": {"intake_ms": 0, "budget_ms": 1000, "queue_ms": 0, "run_ms": 50,
//                "remaining_ms": 944}}
//
// A job submitted with a retry or a delay lists "attempts": [{"state", "reason", "run_ms",
// "committed", "error"?}, ...], one per attempt that ran, and "retry_stopped": why no further
// attempt ran while its last had failed (see sandglass::RetryStop).
//
// budget_ms is the request's budget (defaulted, clamped), counted from its first byte;
// intake_ms the time from that byte until its job was submitted (reading and parsing the
// request); remaining_ms the time from the job's end to its deadline, which keeps the reserve
// (budget.reserve_ms) back for the answer. So budget_ms - reserve = intake_ms + queue_ms +
// run_ms + remaining_ms, to the rounding of whole milliseconds.
//
// A live job has state "scheduled" (it waits for its start: a delay, or a retry's backoff),
// "queued" or "running" (then "worker": the index of the worker thread that
// runs it), reason null, "waiters": the clients waiting for its answer (and "cause": "caller" once a DELETE asked to cancel it). Terminal records are kept for
// `RecordRetention::keep`, and at most `max_count` of them and `max_bytes` of their results and
// errors; the oldest are forgotten first. Timings are whole milliseconds, rounded toward zero;
// remaining_ms is negative when the job ended after its deadline.
//
// A record turns terminal only in finish(), which the daemon calls from the job's outcome
// callback after it counted the outcome in /metrics and /v1/stats: whoever sees a terminal
// record (GET, DELETE, the listing) sees the outcome counted there too. The runtime publishes an
// outcome to the job's handle before that callback runs, so the record reads the handle's
// progress, never its outcome.
//
// Every job is added and finished, in either order (a job can end before its submitter calls
// add). A record finished, and forgotten, before its add() stays forgotten.
//
// Thread safety: all member functions may be called concurrently.
#pragma once

#include <sandglass/daemon/daemon_config.hpp>
#include <sandglass/outcome.hpp>
#include <sandglass/runtime.hpp>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace sandglass::daemon {

// Idempotency keys: a keyed submission whose key names a live job, or one that completed or
// failed, attaches to it (same id, same outcome) instead of running again; the same key with a
// different request is a conflict. A key whose job was rejected, expired or cancelled is bound
// anew (that job did nothing worth keeping; a cancelled job that passed its commit point
// completed). Keys are forgotten with their job's record.
//
// The record's JSON. `outcome` empty: a live job described by `progress` at `now`.
// How a job's request arrived: what the record says besides the runtime's outcome.
struct Arrival {
  Duration intake{};               // from the request's first byte until the job was submitted
  std::optional<Duration> budget;  // the request's budget; empty: the runtime's granted budget
  // Set for waiters when a DELETE cancelled the job (not its own client going away): their
  // answer is 409, not 499 (see http_status.hpp).
  bool cancelled_by_request = false;
};

// "scheduled", "queued" or "running": the state of a live job, as `progress` describes it.
std::string_view live_state(const JobProgress& progress) noexcept;

std::string record_json(JobId id, const std::string& kind, const Outcome* outcome,
                        const JobProgress& progress, TimePoint now, const Arrival& arrival = {},
                        CancelCause requested = CancelCause::none, std::size_t waiters = 0);

// A record's "attempts" (an outcome's AttemptRecords) as JSON text: a cluster node writes it into
// the job's row, so that every node answers the same record.
std::string attempts_json_text(const std::vector<AttemptRecord>& attempts);

class JobRecords {
 public:
  explicit JobRecords(RecordRetention retention) : retention_{retention} {}

  // Gets the job's outcome and how its request arrived (see add).
  using Waiter = std::function<void(const Outcome&, const Arrival&)>;

  // Remembers a submitted job and how its request arrived. finish() may have been called
  // already.
  void add(const JobHandle& handle, const std::string& kind, Arrival arrival = {});
  // Stores a job's terminal outcome, its retention starts now, and calls the job's waiters
  // (outside the lock). Idempotent while the record is kept.
  void finish(const Outcome& outcome);
  // Blocks until the job's record has its outcome (finish() was called) or `deadline` passed.
  // The outcome; nullopt on timeout, or when the id is unknown or forgotten.
  std::optional<Outcome> outcome_until(JobId id, Deadline deadline);

  // Whether a waiter keeps its job wanted: a submitter's does (see leave, and the record's
  // "waiters"); a reader's (GET ?wait=true) does not, so its going away never cancels the job.
  enum class Interest { held, none };
  // Calls `waiter` exactly once with the job's outcome: at once if it has one, else from
  // finish(). False when the id is unknown.
  bool wait(JobId id, Waiter waiter, Interest interest = Interest::held);
  // A waiting client went away. When no waiter of a live job is left, the job is cancelled
  // with cause caller, unless it has an idempotency key: then a retry with that key is expected
  // to attach to it, and it goes on until it ends or its budget does.
  void leave(JobId id);

  struct KeyedSubmit {
    JobId id = 0;
    bool attached = false;  // an earlier job with this key answers the request
    bool conflict = false;  // the key names a job of a different request
  };
  // Runs `submit` (which submits the job and calls add) unless the key names a job to attach
  // to. Keyed submissions are serialised, so one key never starts two jobs at once.
  KeyedSubmit submit_keyed(const std::string& key, const std::string& fingerprint,
                           const std::function<JobId()>& submit);

  // The job's outcome, if it has one and is remembered.
  std::optional<Outcome> outcome(JobId id) const;
  // The record's JSON, or nullopt when the id is unknown or forgotten. The entry is copied out
  // under the lock and rendered outside it: a large result does not hold up other requests.
  std::optional<std::string> find_json(JobId id);
  // Cancels a live job with cause caller, for a DELETE (a no-op for a terminal or unknown one).
  // Until its outcome arrives, its record says "cause": "caller". Returns the job's handle
  // while it is live (empty for an unknown or ended one), to wait for its end.
  JobHandle cancel(JobId id);

  std::size_t size() const;

  // The listing's index (GET /v1/jobs, see jobs_listing.hpp). `recent_ids` copies, under a short
  // lock, the ids of the most recently submitted jobs (at most records.max_count + 1024 of
  // them, in submission order); `live_ids` those of the jobs without an outcome. Neither walks
  // the records. `view` copies one record for rendering outside the lock; nullopt when it is
  // unknown or forgotten.
  struct View {
    std::string kind;
    std::optional<Outcome> outcome;  // empty: live, described by `progress`
    JobProgress progress;
    CancelCause cancel_requested = CancelCause::none;
    std::size_t waiters = 0;
    Arrival arrival;
  };
  std::vector<JobId> recent_ids() const;
  std::vector<JobId> live_ids() const;
  std::optional<View> view(JobId id) const;

 private:
  struct Entry {
    JobHandle handle;
    std::string kind;
    std::optional<Outcome> outcome;
    CancelCause cancel_requested = CancelCause::none;
    std::vector<Waiter> waiters;
    std::size_t interest = 0;  // waiters still connected
    std::string key;           // its idempotency key, if any
    Arrival arrival;           // arrival.cancelled_by_request: a DELETE cancelled it
    bool added = false;        // add() was called (finish() may come first)
  };
  struct KeyBinding {
    JobId id;
    std::string fingerprint;
  };
  struct Finished {
    TimePoint at;
    JobId id;
    std::size_t bytes;
  };
  struct ToCall {
    std::vector<Waiter> waiters;
    Arrival arrival;
  };
  // Requires mu_. Returns the waiters to call (outside the lock).
  ToCall record_outcome(const Outcome& outcome, TimePoint now);
  void cancel_locked(Entry& entry, JobHandle& to_cancel);      // requires mu_
  void forget_old(TimePoint now);                              // requires mu_

  const RecordRetention retention_;
  mutable std::mutex mu_;
  std::unordered_map<JobId, Entry> entries_;  // guarded by mu_
  std::deque<Finished> finished_;             // guarded by mu_; oldest first
  std::size_t finished_bytes_ = 0;            // guarded by mu_
  std::unordered_map<std::string, KeyBinding> keys_;  // guarded by mu_
  std::mutex keyed_submit_mu_;  // taken before mu_, never while holding it
  std::deque<JobId> recent_;    // guarded by mu_; submission order, bounded (see recent_ids)
  std::unordered_set<JobId> live_;  // guarded by mu_; ids without an outcome
  // Guarded by mu_: ids whose record was forgotten before their add(); add() removes them.
  std::unordered_set<JobId> forgotten_before_add_;
  std::condition_variable recorded_;  // notified by finish() while blocked_ > 0
  std::size_t blocked_ = 0;           // guarded by mu_; callers blocked in outcome_until
};

}  // namespace sandglass::daemon
