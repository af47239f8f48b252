// job_records.hpp (private) — `JobRecords`, what GET and DELETE /v1/jobs/{id} see: every job the
// daemon submitted, live or terminal, and the JSON of its record.
//
//   {"id": 7, "kind": "sleep", "state": "completed", "reason": "ok", "cause"?: "caller",
//    "result"?: <JSON>, "error"?: "...",
//    "timings": {"budget_ms": 1000, "queue_ms": 0, "run_ms": 50, "remaining_ms": 949}}
//
// A live job has state "queued" or "running" and reason null (and "cause": "caller" once a
// DELETE asked to cancel it). Terminal records are kept for
// `RecordRetention::keep`, and at most `max_count` of them and `max_bytes` of their results and
// errors; the oldest are forgotten first. Timings are whole milliseconds, rounded toward zero;
// remaining_ms is negative when the job ended after its deadline.
//
// Thread safety: all member functions may be called concurrently.
#pragma once

#include <sandglass/daemon/daemon_config.hpp>
#include <sandglass/outcome.hpp>
#include <sandglass/runtime.hpp>

#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace sandglass::daemon {

// The record's JSON. `outcome` empty: a live job described by `progress` at `now`.
std::string record_json(JobId id, const std::string& kind, const Outcome* outcome,
                        const JobProgress& progress, TimePoint now,
                        CancelCause requested = CancelCause::none);

class JobRecords {
 public:
  explicit JobRecords(RecordRetention retention) : retention_{retention} {}

  // Remembers a submitted job (with its outcome, if it has one already).
  void add(const JobHandle& handle, const std::string& kind);
  // Stores a job's terminal outcome; its retention starts now. Idempotent.
  void finish(const Outcome& outcome);

  // The record's JSON, or nullopt when the id is unknown or forgotten.
  std::optional<std::string> find_json(JobId id);
  // Cancels a live job with cause caller (a no-op for a terminal or unknown one). Until its
  // outcome arrives, its record says "cause": "caller".
  void cancel(JobId id);

  std::size_t size() const;

 private:
  struct Entry {
    JobHandle handle;
    std::string kind;
    std::optional<Outcome> outcome;
    CancelCause cancel_requested = CancelCause::none;
  };
  struct Finished {
    TimePoint at;
    JobId id;
    std::size_t bytes;
  };
  void record_outcome(const Outcome& outcome, TimePoint now);  // requires mu_
  void forget_old(TimePoint now);                              // requires mu_

  const RecordRetention retention_;
  mutable std::mutex mu_;
  std::unordered_map<JobId, Entry> entries_;  // guarded by mu_
  std::deque<Finished> finished_;             // guarded by mu_; oldest first
  std::size_t finished_bytes_ = 0;            // guarded by mu_
};

}  // namespace sandglass::daemon
