// record_waits.hpp (private) — `RecordWaits`, the answers of GET /v1/jobs/{id}?wait=true: each
// waits for its job's outcome, and answers at a time limit with the record as it stands if the
// job has not ended by then.
//
//   RecordWaits waits;   // one per Api
//   if (auto gone = waits.wait(records, id, reserve, std::move(respond))) return *gone;
//   // else: the id is unknown (respond was not called)
//
// A job ends by its deadline unless it passed its commit point or its handler does not stop;
// the limit, the job's deadline plus the reserve (budget.reserve_ms, which the deadline keeps
// back for the answer), bounds how long a reader waits then. A waiting reader holds no
// interest in its job (JobRecords::Interest::none): its client going away never cancels the
// job, it only ends the wait.
//
// Thread safety: `wait` may be called concurrently. Each answer is given exactly once, from
// the thread that records the job's outcome (JobRecords::finish) or from this object's timer
// thread, and under the wait's own lock: once an answer was given, no other is being given.
#pragma once

#include "daemon/api/job_records.hpp"
#include "daemon/http/http_message.hpp"

#include <functional>
#include <memory>
#include <optional>

namespace sandglass::daemon {

class RecordWaits {
 public:
  using Respond = std::function<void(HttpResponse)>;
  using ClientGone = std::function<void()>;

  RecordWaits();  // starts the timer thread
  RecordWaits(const RecordWaits&) = delete;
  RecordWaits& operator=(const RecordWaits&) = delete;
  // Stops the timer thread; waits not answered by then are dropped unanswered. Blocks.
  ~RecordWaits();

  // Answers `respond` exactly once with the job's record (200): when the job ends (at once if
  // it has ended), or at its deadline plus `reserve` as it stands then. Returns what to call
  // when the client goes away first; nullopt, without calling `respond`, when the id is unknown
  // or forgotten.
  // `records` must outlive this object.
  std::optional<ClientGone> wait(JobRecords& records, JobId id, Duration reserve, Respond respond);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sandglass::daemon
