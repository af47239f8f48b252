// metrics.hpp (private) — `DaemonMetrics`, the daemon's Prometheus metrics (prefix `sandglass_`),
// rendered in the text exposition format with prometheus-cpp's serializer.
//
//   DaemonMetrics metrics;
//   metrics.job_submitted("sleep", Priority::normal);
//   metrics.job_finished(outcome, Priority::normal);       // from the outcome callback
//   metrics.http_response(200);
//   std::string body = metrics.render(runtime.stats(), workers, draining,
//                                     runtime.estimates());                    // GET /metrics
//
// Labels come only from bounded sets: kind (the registry's kinds), priority, state, reason,
// cause, the HTTP status code, and estimate keys (which the kinds name from the config:
// "exec:<command>", "sql:<query>", "forward:<upstream>", else the kind). Never a deadline, an
// id or an idempotency key.
//
//   sandglass_jobs_submitted_total{kind,priority}            counter
//   sandglass_jobs_total{kind,priority,state,reason}         counter, one per terminal outcome;
//                                                            state is state_of(reason) (outcome.hpp)
//   sandglass_rejections_total{kind,reason}                  counter, state rejected
//   sandglass_cancellations_total{kind,cause}                counter, state cancelled
//   sandglass_completed_after_cancel_total{kind}             counter
//   sandglass_budget_granted_seconds{kind}                   histogram, admitted jobs
//   sandglass_queue_wait_seconds{kind}                       histogram, admitted jobs
//   sandglass_remaining_at_dispatch_seconds{kind}            histogram, started jobs
//   sandglass_run_time_seconds{kind}                         histogram, started jobs
//   sandglass_work_after_deadline_seconds_total{kind}        counter, run time past the deadline
//   sandglass_jobs_after_deadline_total{kind}                counter, started jobs that ended
//                                                            after their deadline
//   sandglass_overruns_total{kind}                           counter, jobs reported overrunning
//   sandglass_workers_overrunning                            gauge, set by `render`
//   sandglass_queue_depth{priority}, sandglass_running_jobs, sandglass_workers,
//   sandglass_draining, sandglass_queue_peak_depth           gauges, set by `render`
//   sandglass_http_responses_total{code}                     counter
//   sandglass_estimate_seconds{kind,key,stat}                gauge, set by `render`: stat "mean"
//                                                            (predicts work queued ahead) and
//                                                            "tail" (what a job's run must fit)
//   sandglass_estimate_samples{kind,key}                     gauge, runs recorded per key
//
// Histogram buckets are in seconds, from 100 us to 300 s in steps of x2 to x2.5.
//
// Thread safety: all member functions may be called concurrently.
#pragma once

#include <sandglass/job_spec.hpp>
#include <sandglass/outcome.hpp>
#include <sandglass/runtime.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::daemon {

class DaemonMetrics {
 public:
  DaemonMetrics();
  ~DaemonMetrics();
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // A request for a job of `kind` reached admission. `kind` must be one of the registry's
  // kinds (requests for other kinds are answered 400 before this): it becomes a label value.
  void job_submitted(std::string_view kind, Priority priority);
  // A job's terminal outcome (exactly once per submitted job); `priority` is the one it was
  // submitted with. Outcomes are grouped by `state_of(outcome.reason)`. Admitted jobs (not
  // rejected, or shed after admission) are observed in the
  // budget and queue-wait histograms; started jobs (`Outcome::started()`) in the dispatch and
  // run-time histograms. A job that started after its deadline is observed with zero remaining.
  void job_finished(const Outcome& outcome, Priority priority);
  // The retries of a job's outcome (Outcome::attempts beyond the first) and why they stopped:
  // part of job_finished; alone for a cluster node's run of a claimed job, which job_finished
  // does not see (the cluster counts its jobs in its own metrics).
  void job_retries(const Outcome& outcome);
  // A running job of `kind` went on past its deadline long enough to count as overrunning
  // (Runtime's on_overrun). `kind` as for job_submitted.
  void job_overrunning(std::string_view kind);
  // An HTTP response was sent with `status`. Statuses outside 100-599 count as code "other".
  void http_response(unsigned status);

  // The text exposition format. Gauges are set from the arguments first; with concurrent
  // calls, a scrape may show another call's gauge values.
  std::string render(const RuntimeStats& stats, std::size_t workers, bool draining,
                     const std::vector<EstimateSnapshot>& estimates = {});

 private:
  struct Families;
  std::unique_ptr<Families> families_;
};

}  // namespace sandglass::daemon
