// cluster_metrics.hpp (private) — `ClusterMetrics`, the Prometheus series of one cluster node
// (docs/cluster.md, "Metrics": claims, claimed jobs, claim latency and batch size, jobs retired at claim,
// stale outcomes, jobs taken back from lost nodes or lost claim answers, notify lag, database errors,
// finished records forgotten, commit points recorded, runs cancelled by fencing).
//
//   ClusterMetrics m;
//   m.claims.Increment();
//   std::string text = m.text(/*database_up=*/true, /*held_jobs=*/3);
//
// Thread safety: the series are prometheus-cpp's (safe from any thread); `text` may be called
// from any thread.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstddef>
#include <memory>
#include <string>

namespace sandglass::daemon::cluster {

class ClusterMetrics {
 public:
  ClusterMetrics();
  ClusterMetrics(const ClusterMetrics&) = delete;
  ClusterMetrics& operator=(const ClusterMetrics&) = delete;

  // The series in the text exposition format, with the two gauges the node computes.
  std::string text(bool database_up, std::size_t held_jobs) const;

 private:
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();

 public:
  prometheus::Counter& claims;
  prometheus::Counter& claimed;
  prometheus::Counter& claimed_at_submit;
  prometheus::Counter& retired;
  prometheus::Counter& stale;
  prometheus::Counter& reclaimed;
  prometheus::Counter& lost;
  prometheus::Counter& lost_answers;
  prometheus::Counter& take_backs;
  prometheus::Counter& refused_here;
  prometheus::Counter& db_errors;
  prometheus::Counter& forgotten;
  prometheus::Counter& commit_points;
  prometheus::Counter& commit_refused;
  prometheus::Counter& stale_runs;
  prometheus::Counter& leases_lost;
  prometheus::Counter& fenced_runs;
  prometheus::Counter& intake_settled;
  prometheus::Counter& waits_timed;
  prometheus::Histogram& claim_latency;
  prometheus::Histogram& batch_size;
  prometheus::Histogram& notify_lag;
  prometheus::Histogram& intake_wait;
  prometheus::Histogram& intake_statement;
  prometheus::Histogram& intake_batch;
  prometheus::Histogram& commit_latency;
};

}  // namespace sandglass::daemon::cluster
