#include "daemon/api/api.hpp"

#include "daemon/cluster/cluster_node.hpp"

#include "daemon/http/http_status.hpp"
#include "daemon/api/batch_request.hpp"
#include "daemon/api/job_request.hpp"
#include "daemon/api/jobs_listing.hpp"
#include "daemon/ui/status_page.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

namespace sandglass::daemon {
namespace {

constexpr std::string_view kJobsPath = "/v1/jobs";
constexpr std::string_view kJobPathPrefix = "/v1/jobs/";
// How long a DELETE waits for the cancelled job to end before it answers 202 "cancelling".
constexpr Duration kCancelAnswerWait = std::chrono::milliseconds{100};

std::string json_text(const boost::json::object& o) { return boost::json::serialize(o); }

HttpResponse method_not_allowed(std::string_view allow) {
  HttpResponse r = error_response(kStatusMethodNotAllowed, "method not allowed", "method");
  r.headers.emplace_back("Allow", std::string{allow});
  return r;
}

// "/v1/jobs/123" -> 123; nullopt for anything else under /v1/jobs/.
std::optional<std::uint64_t> job_id_of(std::string_view path) {
  const std::string_view digits = path.substr(kJobPathPrefix.size());
  std::uint64_t id = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (ec != std::errc{} || end != digits.data() + digits.size() || digits.empty()) {
    return std::nullopt;
  }
  return id;
}

// What makes two requests with one idempotency key the same request (the budget may differ:
// a retry has less time left).
std::string fingerprint(const JobRequest& req) {
  return json_text({{"kind", req.kind}, {"args", req.args}, {"priority", to_string(req.priority)}});
}

// 401 for a request without the configured bearer token. Says nothing of what was sent.
HttpResponse unauthorized(BearerAuth::Verdict verdict) {
  HttpResponse r = error_response(kStatusUnauthorized,
                                  verdict == BearerAuth::Verdict::missing
                                      ? "a bearer token is required: Authorization: Bearer TOKEN"
                                      : "the bearer token is not valid",
                                  "authorization");
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

// Retry-After for a refusal the client may retry: whole seconds, rounded up, at least 1. A
// refusal that predicted when the same job would be admitted (Outcome::retry_after) says so;
// when no wait would do (an estimate that never ages out), none is sent.
std::string retry_after_seconds(const Outcome& outcome) {
  if (outcome.retry_after == Duration::max()) return {};
  const auto seconds = std::chrono::ceil<std::chrono::seconds>(outcome.retry_after).count();
  return std::to_string(std::max<std::int64_t>(seconds, 1));
}

std::string known_kinds(const KindRegistry& kinds) {
  std::string out;
  for (const std::string& name : kinds.names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

HttpResponse error_response(unsigned status, std::string_view message, std::string_view field) {
  boost::json::object body{{"error", message}};
  if (!field.empty()) body["field"] = field;
  return {.status = status, .body = json_text(body)};
}

HttpResponse no_such_job() {
  return error_response(kStatusNotFound, "no such job (unknown or forgotten)", "id");
}

HttpResponse outcome_response(const Outcome& outcome, const Arrival& arrival) {
  const HttpStatus s = http_status_of(outcome, arrival.cancelled_by_request);
  HttpResponse r{.status = s.code,
                 .body = record_json(outcome.id, outcome.kind, &outcome, {}, {}, arrival)};
  if (s.retry_after) {
    const std::string seconds = retry_after_seconds(outcome);
    if (!seconds.empty()) r.headers.emplace_back("Retry-After", seconds);
  }
  return r;
}

Api::Intake Api::intake(const HttpRequest& head, TimePoint now) const {
  const std::string_view path = split_target(head.target).path;
  if (!is_open_path(path)) {
    if (const auto verdict = auth_.check(head); verdict != BearerAuth::Verdict::allowed) {
      return {.answer = unauthorized(verdict)};
    }
  }
  if (path != kJobsPath || head.method != "POST") return {};
  // The most budget the request can have: what its headers name (its body may only lower it),
  // or else the largest the policy grants.
  const BudgetPolicy& policy = runtime_.options().budget;
  const auto named = header_budget(head);
  const Duration most = named ? std::min(*named, policy.max_budget) : policy.max_budget;
  // Admission refuses a deadline with less than min_useful left (budget_too_small); the
  // deadline is arrival + budget - reserve. A budget too small on its face is left to admission,
  // which records the job and counts it by kind.
  const Duration kept_back = policy.reserve + policy.min_useful;
  if (most < kept_back) return {};
  const TimePoint arrived = head.arrived_at.value_or(now);
  const TimePoint spent_at = saturating_add(arrived, most - kept_back);
  if (now < spent_at) return {.budget_spent_at = spent_at};
  const HttpStatus status = http_status_of(Reason::budget_too_small);
  const auto ms = [](Duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  boost::json::object body{
      {"state", to_string(state_of(Reason::budget_too_small))},
      {"reason", to_string(Reason::budget_too_small)},
      {"error", "the request's budget (at most " + std::to_string(ms(most)) +
                    " ms) was spent before the daemon had read it, " +
                    std::to_string(ms(now - arrived)) + " ms after its first byte"},
      {"timings", {{"intake_ms", ms(now - arrived)}, {"budget_ms", ms(most)}}}};
  return {.answer = HttpResponse{.status = status.code, .body = json_text(body)},
          .budget_spent_at = spent_at};
}

Api::ClientGone Api::handle(const HttpRequest& request, Respond respond) {
  const std::string_view path = split_target(request.target).path;
  const std::string_view method = request.method;
  const TimePoint now = Clock::now();
  if (Intake in = intake(request, now); in.answer) {
    respond(std::move(*in.answer));
    return {};
  }
  if (path == kBatchPath) {
    if (method != "POST") {
      respond(method_not_allowed("POST"));
    } else {
      submit_batch(request, request.arrived_at.value_or(now), respond);
    }
    return {};
  }
  if (path == kJobsPath) {
    if (method == "GET") {
      list_jobs(split_target(request.target).query, respond);
      return {};
    }
    if (method != "POST") {
      respond(method_not_allowed("GET, POST"));
      return {};
    }
    return submit(request, request.arrived_at.value_or(now), respond);
  }
  HttpResponse r;
  if (is_status_page_path(path)) {
    r = status_page_response(path, method);
  } else if (path == "/v1/stats") {
    if (method == "GET" && cluster_ != nullptr) {
      cluster_->stats(stats().body, std::move(respond));  // with the cluster's figures added
      return {};
    }
    r = method == "GET" ? stats() : method_not_allowed("GET");
  } else if (path.starts_with(kJobPathPrefix)) {
    const auto id = job_id_of(path);
    if (id && method == "GET") return get_job(*id, split_target(request.target).query, respond);
    if (id && cluster_ != nullptr && method == "DELETE") {
      cluster_->cancel(*id, std::move(respond));
      return {};
    }
    if (!id) {
      r = error_response(kStatusNotFound, "no such job", "id");
    } else if (method == "DELETE") {
      r = cancel_job(*id);
    } else {
      r = method_not_allowed("GET, DELETE");
    }
  } else if (path == "/metrics" || path == "/healthz" || path == "/readyz") {
    if (method != "GET") {
      r = method_not_allowed("GET");
    } else if (path == "/metrics") {
      r = metrics();
    } else if (path == "/healthz") {
      r = {.body = R"({"status":"ok"})"};
    } else if (draining_.load(std::memory_order_relaxed)) {
      r = {.status = kStatusServiceUnavailable, .body = R"({"status":"draining"})"};
    } else if (cluster_ != nullptr && !cluster_->ready()) {
      r = {.status = kStatusServiceUnavailable, .body = R"({"status":"database unreachable"})"};
    } else {
      r = {.body = R"({"status":"ready"})"};
    }
  } else {
    r = error_response(kStatusNotFound, "no such path", "path");
  }
  respond(std::move(r));
  return {};
}

std::optional<RequestError> Api::prepare(JobRequest& req, Prepared& out) const {
  const JobKind* kind = kinds_.find(req.kind);
  if (kind == nullptr) {
    return RequestError{"kind", "unknown kind \"" + req.kind + "\"; known: " + known_kinds(kinds_)};
  }
  try {
    out.handler = kind->prepare(req.args);  // in cluster mode only to check the args here
    if (kind->estimate_key) out.estimate_key = kind->estimate_key(req.args);
    if (req.expected == Duration::zero() && kind->expected) req.expected = kind->expected(req.args);
  } catch (const ArgsError& e) {
    return RequestError{e.field(), e.what()};
  } catch (const std::exception& e) {
    return RequestError{"args", e.what()};
  }
  return std::nullopt;
}

Api::Submitted Api::submit_prepared(const JobRequest& req, Prepared prepared, TimePoint arrived_at) {
  auto submit_job = [&]() -> JobId {
    // The budget counts from the request's first byte (with a delay, from arrival + delay),
    // and the handler's deadline keeps the reserve back for the answer. (The runtime grants
    // what is left of it at submission, or rejects it as budget_too_small.)
    const BudgetPolicy& policy = runtime_.options().budget;
    const Duration budget = policy.grant(req.budget).budget;
    JobSpec spec{.kind = req.kind, .priority = req.priority,
                 .deadline = Deadline::after(budget - std::min(budget, policy.reserve),
                                             saturating_add(arrived_at, req.delay)),
                 .idempotency_key = req.idempotency_key,
                 .estimate_key = std::move(prepared.estimate_key),
                 .expected = req.expected,
                 .retry = req.retry,
                 .delay = req.delay};
    metrics_.job_submitted(spec.kind, spec.priority);
    auto on_outcome = [this, priority = spec.priority](const Outcome& o) {
      // Only what the daemon decided: never args, results or error texts, which carry content.
      spdlog::debug("job {} ({}) ended {} {}", o.id, o.kind, to_string(o.state), to_string(o.reason));
      metrics_.job_finished(o, priority);
      live_stats_.job_finished(o);
      records_.finish(o);  // answers the waiting clients
    };
    const JobHandle job =
        runtime_.submit(std::move(spec), std::move(prepared.handler), std::move(on_outcome));
    // Up to the runtime's own stamp, from which queue_ms counts: the four timings then add up
    // to the deadline however long the submitter was preempted within submit.
    // A delayed job's stamp is its start: its delay is not intake.
    const Duration intake = job.progress().enqueued_at - arrived_at - req.delay;
    records_.add(job, req.kind, {.intake = intake, .budget = budget});
    return job.id();
  };
  const bool scheduled = req.delay > Duration::zero();
  if (req.idempotency_key.empty()) return {.id = submit_job(), .scheduled = scheduled};
  const auto keyed = records_.submit_keyed(req.idempotency_key, fingerprint(req), submit_job);
  return {.id = keyed.id, .attached = keyed.attached, .conflict = keyed.conflict,
          .scheduled = scheduled};
}

HttpResponse Api::answer_now(const Submitted& submitted) {
  const JobId id = submitted.id;
  if (submitted.conflict) {
    return error_response(kStatusConflict,
                          "idempotency_key names job " + std::to_string(id) +
                              ", submitted with a different kind, args or priority",
                          "idempotency_key");
  }
  // Rejected at admission, or an earlier job with this key that is over: say so at once. (A
  // new job that was quick enough to be over already still gets its 202.)
  if (auto o = records_.outcome(id); o && (submitted.attached || o->state == State::rejected)) {
    HttpResponse r = outcome_response(*o);
    if (auto record = records_.find_json(id)) r.body = std::move(*record);  // with its arrival
    return r;
  }
  const std::string_view state = submitted.scheduled ? "scheduled" : "queued";
  HttpResponse r{.status = kStatusAccepted, .body = json_text({{"id", id}, {"state", state}})};
  r.headers.emplace_back("Location", std::string{kJobPathPrefix} + std::to_string(id));
  return r;
}

Api::ClientGone Api::submit(const HttpRequest& request, TimePoint arrived_at, Respond& respond) {
  auto parsed = parse_job_request(request, config_.limits.max_json_depth, config_.limits.max_delay);
  if (auto* e = std::get_if<RequestError>(&parsed)) {
    respond(error_response(kStatusBadRequest, e->message, e->field));
    return {};
  }
  JobRequest& req = std::get<JobRequest>(parsed);
  Prepared prepared;
  if (auto e = prepare(req, prepared)) {
    respond(error_response(kStatusBadRequest, e->message, e->field));
    return {};
  }
  if (cluster_ != nullptr) return cluster_->submit(std::move(req), arrived_at, std::move(respond));

  const Submitted submitted = submit_prepared(req, std::move(prepared), arrived_at);
  const JobId id = submitted.id;
  if (req.wait && !submitted.conflict) {
    const Respond unanswered = respond;
    const auto answer = [respond = std::move(respond)](const Outcome& o, const Arrival& arrival) {
      respond(outcome_response(o, arrival));
    };
    if (!records_.wait(id, answer)) {
      // Only when records are kept for so short a time that this one went before it was read.
      unanswered(error_response(500, "the job's record was forgotten before its answer; raise records.keep_ms or records.max_count", "id"));
      return {};
    }
    return [this, id] { records_.leave(id); };
  }
  respond(answer_now(submitted));
  return {};
}

void Api::submit_batch(const HttpRequest& request, TimePoint arrived_at, Respond& respond) {
  auto parsed = parse_batch_request(request, config_.limits.max_json_depth, config_.limits.max_batch,
                                    config_.limits.max_delay);
  if (auto* e = std::get_if<RequestError>(&parsed)) {
    respond(error_response(kStatusBadRequest, e->message, e->field));
    return;
  }
  std::vector<JobRequest>& jobs = std::get<std::vector<JobRequest>>(parsed);
  // Every job is checked before any is submitted: a malformed batch starts nothing.
  std::vector<Prepared> prepared(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (auto e = prepare(jobs[i], prepared[i])) {
      const RequestError placed = in_batch_item(i, std::move(*e));
      respond(error_response(kStatusBadRequest, placed.message, placed.field));
      return;
    }
  }
  if (cluster_ != nullptr) {
    cluster_->submit_many(std::move(jobs), arrived_at, [respond = std::move(respond)](
                                                           std::vector<HttpResponse> answers) {
      respond(batch_response(answers));
    });
    return;
  }
  std::vector<HttpResponse> answers;
  answers.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    answers.push_back(answer_now(submit_prepared(jobs[i], std::move(prepared[i]), arrived_at)));
  }
  respond(batch_response(answers));
}

Api::ClientGone Api::get_job(std::uint64_t id, std::string_view query, Respond& respond) {
  auto wait = parse_wait_query(query, false);
  if (auto* e = std::get_if<RequestError>(&wait)) {
    respond(error_response(kStatusBadRequest, e->message, e->field));
    return {};
  }
  if (cluster_ != nullptr) {
    cluster_->job_record(id, std::get<bool>(wait), std::move(respond));
    return {};
  }
  if (!std::get<bool>(wait)) {
    respond(job_record(id));
    return {};
  }
  auto gone = record_waits_.wait(records_, id, runtime_.options().budget.reserve, respond);
  if (!gone) {
    respond(no_such_job());
    return {};
  }
  return std::move(*gone);
}

HttpResponse Api::job_record(std::uint64_t id) {
  auto json = records_.find_json(id);
  if (!json) return no_such_job();
  return {.body = std::move(*json)};
}

HttpResponse Api::cancel_job(std::uint64_t id) {
  const JobHandle job = records_.cancel(id);
  // Blocks this I/O thread at most kCancelAnswerWait: a queued job ended on this thread
  // already, a running one ends at its next checkpoint. The wait is for the record, which its
  // outcome callback finishes after counting the outcome in the stats and metrics, not for the
  // job's handle, which has the outcome before that callback runs.
  if (job && !records_.outcome_until(id, Deadline::after(kCancelAnswerWait))) {
    return {.status = kStatusAccepted,
            .body = json_text({{"id", id}, {"state", "cancelling"}, {"cause", "caller"}})};
  }
  return job_record(id);
}

HttpResponse Api::metrics() {
  RuntimeStats runtime = runtime_.stats();
  if (cluster_ != nullptr) cluster_->describe_admission(runtime);
  std::string body = metrics_.render(runtime, runtime_.options().workers,
                                     draining_.load(std::memory_order_relaxed),
                                     runtime_.estimates());
  for (const std::string& name : kinds_.names()) {
    if (const JobKind* kind = kinds_.find(name); kind->metrics) body += kind->metrics();
  }
  if (cluster_ != nullptr) body += cluster_->metrics_text();
  return {.content_type = "text/plain; version=0.0.4; charset=utf-8", .body = std::move(body)};
}

void Api::list_jobs(std::string_view query, Respond& respond) {
  auto parsed = parse_listing_query(query);
  if (auto* e = std::get_if<RequestError>(&parsed)) {
    respond(error_response(kStatusBadRequest, e->message, e->field));
  } else if (cluster_ != nullptr) {
    cluster_->list_jobs(std::get<ListingQuery>(parsed), std::move(respond));
  } else {
    respond({.body = listing_json(records_, std::get<ListingQuery>(parsed), Clock::now())});
  }
}

HttpResponse Api::stats() {
  const TimePoint now = Clock::now();
  std::vector<JobRecords::View> live;
  for (const JobId id : records_.live_ids()) {
    if (auto v = records_.view(id)) live.push_back(std::move(*v));
  }
  std::string kind_metrics;
  for (const std::string& name : kinds_.names()) {
    if (const JobKind* kind = kinds_.find(name); kind->metrics) kind_metrics += kind->metrics();
  }
  RuntimeStats runtime = runtime_.stats();
  if (cluster_ != nullptr) cluster_->describe_admission(runtime);
  const LiveStats::Snapshot snapshot = live_stats_.snapshot(now);
  const std::vector<EstimateSnapshot> estimates = runtime_.estimates();
  return {.body = stats_json({.runtime = runtime, .options = runtime_.options(), .live = snapshot,
                              .live_jobs = live, .estimates = estimates, .kind_metrics = kind_metrics,
                              .draining = draining_.load(std::memory_order_relaxed)})};
}

}  // namespace sandglass::daemon
