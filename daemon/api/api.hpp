// api.hpp (private) — `Api`, the daemon's HTTP endpoints on plain request/response values:
//
//   POST   /v1/jobs        submit; waits for the terminal outcome unless ?wait=false (202)
//   POST   /v1/jobs/batch  submit many, each admitted on its own, none waited for (batch_request.hpp)
//   GET    /v1/jobs/{id}   the job's record          DELETE /v1/jobs/{id}   cancel (cause caller)
//          ?wait=true      ... once the job has ended (record_waits.hpp); `wait` is the only
//                          query parameter a GET takes: any other is a 400 naming it
//   GET    /metrics        Prometheus text format    GET /healthz, GET /readyz
//   GET    /v1/jobs        the listing (jobs_listing.hpp)   GET /v1/stats   the snapshot (stats.hpp)
//   GET    /, /ui, /ui/app.css, /ui/app.js   the status page (ui/status_page.hpp; no token needed)
//
// With a bearer token configured (server.auth_token_file), every path but /metrics, /healthz,
// /readyz and the status page's static files answers 401 unless the request carries it; this is checked before anything else, as
// soon as the header section is read (see `intake`).
//
// Time: a job's budget counts from its request's first byte (`HttpRequest::arrived_at`), and
// the handler's deadline keeps `budget.reserve_ms` back for the answer: deadline = arrival +
// budget - reserve. A job request whose budget is spent before it is read whole is answered 504
// (rejected, budget_too_small) without parsing its body; it never becomes a job (no id, no
// record, no job metrics). A budget too small on its face (below reserve + min_useful) is
// rejected by admission as before, with a record.
//
// DELETE /v1/jobs/{id} cancels a live job (cause caller) and answers 200 with its final record
// once it has ended, waiting up to 100 ms on the I/O thread for that (a queued job ends at once,
// a running one at its next checkpoint); else 202 {"id", "state": "cancelling"}. A submitter
// still waiting for that job is answered 409 (see http_status.hpp), not 499.
//
// Thread safety: `handle` may be called concurrently from any number of I/O threads.
#pragma once

#include "daemon/api/bearer_auth.hpp"
#include "daemon/http/http_message.hpp"
#include "daemon/api/job_records.hpp"
#include "daemon/api/job_request.hpp"
#include "daemon/api/record_waits.hpp"
#include "daemon/api/stats.hpp"
#include "daemon/metrics.hpp"

#include <sandglass/daemon/daemon_config.hpp>
#include <sandglass/daemon/kind_registry.hpp>
#include <sandglass/runtime.hpp>

#include <atomic>
#include <functional>
#include <optional>

namespace sandglass::daemon {

namespace cluster {
class ClusterNode;
}

class Api {
 public:
  using Respond = std::function<void(HttpResponse)>;

  // All references must outlive the Api and every job it submitted.
  Api(const DaemonConfig& config, const KindRegistry& kinds, Runtime& runtime,
      JobRecords& records, DaemonMetrics& metrics, const std::atomic<bool>& draining)
      : config_{config}, kinds_{kinds}, runtime_{runtime}, records_{records}, metrics_{metrics},
        draining_{draining}, auth_{config.auth_token} {}

  // What the server calls when the client goes away before its answer.
  using ClientGone = std::function<void()>;

  // What the header section alone decides (`head` has no body yet).
  struct Intake {
    // Answer this at once and close: 401 without the bearer token, or 504 for a job request
    // whose budget (at most what its headers name) was spent at `now`.
    std::optional<HttpResponse> answer;
    // For a job request: when its budget, at most what its headers name, will be spent. The
    // server answers then (calling `intake` again) if the body is still not read.
    std::optional<TimePoint> budget_spent_at;
  };
  Intake intake(const HttpRequest& head, TimePoint now) const;

  // Answers `request` by calling `respond` exactly once: before returning, or later from a
  // worker thread when the request waits for a job's outcome. In that case it returns what to
  // call if the client goes away first (its job is cancelled, cause caller, once no other
  // client waits for it); else an empty function.
  ClientGone handle(const HttpRequest& request, Respond respond);

  // Cluster mode ([cluster]): job submissions, records, cancels and the listing go to the shared
  // queue through `node` (which must outlive the Api); /v1/stats is this node's snapshot with the
  // whole cluster's figures added ("cluster").
  void set_cluster(cluster::ClusterNode* node) noexcept { cluster_ = node; }

 private:
  // A job request checked against its kind: the handler it runs and its estimate key.
  struct Prepared {
    JobHandler handler;
    std::string estimate_key;
  };
  // Checks the kind and args (and fills in the kind's expected run time); an error names the
  // field within the job ("kind", "args.ms").
  std::optional<RequestError> prepare(JobRequest& req, Prepared& out) const;
  struct Submitted {
    JobId id = 0;
    bool attached = false;  // an earlier job with this key answers the request
    bool conflict = false;  // the key names job `id`, of a different request
    bool scheduled = false; // a delayed start: it waits for its start, not in the queue
  };
  // Submits one checked job to this daemon's runtime (or attaches it to its key's job).
  Submitted submit_prepared(const JobRequest& req, Prepared prepared, TimePoint arrived_at);
  // The answer that does not wait: 202 queued, the record of a job rejected at admission or of
  // the ended job a key attached to, or 409 for a key's conflict.
  HttpResponse answer_now(const Submitted& submitted);
  ClientGone submit(const HttpRequest& request, TimePoint arrived_at, Respond& respond);
  // POST /v1/jobs/batch (batch_request.hpp).
  void submit_batch(const HttpRequest& request, TimePoint arrived_at, Respond& respond);
  // GET /v1/jobs/{id}[?wait=true], in cluster mode from the database.
  ClientGone get_job(std::uint64_t id, std::string_view query, Respond& respond);
  HttpResponse job_record(std::uint64_t id);
  HttpResponse cancel_job(std::uint64_t id);
  HttpResponse metrics();
  // GET /v1/jobs: this daemon's records, or in cluster mode the database's (cluster_view.hpp).
  void list_jobs(std::string_view query, Respond& respond);
  HttpResponse stats();

  const DaemonConfig& config_;
  const KindRegistry& kinds_;
  Runtime& runtime_;
  JobRecords& records_;
  DaemonMetrics& metrics_;
  const std::atomic<bool>& draining_;
  const BearerAuth auth_;
  LiveStats live_stats_;  // recent outcomes for GET /v1/stats
  RecordWaits record_waits_;  // GET /v1/jobs/{id}?wait=true
  cluster::ClusterNode* cluster_ = nullptr;
};

// A JSON error answer: {"error": message, "field": field} (no "field" when empty).
HttpResponse error_response(unsigned status, std::string_view message, std::string_view field = {});
// 404 for a job id that is unknown or whose record was forgotten.
HttpResponse no_such_job();
// The answer for a job that has its outcome: the status table and the record.
HttpResponse outcome_response(const Outcome& outcome, const Arrival& arrival = {});

}  // namespace sandglass::daemon
