// forward {"upstream": NAME, "body": <JSON>}: POSTs `body` to a configured upstream, passing on
// the job's remaining budget (minus the reserve, capped) as x-request-timeout-ms right before
// each attempt, retrying transient failures inside the same budget, behind a breaker per
// upstream. Result: {"status", "body" (JSON when the answer is JSON), "attempts"}.
#include "daemon/kinds/builtin_kinds.hpp"
#include "daemon/kinds/configured_estimate_key.hpp"
#include "daemon/kinds/forward/http_call.hpp"
#include "daemon/kinds/forward/upstream_metrics.hpp"

#include <sandglass/circuit_breaker.hpp>
#include <sandglass/retry_policy.hpp>
#include <sandglass/service_time_estimator.hpp>
#include <sandglass/wire_budget.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <memory>
#include <mutex>

namespace sandglass::daemon {
namespace {

// What all jobs of one upstream share.
struct Upstream {
  Upstream(std::string upstream_name, const UpstreamConfig& c, Duration min_useful_budget,
           UpstreamMetrics& upstream_metrics)
      : name{std::move(upstream_name)},
        metrics{upstream_metrics},
        config{c},
        min_useful{min_useful_budget},
        policy{{.max_attempts = c.max_attempts, .base_backoff = c.base_backoff,
                .max_backoff = c.max_backoff,
                .jitter = c.full_jitter ? Jitter::full : Jitter::none, .reserve = c.reserve}},
        breaker{{.failure_threshold = c.failure_threshold, .cooldown = c.cooldown}} {}

  // A realistic attempt: the p90 of recent answered attempts.
  Duration attempt_estimate() {
    std::lock_guard lock{mu};
    return latency.estimate();
  }
  void record_latency(Duration d) {
    std::lock_guard lock{mu};
    latency.record(d);
  }

  const std::string name;
  UpstreamMetrics& metrics;
  const UpstreamConfig config;
  const Duration min_useful;
  const RetryPolicy policy;
  RetryBudget retry_budget;
  CircuitBreaker breaker;
  std::mutex mu;
  ServiceTimeEstimator latency;  // guarded by mu
};

std::string_view result_label(const HttpCallResult& r) {
  if (r.phase == HttpCallResult::Phase::done) return "answered";
  if (r.cancelled) return "cancelled";
  if (r.timed_out) {
    switch (r.phase) {
      case HttpCallResult::Phase::connect: return "timeout_connect";
      case HttpCallResult::Phase::request: return "timeout_request";
      default: return "timeout_response";
    }
  }
  return r.phase == HttpCallResult::Phase::connect ? "connect_error" : "broken";
}

AttemptResult attempt_result(const HttpCallResult& r) {
  if (r.phase == HttpCallResult::Phase::done) return AttemptResult::status(r.status, r.retry_after);
  if (r.timed_out) return AttemptResult::timeout();
  if (r.phase == HttpCallResult::Phase::connect) return AttemptResult::connect_error();
  return AttemptResult::timeout();  // the connection broke during the exchange
}

boost::json::value body_value(const std::string& body) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(body, ec);
  if (ec) return boost::json::string{body};
  return v;
}

void run_forward(Upstream& up, const std::string& body, JobContext& ctx) {
  const std::string_view key = ctx.idempotency_key();
  HttpCallResult last;
  auto attempt = [&](Duration child_budget) {
    ctx.checkpoint();
    HttpCall call{.host = up.config.host, .port = up.config.port, .target = up.config.target,
                  .headers = {{std::string{kRequestTimeoutHeader}, format_request_timeout_ms(child_budget)}},
                  .body = body, .max_response_bytes = up.config.max_response_bytes};
    if (!key.empty()) call.headers.emplace_back("idempotency-key", std::string{key});
    const TimePoint start = Clock::now();
    const Duration before = ctx.deadline().slack(start);
    // The attempt ends by its child budget plus the reserve: the upstream answers within the
    // budget it was given, and the reserve leaves time for the answer to travel back.
    last = http_post(call, Deadline::after(child_budget + up.config.reserve, start), ctx.token());
    const TimePoint end = Clock::now();
    if (last.phase == HttpCallResult::Phase::done) up.record_latency(end - start);
    up.metrics.attempt(up.name, result_label(last), before, ctx.deadline().slack(end));
    return attempt_result(last);
  };
  const RetryRun run = run_with_retries(
      up.policy,
      {.deadline = ctx.deadline(), .attempt_estimate = up.attempt_estimate(),
       .min_useful = up.min_useful, .attempt_cap = up.config.cap,
       .sleep = [&](Duration d) { ctx.sleep_for(d); }, .retry_budget = &up.retry_budget,
       .breaker = &up.breaker},
      attempt);
  up.metrics.call(up.name, run.reason, run.attempts);
  ctx.checkpoint();  // cancelled while in flight: the outcome says so

  boost::json::object result{{"attempts", run.attempts}};
  if (last.phase == HttpCallResult::Phase::done) {
    result["status"] = last.status;
    result["body"] = body_value(last.body);
  } else if (run.attempts > 0) {
    result["error"] = last.error;
    result["phase"] = to_string(last.phase);
  }
  ctx.set_result(boost::json::serialize(result));
  switch (run.reason) {
    case RetryReason::succeeded: return;
    case RetryReason::breaker_open:
      throw JobFailed{Reason::breaker_open, "the circuit breaker of upstream " + up.config.url + " is open"};
    case RetryReason::deadline_exceeded_before_dispatch:
      throw JobFailed{Reason::deadline_exceeded_before_dispatch, "too little budget left to call the upstream"};
    case RetryReason::retry_skipped_budget:
      throw JobFailed{Reason::retry_skipped_budget, "the budget cannot cover another attempt"};
    default: break;
  }
  // The upstream had the rest of this job's budget and ran out of it: so did this job.
  if (last.phase == HttpCallResult::Phase::done && last.status == 504) throw Cancelled{CancelCause::deadline};
  const std::string what = last.phase == HttpCallResult::Phase::done
                               ? "upstream answered " + std::to_string(last.status)
                               : "upstream " + std::string{to_string(last.phase)} + " failed: " + last.error;
  throw std::runtime_error{what + " after " + std::to_string(run.attempts) + " attempt(s) (" +
                           std::string{to_string(run.reason)} + ")"};
}

}  // namespace

JobKind make_forward_kind(const DaemonConfig& config) {
  auto metrics = std::make_shared<UpstreamMetrics>();
  auto upstreams = std::make_shared<std::map<std::string, std::unique_ptr<Upstream>, std::less<>>>();
  for (const auto& [name, c] : config.upstreams) {
    auto up = std::make_unique<Upstream>(name, c, config.runtime.budget.min_useful, *metrics);
    metrics->watch_breaker(name, up->breaker);
    upstreams->emplace(name, std::move(up));
  }
  return {.prepare = [upstreams, metrics](const boost::json::object& args) -> JobHandler {
    reject_unknown_keys(args, {"upstream", "body"});
    const std::string name = require_string(args, "upstream");
    const auto it = upstreams->find(name);
    if (it == upstreams->end()) throw ArgsError{"args.upstream", "unknown upstream \"" + name + "\""};
    const boost::json::value* body = args.if_contains("body");
    if (body == nullptr) throw ArgsError{"args.body", "is required"};
    return [up = it->second.get(), upstreams, text = boost::json::serialize(*body)](JobContext& ctx) {
      run_forward(*up, text, ctx);
    };
  },
          .metrics = [upstreams, metrics] { return metrics->render(); },
          // One estimate per configured upstream (names from the config: bounded).
          .estimate_key = [upstreams](const boost::json::object& args) {
            return configured_estimate_key(args, "upstream", *upstreams, "forward");
          }};
}

}  // namespace sandglass::daemon
