// http_load.hpp — the HTTP client side of the bench: sends the jobs of a schedule to
// sandglassd (POST /v1/jobs, one request per keep-alive connection at a time, as many
// connections as arrivals need), open loop, and records each answer's fate.
//
//   HttpTarget target = parse_http_target("http://127.0.0.1:8080").value();
//   Recorder rec{start, arrivals};
//   HttpRunStats s = run_http_arrivals(target, {.body = Body::sleep}, rec);   // Blocks
//
// Several targets (a cluster's nodes, `--target URL,URL,...`) share the arrivals round robin.
//
// A request carries `{"kind": "sleep"|"spin", "args": {"ms": N}, "timeout_ms": B}`, where N
// is the service time rounded to whole milliseconds (the API's unit) and B the budget left
// when the request is written (deadline − now, whole milliseconds, at least 0). Answers:
//   200 completed → on time or late by the client's clock (busy time: timings.run_ms)
//   503 rejected (reason from the body: queue_full, deadline_implausible, shed, shutting_down)
//   504 expired (expired_in_queue, too_late_to_start), cancelled by the deadline (busy: run_ms),
//       or rejected budget_too_small
//   anything else, a transport error or no free connection → failed (a diagnostic)
// Busy time comes from the answer's whole milliseconds, so wasted work is approximate.
//
// Only http_load.cpp includes Beast. Only loopback targets are accepted; no proxy is used.
//
// Thread safety: each call runs its own io_context on the calling thread.
#pragma once

#include "distribution.hpp"
#include "job_body.hpp"
#include "recorder.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace sandglass::bench {

struct HttpTarget {
  std::string host = "127.0.0.1";
  unsigned short port = 0;
};

// "http://127.0.0.1:PORT[/]" → target; nullopt for anything else.
std::optional<HttpTarget> parse_http_target(const std::string& url);
// Comma-separated URLs, each as parse_http_target reads it; nullopt when one is not.
std::optional<std::vector<HttpTarget>> parse_http_targets(const std::string& urls);

struct HttpRunOptions {
  Body body = Body::sleep;
  std::size_t max_connections = 512;
  Duration metrics_every = std::chrono::milliseconds{50};  // queue-depth polls of /metrics
};

struct HttpRunStats {
  std::size_t peak_queue_depth = 0;     // from /metrics sandglass_queue_depth, polled
  std::size_t connections_opened = 0;
  std::size_t no_free_connection = 0;   // arrivals dropped by the client: all connections busy
  std::size_t transport_errors = 0;
  std::size_t unexpected_status = 0;
  std::string first_error;              // the first of the three above, for the report
  // Answers by the "state" of their body ("" when it has none): what the daemon says it did
  // with each job, for the soak mode's accounting against the daemon's own counts.
  std::map<std::string, std::size_t> answers_by_state;
};

// Sends every arrival of `rec` at its time; returns when each has a fate (those without an
// answer 30 s after the last deadline are recorded failed). Blocks.
HttpRunStats run_http_arrivals(const HttpTarget& target, const HttpRunOptions& options,
                               Recorder& rec);
// The same over several daemons (a cluster's nodes): arrival i goes to targets[i mod N], each
// target gets max_connections / N connections, the queue depth is the sum of their gauges.
HttpRunStats run_http_arrivals(std::span<const HttpTarget> targets, const HttpRunOptions& options,
                               Recorder& rec);

// Completions per second of the daemon kept saturated by `connections` closed-loop clients
// with generous budgets, over `length`. Blocks.
double measure_http_capacity(const HttpTarget& target, Body body, const Distribution& service,
                             std::size_t connections, Duration length, std::uint64_t seed);
// The same with the connections spread over several daemons (connection k drives target k mod N).
double measure_http_capacity(std::span<const HttpTarget> targets, Body body,
                             const Distribution& service, std::size_t connections, Duration length,
                             std::uint64_t seed);

// The body of GET `path` on a fresh connection; nullopt on a transport error or a status other
// than 200. Blocks (at most a few seconds).
std::optional<std::string> http_get(const HttpTarget& target, const std::string& path);

// The pid of the process listening on 127.0.0.1:`port` (same user), from /proc; nullopt when
// it cannot be found.
std::optional<int> find_listener_pid(unsigned short port);

}  // namespace sandglass::bench
