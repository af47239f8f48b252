// held_runs.hpp (private) — the runs a cluster node holds: each claimed job's attempt, from its
// claim until its outcome is queued for the claimer (outcome_writer.cpp). A run is (job id,
// attempt): a job taken back from this node may be claimed by it again while its older attempt
// still runs here, and then the two are different runs; the older one is stale (its row says
// the newer attempt) and is cancelled as soon as the newer one is added.
//
//   HeldRuns held;
//   HeldRuns::Added a = held.add({id, 2}, work, tail);        // a.stale: older runs to cancel
//   if (held.attach({id, 2}, handle)) handle.cancel();        // a cancel came before the handle
//   held.remove({id, 2});                                     // its outcome is queued
//
// Thread safety: all members may be called from any thread; handles returned are cancelled by
// the caller, outside the lock (their callbacks run on the caller's thread).
#pragma once

#include <sandglass/deadline.hpp>
#include <sandglass/job_spec.hpp>
#include <sandglass/runtime.hpp>

#include <compare>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

namespace sandglass::daemon::cluster {

// A run of a claimed job: its row's id and the attempt the claim gave it (the fencing token).
struct RunId {
  JobId id = 0;
  int attempt = 0;
  friend auto operator<=>(const RunId&, const RunId&) = default;
};

class HeldRuns {
 public:
  // How many cancels of jobs not held yet are remembered (see cancel).
  static constexpr std::size_t kEarlyCancels = 1024;

  struct Added {
    bool cancel_first = false;    // a cancel of this job came before its run was added
    std::vector<JobHandle> stale;  // older attempts of the job held here: the caller cancels them
  };
  // Adds `run`; `work` and `tail` are its kind's central and tail estimates.
  // Older attempts of the same job held here are stale: they are marked so and their handles
  // returned (one without a handle yet is cancelled when it gets one, by attach).
  Added add(RunId run, Duration work, Duration tail);
  // Gives `run` its local handle; true when it must be cancelled at once: a cancel or a newer
  // attempt came first, or the run is no longer held (cancel_all cleared it; or it ended
  // already, and then a cancel does nothing).
  bool attach(RunId run, const JobHandle& handle);
  void started(RunId run, TimePoint now);  // its handler runs
  void remove(RunId run);

  // The handles to cancel for a cancel of job `id`: the run of `attempt` only when given, else
  // every run of the job held here. A cancel of a job not held here and without `attempt` is
  // remembered (the newest kEarlyCancels) for its run about to be added: the claim's statement
  // has committed and its thread has not reached add yet.
  std::vector<JobHandle> cancel(JobId id, std::optional<int> attempt);
  // Every held run's handle, and the runs cleared: the node lost its lease (none is its to
  // finish any more). Runs without a handle yet are cancelled by attach.
  std::vector<JobHandle> cancel_all();

  std::vector<RunId> runs() const;
  // The jobs of the runs held whose handler has not started (claimed ahead, in the local
  // queue; or about to start), in id order.
  std::vector<JobId> unstarted() const;
  // How many runs are held and their expected rest at `now`: a run not started (claimed ahead,
  // in the local queue) has all its central estimate ahead; a started one its start + the tail
  // estimate - now, at least zero.
  std::pair<std::int64_t, Duration> load(TimePoint now) const;

 private:
  struct Held {
    JobHandle handle;
    bool cancel_pending = false;  // a cancel came before the handle
    Duration work{};
    Duration tail{};
    std::optional<TimePoint> started_at;
  };

  mutable std::mutex mu_;
  std::map<RunId, Held> runs_;               // guarded by mu_
  std::unordered_set<JobId> early_cancels_;  // guarded by mu_: see cancel
  std::deque<JobId> early_order_;            // guarded by mu_: early_cancels_, oldest first
};

}  // namespace sandglass::daemon::cluster
