// job_request.hpp (private) — `JobRequest`, a validated `POST /v1/jobs`, and its parser.
//
//   body:    {"kind": str, "args": object?, "priority": "critical"|"high"|"normal"|"sheddable"?,
//             "timeout_ms": int?, "idempotency_key": str?, "expected_ms": int?,
//             "delay_ms": int?, "retry": {"max_attempts": int, "backoff_ms": int?}?}
//   headers: x-request-timeout-ms, grpc-timeout, idempotency-key (when the body has none)
//   query:   wait=true|false
//
// Time rules: the budget is the smallest of the two headers and `timeout_ms`, whichever are
// given; none given leaves it empty (the runtime's default applies); huge values saturate and
// the runtime clamps them. A malformed value is an error naming it; so is any unknown field.
//
// Thread safety: pure functions.
#pragma once

#include "daemon/http/http_message.hpp"

#include <sandglass/deadline.hpp>
#include <sandglass/job_spec.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace sandglass::daemon {

struct JobRequest {
  std::string kind;
  boost::json::object args;  // empty when the request had none
  Priority priority = Priority::normal;
  std::optional<Duration> budget;
  // expected_ms, a positive integer: the job's own expected run time (JobSpec::expected);
  // zero when the request names none.
  Duration expected{};
  std::string idempotency_key;
  bool wait = true;  // answer with the terminal outcome (else 202 at once)
  // delay_ms: the job starts no earlier than arrival + delay, and its budget counts from then
  // (JobSpec::delay); zero when the request names none.
  Duration delay{};
  std::optional<JobRetry> retry;  // "retry", when the request has one (JobSpec::retry)
};

// What is wrong with a request: answered 400 `{"error": message, "field": field}`.
struct RequestError {
  std::string field;    // "timeout_ms", "grpc-timeout", "args.ms", "body", ...
  std::string message;
};

inline constexpr std::size_t kMaxIdempotencyKeyBytes = 256;
inline constexpr int kMaxRetryAttempts = 100;  // retry.max_attempts: 1 to this
inline constexpr std::chrono::milliseconds kDefaultMaxDelay{3'600'000};
inline constexpr std::string_view kIdempotencyKeyHeader = "idempotency-key";

// `max_delay`: the largest delay_ms accepted (ServerLimits::max_delay).
std::variant<JobRequest, RequestError> parse_job_request(
    const HttpRequest& request, std::size_t max_json_depth,
    std::chrono::milliseconds max_delay = kDefaultMaxDelay);

// A request body as JSON, nested at most `max_json_depth` deep, in which no object names a key
// twice (Boost.JSON keeps the last of them, another reader may keep the first); the error names
// the body or the duplicate key's dotted path, with each array element's index when
// `index_elements` ("jobs[2].kind").
std::variant<boost::json::value, RequestError> parse_json_body(std::string_view text,
                                                              std::size_t max_json_depth,
                                                              bool index_elements);

// Reads one job object's fields ("kind", "args", ...) into `out`. An error names the field as
// the job object's own ("kind", "args.ms"). `max_delay`: the largest delay_ms accepted.
std::optional<RequestError> read_job_fields(const boost::json::object& job, JobRequest& out,
                                            std::chrono::milliseconds max_delay);

// Lowers out.budget to what the budget headers (x-request-timeout-ms, grpc-timeout) name; an
// error names a malformed one.
std::optional<RequestError> read_wire_budgets(const HttpRequest& request, JobRequest& out);

// The query of POST /v1/jobs and of GET /v1/jobs/{id}: `wait=true|false` (or 1|0), nothing
// else; without it, `wait_by_default`. An unknown parameter is an error naming it.
std::variant<bool, RequestError> parse_wait_query(std::string_view query, bool wait_by_default);

// The budget the headers alone name (the smaller of x-request-timeout-ms and grpc-timeout), an
// upper bound of the request's budget read before its body; nullopt when they name none or one
// is malformed (parse_job_request then says which).
std::optional<Duration> header_budget(const HttpRequest& request);

// Splits "/v1/jobs?wait=false" at '?'. The query is empty when there is none. An absolute
// target ("http://127.0.0.1:8080/v1/jobs") is first reduced to its path and query.
struct Target {
  std::string_view path;
  std::string_view query;
};
Target split_target(std::string_view target) noexcept;

}  // namespace sandglass::daemon
