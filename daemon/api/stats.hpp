// stats.hpp (private) — `LiveStats`, what the daemon remembers of recent outcomes for
// GET /v1/stats and the status page: per-second counts over the last five minutes, histograms of
// budgets since start; and `stats_json`, the whole snapshot.
//
//   LiveStats live;
//   live.job_finished(outcome);                    // from each job's outcome callback
//   std::string body = stats_json({...}, Clock::now());   // GET /v1/stats
//
// Memory is bounded: 300 one-second buckets and fixed histogram buckets.
//
// The run-time estimates the snapshot shows are the runtime's own (`Runtime::estimates()`, per
// estimate key), the figures its admission decides with; the daemon keeps none of its own.
//
// Thread safety: all member functions may be called concurrently.
#pragma once

#include "daemon/api/job_records.hpp"

#include <sandglass/daemon/kind_registry.hpp>
#include <sandglass/outcome.hpp>
#include <sandglass/runtime.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <mutex>
#include <string>
#include <vector>

namespace sandglass::daemon {

inline constexpr std::size_t kCancelCauseCount = 5;  // none, caller, deadline, upstream, shutdown

class LiveStats {
 public:
  LiveStats();

  // A job's terminal outcome (exactly once per job), counted in the second `now` falls in.
  void job_finished(const Outcome& outcome, TimePoint now);
  void job_finished(const Outcome& outcome) { job_finished(outcome, Clock::now()); }

  // How many outcomes of each sort ended in one second.
  struct Second {
    std::int64_t second = -1;  // seconds since the steady clock's epoch; -1: never used
    std::array<std::array<std::uint32_t, kReasonCount>, 5> by_state_reason{};  // [State][Reason]
    std::array<std::uint32_t, kCancelCauseCount> cancelled_by_cause{};
    std::uint32_t completed_late = 0;  // completed after its deadline
  };
  struct Histogram {
    std::vector<std::uint64_t> counts;  // one per bucket of kBucketsMs, then one for larger
    std::uint64_t late = 0;             // remaining_at_end only: ended after the deadline
  };
  struct Snapshot {
    std::vector<Second> seconds;  // the last kSeconds seconds up to now, oldest first
    Histogram budget, remaining_at_start, remaining_at_end;
  };
  Snapshot snapshot(TimePoint now) const;

  static constexpr std::size_t kSeconds = 300;
  // Histogram bucket upper bounds, milliseconds.
  static constexpr std::array<std::int64_t, 15> kBucketsMs{1,   2,    5,    10,   20,    50,    100,  200,
                                                           500, 1000, 2000, 5000, 10000, 30000, 60000};

 private:
  Second& second_at(std::int64_t second);  // requires mu_

  mutable std::mutex mu_;
  std::array<Second, kSeconds> ring_{};  // guarded by mu_; indexed by second % kSeconds
  Histogram budget_, remaining_at_start_, remaining_at_end_;  // guarded by mu_
};

// Everything GET /v1/stats shows (see docs/daemon.md, "Status page, job listing and stats"): the runtime's
// counters and capacity, the live jobs by kind (from `live`, views of the records' live jobs),
// the last minute's outcomes and the last five minutes per second, histograms, the runtime's
// estimates, bulkheads, and what the kinds' own metrics say of breakers and SQL pools.
struct StatsInputs {
  const RuntimeStats& runtime;
  const RuntimeOptions& options;
  const LiveStats::Snapshot& live;
  const std::vector<JobRecords::View>& live_jobs;
  const std::vector<EstimateSnapshot>& estimates;  // Runtime::estimates()
  const std::string& kind_metrics;  // the kinds' Prometheus text (JobKind::metrics), concatenated
  bool draining = false;
};
std::string stats_json(const StatsInputs& in);

}  // namespace sandglass::daemon
