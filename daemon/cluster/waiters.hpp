// waiters.hpp (private) — `Waiters`, the clients of one cluster node that wait for their jobs'
// outcomes, each with a time at which the node stops relying on the outcome's NOTIFY and reads
// the job's row itself (the job's deadline plus the reserve, then again every recheck period
// while the row is not over), and the outcomes announced recently (a waiter added after its
// job's NOTIFY is answered from the row at once).
//
//   Waiters w;
//   w.add(id, respond, due);                  // true: the listener answers it at the latest at `due`
//   std::vector<Waiter> now = w.noticed(id);  // its outcome was announced
//   std::vector<Waiter> late = w.take_due(Clock::now());
//
// Whatever overflows the recent outcomes or gets lost with a listener's connection, every
// waiter is in the due order until it is answered: none waits past its due time plus the
// time of one read.
//
// Thread safety: every member may be called from any thread; guarded by an internal mutex.
// Responds are never called here (the caller does, outside the lock).
#pragma once

#include "daemon/cluster/cluster_node.hpp"
#include "daemon/cluster/job_rows.hpp"

#include <sandglass/deadline.hpp>
#include <sandglass/job_spec.hpp>

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace sandglass::daemon::cluster {

struct Waiter {
  JobId id = 0;
  ClusterNode::Respond respond;
  TimePoint due{};  // when the node reads the row, NOTIFY or not
  // Empty for a submitter, which gets the status the outcome maps to and, past `due`, waits on
  // (its row is read again every recheck period). A reader (GET ?wait=true, DELETE) gets this,
  // made from the row, once the job is over or at `due`, over or not.
  std::function<HttpResponse(const Record&)> answer_from_row;
};

class Waiters {
 public:
  // `recent` outcome ids are remembered for waiters added after their NOTIFY.
  explicit Waiters(std::size_t recent) : recent_limit_{recent} {}

  // Adds a waiter for the job `id`, to be answered by its outcome's NOTIFY or, at the latest,
  // by a read of its row at `due`. When that NOTIFY came already (a recent outcome), the
  // waiter goes to the late list instead (take_late) and this returns true: wake the reader.
  bool add(JobId id, ClusterNode::Respond respond, TimePoint due,
           std::function<HttpResponse(const Record&)> answer_from_row = {});
  // The outcome of `id` was announced: its waiters, removed; the id is remembered as recent.
  std::vector<Waiter> noticed(JobId id);
  // Puts back waiters whose job a read found not over: due again at their own due time or
  // `recheck` from `now`, whichever is later. Their ids are no longer "recent".
  void put_back(std::vector<Waiter> waiters, TimePoint now, Duration recheck);
  // The waiters due by `now`, removed.
  std::vector<Waiter> take_due(TimePoint now);
  std::vector<Waiter> take_late();
  std::vector<Waiter> take_all();  // late ones included
  // The earliest due time; TimePoint::max() when nobody waits.
  TimePoint next_due() const;

 private:
  using DueOrder = std::multimap<TimePoint, Waiter>;
  void insert(Waiter w);                 // under mu_
  void remember(JobId id);               // under mu_
  std::vector<Waiter> remove_job(JobId id);  // under mu_

  const std::size_t recent_limit_;
  mutable std::mutex mu_;
  DueOrder by_due_;                                                  // guarded by mu_
  std::unordered_map<JobId, std::vector<DueOrder::iterator>> by_job_;  // guarded by mu_
  std::deque<JobId> recent_;               // guarded by mu_: announced outcomes, oldest first
  std::unordered_set<JobId> recent_set_;   // guarded by mu_: the same ids
  std::vector<Waiter> late_;               // guarded by mu_: added after their NOTIFY
};

}  // namespace sandglass::daemon::cluster
