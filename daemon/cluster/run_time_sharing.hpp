// run_time_sharing.hpp (private) — how a node's run times reach the other nodes' estimates.
//
// RunTimeSharing: when a node's exchange announces every outcome it writes, so
// that the other nodes learn its run times (migrations/functions.sql, "Announced outcomes"): at
// most once per kShareRunTimes. An isolated outcome is therefore always announced; under a high
// rate, one exchange per interval is (a sample), and between them only the outcomes someone waits
// for. Each announcing commit takes PostgreSQL's one NOTIFY lock, which serializes the commits of
// all nodes (PostgreSQL serialises NOTIFYing commits).
//
//   RunTimeSharing sharing;
//   const bool share = !outcomes.empty() && sharing.due(asked);   // sandglass_finish_claim's
// p_share
//   ... the statement succeeded ...
//   if (share) sharing.shared(asked);
//
// The claims bench (bench/overload/cluster_bench.cpp) shares by this rule too, as a node would.
//
// OwnRuns: the jobs this node ran whose outcome may still be announced. A node's estimates
// are its Runtime's (Runtime::estimate), which records the node's own runs as they end; the
// listener gives the Runtime the run times of the other nodes' announced outcomes
// (Runtime::record_run) and skips the lines of its own, which would count them twice.
//
//   own.ran(id, now);                      // a run ended here (before its outcome is sent)
//   own.not_announced(id);                 // its statement wrote it unannounced, or not at all
//   if (!own.heard(id)) runtime.record_run(...);   // the listener, for each line it hears
//
// Thread safety: RunTimeSharing: distinct objects: safe; shared objects: unsafe (a node's
// claimer owns one). OwnRuns: all members may be called concurrently.
#pragma once

#include <sandglass/deadline.hpp>
#include <sandglass/job_spec.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace sandglass::daemon::cluster {

inline constexpr std::chrono::milliseconds kShareRunTimes{50};

class RunTimeSharing {
 public:
  // Whether an exchange sent at `now` with outcomes announces them all: none was shared yet,
  // or the last one was at least kShareRunTimes before `now`.
  bool due(TimePoint now) const noexcept { return !last_ || now - *last_ >= kShareRunTimes; }
  // An exchange sent at `at` that shared its outcomes succeeded (one that failed shares again).
  void shared(TimePoint at) noexcept { last_ = at; }

 private:
  std::optional<TimePoint> last_;
};

class OwnRuns {
 public:
  // A run older than this whose line never came is forgotten: its outcome was announced only
  // on another node's channel, or the NOTIFY was lost with the listener's connection.
  static constexpr std::chrono::seconds kForgetAfter{10};

  // The job `id` ran here and ended at `now`; its outcome is not sent yet.
  void ran(JobId id, TimePoint now) {
    std::lock_guard lock{mu_};
    ran_[id] = now;
    if (ran_.size() < prune_at_) return;
    std::erase_if(ran_, [&](const auto& entry) { return now - entry.second > kForgetAfter; });
    prune_at_ = std::max(kLeastPruneAt, 2 * ran_.size());  // amortised: a pass per doubling
  }
  // The job's outcome was written unannounced, or was stale (not written): no line comes.
  void not_announced(JobId id) {
    std::lock_guard lock{mu_};
    ran_.erase(id);
  }
  // A line of an announced outcome of job `id` was heard: true if the job ran here (the run is
  // then forgotten: one line per written outcome).
  bool heard(JobId id) {
    std::lock_guard lock{mu_};
    return ran_.erase(id) > 0;
  }

 private:
  static constexpr std::size_t kLeastPruneAt = 4096;
  std::mutex mu_;
  std::unordered_map<JobId, TimePoint> ran_;  // guarded by mu_: the end of each run
  std::size_t prune_at_ = kLeastPruneAt;      // guarded by mu_
};

}  // namespace sandglass::daemon::cluster
